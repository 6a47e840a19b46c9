"""subagent-host: run coding-agent CLIs and commands as supervised subagents over JSON-RPC."""

# The one place the version is written: pyproject.toml reads it from here
# (`[tool.setuptools.dynamic]`), so asking for it costs no `importlib.metadata`
# import (about 20 ms of every start, `--version` included).
__version__ = "0.1.0"

SERVER_NAME = "subagent-host"
PROTOCOL_VERSION = "1"
