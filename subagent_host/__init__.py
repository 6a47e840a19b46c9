"""subagent-host: run coding-agent CLIs and commands as supervised subagents over JSON-RPC."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("subagent-host")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

SERVER_NAME = "subagent-host"
PROTOCOL_VERSION = "1"
