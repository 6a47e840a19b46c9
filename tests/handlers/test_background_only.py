"""An interactive child runs in the background only: `spawn` and `preflight` with
`mode: "task"` are invalid params (-32602) naming where each child was made
interactive, before anything is planned further or started."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from subagent_host.handlers.background_only import WAITS_FOREVER
from tests.handlers.test_lifecycle import Session

CAT: Any = ["cat"]


@pytest.fixture
def session(tmp_path: Path) -> Session:
    return Session(tmp_path)


@pytest.mark.parametrize("method", ["spawn", "preflight"])
@pytest.mark.parametrize(
    ("params", "paths"),
    [
        ({"command": CAT, "interactive": True}, ["interactive"]),
        (
            {
                "interactive": True,
                "tasks": [{"command": CAT}, {"command": CAT, "interactive": False}],
            },
            ["tasks[0].interactive"],
        ),
        (
            {"chain": [{"command": CAT}, {"command": CAT, "interactive": True}]},
            ["chain[1].interactive"],
        ),
    ],
)
async def test_task_mode_with_an_interactive_child_is_invalid_params(
    session: Session, method: str, params: dict[str, Any], paths: list[str]
) -> None:
    session.send(method, {**params, "mode": "task"}, msg_id=1)
    [reply] = await session.settle()
    assert reply["error"]["code"] == -32602
    assert reply["error"]["data"]["errors"] == [
        {"path": path, "message": WAITS_FOREVER} for path in paths
    ]


async def test_task_mode_without_an_interactive_child_is_no_params_problem(
    session: Session,
) -> None:
    """The same request one-shot is planned (and refused for its bad cwd, not its mode)."""
    session.send(
        "preflight",
        {"command": CAT, "mode": "task", "interactive": False, "cwd": "/nonexistent"},
        msg_id=1,
    )
    [reply] = await session.settle()
    assert reply["result"]["accepted"] is False
    assert "invalid-cwd" in [d["code"] for d in reply["result"]["diagnostics"]]
