"""Backends: the adapter interface, the command/pi/claude/codex adapters and the process supervisor.

Uses psutil and the standard library only; knows nothing of JSON-RPC.
"""
