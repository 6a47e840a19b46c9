"""The protocol conformance harness: `subagent-host conformance`.

It runs the cases of protocol.md against any server command over its stdin and
stdout, so it imports nothing of the server: what it knows of the protocol is
written in its cases, each citing the section of protocol.md it checks. The
server's own start-up never imports this package (cli.py loads it only for the
`conformance` subcommand).
"""
