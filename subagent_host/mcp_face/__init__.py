"""The MCP face: `subagent-host mcp` serves the runs of the one core to an MCP client.

Any MCP client (Claude Code, Codex, Cursor, ...) starts `subagent-host mcp` over
stdio and gets eight tools: `spawn`, `wait`, `status`, `stop`, `send`, `interrupt`,
`close` and `agents_list` (protocol.md §22); the permissions its runs ask are asked
of the human through MCP elicitation (`permissions.py`). The face runs nothing
itself: it starts its own `subagent-host serve` child with the same options and
speaks the protocol to it through the client library (`subagent_host.client.Host`),
as `subagent-host run` does, so every run goes through the same wire path, is
recorded in the same state directory, and ends the same way when the client goes
away.

The official `mcp` SDK is an optional extra (`pip install 'subagent-host[mcp]'`) and
is imported in this package only (an import contract says so); `command.py` loads it
when the subcommand runs.
"""
