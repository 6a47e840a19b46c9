"""Interactive children run in the background only: a `task`-mode request is invalid.

An interactive child ends when it is closed, stopped or idle for `idleTimeoutMs`, not
when its task is done, so an answer that waits for it would wait on the caller
itself (protocol.md §23.1). `spawn`, `preflight` and `resume` refuse `mode: "task"`
for one with -32602, naming where it was made interactive.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from subagent_host.rpc.errors import InvalidParams
from subagent_host.rpc.param_problems import ParamProblem
from subagent_host.values import TASK_MODE

WAITS_FOREVER: Final = (
    'an interactive child runs in the background only: mode "task" would wait until it '
    "is closed (leave mode out, or make it background)"
)


def refuse_task_mode(mode: str | None, interactive: Sequence[str]) -> None:
    """InvalidParams, one problem per `interactive` path, when `mode` is `task`."""
    if mode == TASK_MODE and interactive:
        raise InvalidParams([ParamProblem(path, WAITS_FOREVER) for path in interactive])
