"""Runs: the state machine, the scheduler, the rules of approvals and fingerprints.

Never sees a wire type; handlers translate (STYLE.md §2).
"""
