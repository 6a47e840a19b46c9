"""The wire: framing, strict JSON, JSON-RPC 2.0 dispatch, wire types and error codes.

Knows nothing of processes or runs; handlers sit above it (STYLE.md §2).
"""
