"""Agent definitions: markdown files naming an agent, its tools, model and instructions.

A leaf package: it reads files and imports nothing else of ours, so spawn,
preflight and the CLI can all use it. `definitions` parses one file;
`discovery` finds them on disk and decides which names are usable.
"""
