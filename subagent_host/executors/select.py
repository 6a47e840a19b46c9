"""Choose the executor the configuration names (`--executor`, `executor` in a file)."""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping
from typing import Final

from subagent_host.backends.supervisor import Supervisor
from subagent_host.executors.base import Executor
from subagent_host.executors.local import LocalExecutor
from subagent_host.executors.ray_executor import RayExecutor
from subagent_host.settings import LOCAL, RAY, ExecutorChoice

MISSING_RAY: Final = "the ray executor needs Ray: pip install 'subagent-host[ray]'"


def unavailable(choice: ExecutorChoice) -> str | None:
    """Why the chosen executor cannot run here (the server then does not start), or None.

    Looks for Ray without importing it: its import takes half a second and the local
    executor never needs it.
    """
    if choice.kind == LOCAL:
        return None
    if choice.kind == RAY and importlib.util.find_spec("ray") is None:
        return MISSING_RAY
    return None


def executor_for(
    choice: ExecutorChoice, supervisor: Supervisor, env: Mapping[str, str]
) -> Executor:
    """The executor children run on; `unavailable(choice)` was None (cli.py checked).

    `env` is the server's environment, which a cluster's bridge process gets.
    """
    if choice.kind == RAY:
        return RayExecutor(supervisor, choice, env)
    return LocalExecutor(supervisor)
