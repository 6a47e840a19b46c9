"""The agent CLI versions the project's tests run against: the one place they are written.

`agents/package.json` pins the CLIs the end-to-end tests install; a test
(tests/backends/test_tested_versions.py) fails when the two disagree. `initialize`
and `ping` report each backend's as `testedVersion`; a `command` child runs whatever
program it names, so it has none.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

TESTED_VERSIONS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "pi": "0.73.1",  # @mariozechner/pi-coding-agent
        "claude": "2.1.197",  # @anthropic-ai/claude-code
        "codex": "0.171.0",  # @openai/codex
    }
)

ACP_TESTED_VERSIONS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "qwen-code": "0.24.4",  # @qwen-code/qwen-code: the ACP agent the tests drive (`qwen --acp`)
        "@agentclientprotocol/codex-acp": "2.6.0",  # running the pinned codex
        "@agentclientprotocol/claude-agent-acp": "0.101.0",
    }
)
"""The ACP agents the tests drive through backends/interactive/acp_client.py, by the
`agentInfo.name` each answers `initialize` with: an ACP agent is named by configuration,
so a configured backend's `testedVersion` is the one of the agent its probe says it is."""
