"""Conversations with interactive agent CLIs through their own machine protocols.

One module per protocol (pi's `--mode rpc`, Claude Code's stream-json with control
requests, codex's `app-server`), each a `Conversation` (`base.py`): it reads the
CLI's stdout lines and says what to write back, without doing any I/O itself, so
the supervisor keeps owning the pipes and the tests can drive it line by line.

The drivers share one vocabulary (`base.py`): who answers approvals (`Approvals`),
the reactions (a permission asked or withdrawn, a message delivered or refused, a
turn's end that may name tools left running), and the CLI's `session_id`. Each has
the same two entry points, `interactive_launch(backend, item, approvals)` and
`for_item(item, approvals)`, and `drivers.py` maps a backend's id to them.
"""
