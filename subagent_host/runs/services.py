"""What running children needs of the server, handed around as one value."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import attrs

from subagent_host.backends.base import Backend
from subagent_host.backends.identity import ProgramIdentities
from subagent_host.backends.sessions import SessionFiles
from subagent_host.backends.supervisor import Supervisor
from subagent_host.executors.base import Executor
from subagent_host.runs.outputs import OutputCaps
from subagent_host.runs.scheduler import Slots
from subagent_host.runs.state import RunStateMachine


@attrs.frozen(kw_only=True)
class ChildServices:
    """The server's parts every child goes through: made once (app.py), shared by the
    orchestrator and the child runner."""

    supervisor: Supervisor
    """This machine's processes: the local executor, git, version probes, sampling."""
    backends: Mapping[str, Backend]
    slots: Slots
    """The server-wide concurrency slots a child waits for."""
    state_machine: RunStateMachine
    caps: OutputCaps
    server_env: Mapping[str, str]
    """The server's own environment, which a child's is filtered from."""
    depth: int
    """This server's depth in a delegation chain; its children are one deeper."""
    sessions: SessionFiles | None = None
    """The agent CLIs' session files: sealed when an attempt ends, checked on resume."""
    executor: Executor | None = None
    """Where children run (executors/); None: here, through `supervisor`."""
    worktrees: Path | None = None
    """Where isolated children's worktrees are made (`<state>/worktrees`); None: nowhere,
    and an isolated child fails (`workspace-failed`)."""
    identities: ProgramIdentities | None = None
    """Which file each agent child's program is (recorded with its projection, compared on
    resume); None: not recorded (tests that build a server without version probes)."""
