"""A configured ACP agent as a backend, as planning sees it (protocol.md §24.1): its
name is a backend; its children are driven through ACP, interactive or not; what it
chooses itself (model, thinking, tools, what it loads) and budgets it may never report
are refused; an agent definition's body leads its first prompt."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import pytest

from subagent_host.backends.acp import AcpBackend
from subagent_host.backends.base import Backend
from subagent_host.backends.command import CommandBackend
from subagent_host.planning.plan import is_driven, prepared
from subagent_host.values.choices import Approvals
from tests.planning.conftest import check_request

QWEN: Final = AcpBackend("qwen", "qwen", ("--acp", "--model", "m"), {"QWEN_X": "1"})


@pytest.fixture
def acp_backends(tmp_path: Path) -> dict[str, Backend]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "qwen").write_text("#!/bin/sh\n")
    (bin_dir / "qwen").chmod(0o755)
    return {"command": CommandBackend(), "qwen": QWEN}


def test_an_acp_child_is_driven_and_launched_as_configured(
    acp_backends: dict[str, Backend], tmp_path: Path
) -> None:
    checked = check_request(acp_backends, tmp_path, backend="qwen", prompt="hi")
    assert checked.plan is not None, checked.diagnostics
    [child] = checked.plan.children
    assert (child.interactive, child.approvals) == (False, Approvals.CLI)
    assert is_driven(child, QWEN)
    launch = prepared(child, QWEN)
    assert launch.argv == ("qwen", "--acp", "--model", "m")
    assert launch.stdin is None  # the conversation writes it: stdin stays open
    assert launch.env == {"QWEN_X": "1", "PATH": str(tmp_path / "bin")}
    assert (child.model, child.tools, child.session_resources) == (None, None, None)


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        ("model", "qwen3", "not-honoured"),
        ("thinking", "high", "not-honoured"),
        ("tools", ["read"], "not-honoured"),
        ("sessionResources", "full", "not-honoured"),
        ("maxTokens", 1000, "tokens-not-reported"),
        ("maxCostUsd", 1.0, "cost-not-reported"),
    ],
)
def test_what_an_acp_agent_decides_itself_is_refused_naming_the_field(
    acp_backends: dict[str, Backend], tmp_path: Path, field: str, value: object, code: str
) -> None:
    request: dict[str, Any] = {"backend": "qwen", "prompt": "hi", field: value}
    checked = check_request(acp_backends, tmp_path, **request)
    assert checked.plan is None
    assert [(d.code, d.path) for d in checked.diagnostics if d.severity == "error"] == [
        (code, field)
    ]


def test_a_backend_no_file_configured_is_unavailable(
    acp_backends: dict[str, Backend], tmp_path: Path
) -> None:
    checked = check_request(acp_backends, tmp_path, backend="gemini", prompt="hi")
    assert checked.plan is None
    [error] = [d for d in checked.diagnostics if d.severity == "error"]
    assert (error.code, error.path) == ("backend-unavailable", "backend")
    assert "'gemini' is not known to this server (known: command, qwen)" in error.message
