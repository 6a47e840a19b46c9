"""The CLI versions `initialize` reports as tested are the ones the tests install."""

from __future__ import annotations

import json
from pathlib import Path

from subagent_host.backends.tested_versions import ACP_TESTED_VERSIONS, TESTED_VERSIONS

PACKAGE_JSON = Path(__file__).resolve().parents[2] / "agents" / "package.json"
PACKAGES = {
    "pi": "@mariozechner/pi-coding-agent",
    "claude": "@anthropic-ai/claude-code",
    "codex": "@openai/codex",
}
# By the `agentInfo.name` each agent answers `initialize` with.
ACP_PACKAGES = {
    "qwen-code": "@qwen-code/qwen-code",
    "@agentclientprotocol/codex-acp": "@agentclientprotocol/codex-acp",
    "@agentclientprotocol/claude-agent-acp": "@agentclientprotocol/claude-agent-acp",
}


def test_tested_versions_are_the_versions_agents_package_json_pins() -> None:
    pinned = json.loads(PACKAGE_JSON.read_text())["dependencies"]
    assert {backend: pinned[package] for backend, package in PACKAGES.items()} == dict(
        TESTED_VERSIONS
    )


def test_the_acp_agents_tested_are_the_versions_agents_package_json_pins() -> None:
    pinned = json.loads(PACKAGE_JSON.read_text())["dependencies"]
    assert {agent: pinned[package] for agent, package in ACP_PACKAGES.items()} == dict(
        ACP_TESTED_VERSIONS
    )
