"""Runs: the state machine, the scheduler, the SQLite store, resume tokens and fingerprints.

Never sees a wire type; handlers translate (STYLE.md §2).
"""
