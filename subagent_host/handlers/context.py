"""What every handler is given: the server's configuration and this connection's state."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

import attrs

from subagent_host.config import ServerConfig
from subagent_host.errors import BackendUnavailable
from subagent_host.executors.base import CLUSTER_UNAVAILABLE, ExecutorUnavailable
from subagent_host.handlers.background_only import refuse_task_mode
from subagent_host.handlers.progress import EventPublisher
from subagent_host.planning.plan import ServerLimits
from subagent_host.planning.toolchain import Toolchain
from subagent_host.rpc.lifecycle import Lifecycle
from subagent_host.rpc.wire import PingResult, SpawnParams, StopParams
from subagent_host.runs.orchestrator import RunOrchestrator
from subagent_host.settings import LOCAL
from subagent_host.store.run_store import RunStore
from subagent_host.values.choices import TrackingMode
from subagent_host.values.copying import shared
from subagent_host.values.error_data import Rejection
from subagent_host.values.facts import Diagnostic

if TYPE_CHECKING:
    # Imported where first used: a server's first reply (`ping`) needs neither.
    from subagent_host.agents.discovery import AgentCatalog
    from subagent_host.planning.check import CheckedSpawn
    from subagent_host.planning.items import AgentSources


def _call_now(callback: Callable[[], None]) -> None:
    callback()


@attrs.define
class HandlerContext:
    """Per-connection state shared by the handlers (one client per process, protocol.md §1)."""

    config: ServerConfig
    session_id: str
    """The session this connection is bound to (`ping {sessionId}` or `--session` sets it)."""
    orchestrator: RunOrchestrator
    store: RunStore
    """Runs wherever they are (live in memory or recorded on disk), and approvals."""
    progress: EventPublisher
    methods: tuple[str, ...] = ()
    client_name: str | None = None
    """The name the client gave in `initialize`'s `clientInfo` (who answered a permission)."""
    """The methods this server answers, as `ping` lists them."""
    toolchain: Toolchain = attrs.Factory(Toolchain)
    """The backends that can run here, and their CLIs' versions (probed once each)."""
    process_tracking: Callable[[], TrackingMode] = lambda: TrackingMode.MARKER
    """How the supervisor finds every process a child started, now (`ping` reports it):
    cgroup tracking falls back for later children when a cgroup cannot be made."""
    hold_output: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext
    """Keeps output queued while inside, to leave with the answer then emitted (Connection)."""
    framing: Callable[[], str] = lambda: "ndjson"
    """The framing this connection speaks, as detected (`initialize` reports it)."""
    notifications: tuple[str, ...] = ()
    """The notifications a client may send that this server acts on, sorted (`initialize`)."""
    after_answer: Callable[[Callable[[], None]], None] = _call_now
    """Runs a callback right after the running request's answer is emitted (rpc/answering.py)."""
    stop_elsewhere: Callable[[str, StopParams], Awaitable[bool]] | None = None
    """Stop a run another live server on this state directory holds, through its control
    socket (protocol.md §10.1): True if it had already ended; raises RunNotFound when that
    cannot be done. None: such a run is refused."""
    executor_ready: Callable[[], Awaitable[object]] | None = None
    """Waits until the executor can take children (a cluster joined); raises
    ExecutorUnavailable when it cannot. None: the local executor, always ready."""
    lifecycle: Lifecycle = attrs.Factory(Lifecycle)
    """LSP's `shutdown` and `exit` on this connection: the dispatcher's own, shared here."""
    any_session: bool = False
    """A control connection's (protocol.md §10.1): bound to no session, it reaches every run
    this server holds, by its full id (`handlers/live_runs.held_run`)."""
    last_ping: tuple[tuple[object, ...], PingResult] | None = attrs.field(default=None, repr=False)
    """`ping`'s last answer with what it was made of, answered again while that is equal."""

    def announcing(self, mode: str) -> AbstractContextManager[None]:
        """Around a launch or a resume: in `background` mode the run's notifications wait
        until this request's reply (which names the run) has been written."""
        if mode != "background":
            return contextlib.nullcontext()
        return self.progress.announcing(self.after_answer)

    async def require_executor(self) -> None:
        """-32002 when children cannot go where this server runs them: a launch or a
        resume asks before anything is started or spent (protocol.md §8.8)."""
        if self.executor_ready is None:
            return
        try:
            await self.executor_ready()
        except ExecutorUnavailable as exc:
            message = str(exc)
            problem = Diagnostic("error", CLUSTER_UNAVAILABLE, message)
            raise BackendUnavailable(message, data=Rejection((problem,))) from None

    async def agent_catalog(self) -> AgentCatalog:
        """The agent definitions as they are now (read afresh: files change between calls)."""
        from subagent_host.agents.discovery import discover

        config = self.config
        project = config.project_dir if config.project_trusted else None
        return await asyncio.to_thread(discover, config.config_dir, project)

    async def check_launch(self, params: SpawnParams) -> CheckedSpawn:
        """Every problem of a launch request, and its plan (`spawn` and `preflight`);
        InvalidParams for `mode: "task"` with an interactive child."""
        from subagent_host.handlers.snapshot_file import server_files
        from subagent_host.planning.check import check_spawn, uses_agents
        from subagent_host.planning.egress import consent_missing
        from subagent_host.planning.preview import unavailable_agents

        checked = check_spawn(
            params,
            backends=self.toolchain.adapters,
            limits=self.limits,
            depth=self.config.depth,
            server_cwd=os.getcwd(),
            sources=await self.agent_sources(uses_agents(params)),
            server_files=server_files(self.config),
        )
        refuse_task_mode(params.mode, checked.interactive)
        if checked.plan is not None and (
            unavailable := await unavailable_agents(checked.plan, self.toolchain)
        ):  # an ACP agent found but unable to answer as one (its probe said why)
            checked = attrs.evolve(checked, diagnostics=(*checked.diagnostics, *unavailable))
        # The admission policy holds for preflight and spawn alike (`--require-egress-consent`).
        if checked.plan is not None and (
            missing := consent_missing(checked.plan, self.config.require_egress_consent)
        ):
            return attrs.evolve(checked, diagnostics=(*checked.diagnostics, missing))
        return checked

    async def agent_sources(self, with_definitions: bool = True) -> AgentSources:
        """The configured defaults, and the definitions when a request names an agent."""
        from subagent_host.planning.items import AgentSources

        catalog = await self.agent_catalog() if with_definitions else None
        return AgentSources(
            settings=self.config.settings,
            catalog=catalog,
            placeable=self.config.executor.kind != LOCAL,
        )

    @property
    def resume_enabled(self) -> bool:
        """`enable_continue: false` in the configuration turns resume off."""
        return self.config.settings.enable_continue is not False

    @property
    def backends(self) -> frozenset[str]:
        return self.toolchain.ids

    @property
    def limits(self) -> ServerLimits:
        """The server-wide limits a launch is checked against and receipts report."""
        return shared(ServerLimits, self.config)
