"""Choose the executor the configuration names (`--executor`, `executor` in a file)."""

from __future__ import annotations

import importlib.util
from typing import Final

from subagent_host.backends.supervisor import Supervisor
from subagent_host.executors.base import Executor
from subagent_host.executors.local import local_executor
from subagent_host.settings import LOCAL, RAY, ExecutorChoice

MISSING_RAY: Final = "the ray executor needs Ray: pip install 'subagent-host[ray]'"
# This release plans and refuses placements; the cluster executor itself is not in it yet.
RAY_NOT_BUILT: Final = "the ray executor is not part of this version of subagent-host yet"


def unavailable(choice: ExecutorChoice) -> str | None:
    """Why the chosen executor cannot run here (the server then does not start), or None.

    Looks for Ray without importing it: its import takes half a second and the local
    executor never needs it.
    """
    if choice.kind == LOCAL:
        return None
    if choice.kind == RAY and importlib.util.find_spec("ray") is None:
        return MISSING_RAY
    return RAY_NOT_BUILT


def executor_for(choice: ExecutorChoice, supervisor: Supervisor) -> Executor:
    """The executor children run on; `unavailable(choice)` was None (cli.py checked)."""
    if choice.kind != LOCAL:
        raise ValueError(f"no {choice.kind!r} executor in this version")
    return local_executor(supervisor)
