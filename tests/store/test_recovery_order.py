"""The clean-up after a dead server: a resume is approved only once the session files are
sealed as the ended processes left them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from subagent_host.backends.supervisor import Supervisor
from subagent_host.store import instances
from subagent_host.store.database import Database
from subagent_host.store.recovery import _clean_up


class Steps:
    """A store and a supervisor that only write down what is asked of them, in order."""

    def __init__(self) -> None:
        self.done: list[str] = []

    async def call(self, fn: Callable[..., Any], *args: object) -> None:
        self.done.append(fn.__name__)

    async def sweep_gone_instances(self, grace_s: float) -> int:
        self.done.append("sweep")
        return 0

    async def end_strays(self, run_ids: frozenset[str], recorded: object, grace_s: float) -> int:
        self.done.append("end strays")
        return 1


async def test_session_files_are_sealed_before_the_clean_up_is_said_done() -> None:
    steps = Steps()
    await _clean_up(
        cast(Database, steps),
        cast(Supervisor, steps),
        ["run-1"],
        [instances.Leftover("run-1", 123, 1.0)],
        500,
        seal=lambda child: None,
    )
    assert steps.done == ["sweep", "end strays", "seal_interrupted", "finish_cleanups"]
