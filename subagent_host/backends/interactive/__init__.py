"""Conversations with interactive agent CLIs through their own machine protocols.

One module per protocol (pi's `--mode rpc`, Claude Code's stream-json with control
requests, codex's `app-server`), each a `Conversation` (`base.py`): it reads the
CLI's stdout lines and says what to write back, without doing any I/O itself, so
the supervisor keeps owning the pipes and the tests can drive it line by line.
"""
