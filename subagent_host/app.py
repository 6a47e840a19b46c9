"""Wire the server together and run its lifecycle (protocol.md §6).

Order of events: read and dispatch until stdin ends (or LSP's `exit` arrives, or
SIGTERM/SIGINT), answer every request already read (a task-mode spawn runs to its
end; after a signal, requests are cancelled first, which stops their runs), stop
the remaining background runs (`cancelled`, reason `client-disconnected`), flush
stdout, exit 0 (1 after an `exit` that no `shutdown` came before, as LSP says).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import shutil
import signal
import tempfile
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import Final

from subagent_host.backends.acp import AcpBackend
from subagent_host.backends.acp_probe import AcpProbes
from subagent_host.backends.base import Backend
from subagent_host.backends.claude import ClaudeBackend
from subagent_host.backends.codex import CodexBackend
from subagent_host.backends.command import CommandBackend
from subagent_host.backends.environment import allowed_environment
from subagent_host.backends.identity import ProgramIdentities
from subagent_host.backends.lifeline import GuardianLog
from subagent_host.backends.pi import PiBackend
from subagent_host.backends.probe import VersionProbes
from subagent_host.backends.sessions import SessionFiles
from subagent_host.backends.supervisor import Supervisor
from subagent_host.backends.tracking import Tracking
from subagent_host.backends.tracking import choose as choose_tracking
from subagent_host.config import (
    PARALLEL_OUTPUT_CAP_BYTES,
    PARALLEL_OUTPUT_CAP_LINES,
    ServerConfig,
)
from subagent_host.errors import RunNotFound
from subagent_host.executors.base import Executor
from subagent_host.executors.ray_executor import RayExecutor
from subagent_host.executors.select import executor_for
from subagent_host.handlers.context import HandlerContext
from subagent_host.handlers.progress import EventPublisher
from subagent_host.handlers.snapshot_file import server_files, snapshot_writer
from subagent_host.handlers.table import build_method_table
from subagent_host.logs import destination
from subagent_host.planning.projection import seal
from subagent_host.planning.stored_workflow import workflow_record
from subagent_host.planning.toolchain import Toolchain
from subagent_host.planning.views import Projection
from subagent_host.rpc.answering import after_answer
from subagent_host.rpc.connection import Connection
from subagent_host.rpc.control import ControlListener
from subagent_host.rpc.control_socket import UntrustedSocket, socket_path
from subagent_host.rpc.dispatch import HostProtocol, Method, make_protocol
from subagent_host.rpc.framing import AutoDecoder
from subagent_host.rpc.notifier import Notifier
from subagent_host.rpc.stdio import (
    InputStream,
    OutputStream,
    StdioGuard,
    open_input,
    open_output,
)
from subagent_host.rpc.wire import StopParams
from subagent_host.runs.orchestrator import OutputCaps, RunOrchestrator, WorkflowRecords
from subagent_host.runs.scheduler import Slots
from subagent_host.runs.services import ChildServices
from subagent_host.runs.state import EventListener, Run, RunEvent, RunStateMachine
from subagent_host.state_layout import PI_SESSIONS_DIR, private_directory
from subagent_host.store.run_store import RunStore
from subagent_host.values.error_data import RunRef
from subagent_host.values.plurals import plural
from subagent_host.workspaces.worktrees import WORKTREES_DIR

logger = logging.getLogger(__name__)

# After a signal, cancelled handlers answer -32800 within moments; this bounds a
# handler that ignores cancellation so the server still exits.
CANCELLED_ANSWER_TIMEOUT_S: Final = 10.0
# A client that stopped reading stdout must not keep the server alive forever.
OUTPUT_FLUSH_TIMEOUT_S: Final = 10.0
STOP_SIGNALS: Final = (signal.SIGTERM, signal.SIGINT)


DISCONNECTED: Final = "client-disconnected"


def probe_environment(backends: Mapping[str, Backend]) -> dict[str, str]:
    """What a `--version` probe runs with: the children's allowlist, no run marker."""
    allowed = {name for backend in backends.values() for name in backend.env_allowed}
    return allowed_environment(os.environ, allowed)


def build_backends(config: ServerConfig, pi_sessions: Path | None = None) -> dict[str, Backend]:
    """Every adapter this server knows; whether each can run is checked per launch.

    `pi_sessions` is where pi keeps its session files (default: in the state directory).
    """
    return {**built_in_backends(config, pi_sessions), **configured_agents(config)}


def built_in_backends(config: ServerConfig, pi_sessions: Path | None = None) -> dict[str, Backend]:
    """The command and agent CLI adapters, each CLI under its configured program."""
    if pi_sessions is None:
        pi_sessions = session_files(config).pi_dir  # pi's own session files, for resume
        private_directory(pi_sessions)
    executables = config.settings.backend_executables
    return {
        "command": CommandBackend(),
        "pi": PiBackend(session_dir=pi_sessions, executable=executables.get("pi", "pi")),
        "claude": ClaudeBackend(executable=executables.get("claude", "claude")),
        "codex": CodexBackend(executable=executables.get("codex", "codex")),
    }


def configured_agents(config: ServerConfig) -> dict[str, AcpBackend]:
    """One backend per ACP agent the configuration names (protocol.md §24.1)."""
    return {
        name: AcpBackend(name, agent.executable, agent.args, agent.env)
        for name, agent in config.settings.acp_backends.items()
    }


def session_files(config: ServerConfig) -> SessionFiles:
    """Where the agent CLIs keep the sessions a resume continues (pi's: in the state dir)."""
    return SessionFiles(pi_dir=config.state_dir / PI_SESSIONS_DIR)


def new_session_id() -> str:
    return f"session-{uuid.uuid4().hex}"


def build_orchestrator(
    config: ServerConfig,
    supervisor: Supervisor,
    listener: EventListener,
    on_launch: Callable[[Run, list[Projection]], None] | None = None,
    backends: Mapping[str, Backend] | None = None,
    workflow_records: WorkflowRecords | None = None,
    sessions: SessionFiles | None = None,
    new_run_id: Callable[[], str] | None = None,
    executor: Executor | None = None,
    identities: ProgramIdentities | None = None,
) -> RunOrchestrator:
    services = ChildServices(
        supervisor=supervisor,
        executor=executor or executor_for(config.executor, supervisor, os.environ),
        backends=backends if backends is not None else build_backends(config),
        slots=Slots(config.max_concurrency),
        state_machine=RunStateMachine(listener=listener),
        caps=OutputCaps(
            bytes=config.output_cap_bytes,
            lines=config.output_cap_lines,
            # A child's share of a parallel summary is never more than a whole output.
            parallel_bytes=min(PARALLEL_OUTPUT_CAP_BYTES, config.output_cap_bytes),
            parallel_lines=min(PARALLEL_OUTPUT_CAP_LINES, config.output_cap_lines),
            previous_bytes=config.previous_cap_bytes,
        ),
        server_env=os.environ,
        depth=config.depth,
        sessions=sessions if sessions is not None else session_files(config),
        worktrees=config.state_dir / WORKTREES_DIR,
        identities=identities,
    )
    return RunOrchestrator(
        services,
        new_run_id=new_run_id or (lambda: uuid.uuid4().hex),
        grace_ms=config.grace_ms,
        on_launch=on_launch,
        workflow_records=workflow_records,
        workflow_parallelism=config.workflow_parallelism,
        max_queue=config.max_queue,
    )


async def serve(config: ServerConfig, tracking: Tracking | None = None) -> int:
    """Serve one client on stdin/stdout until it goes away; return the exit status.

    `tracking` is the process tracking chosen at start (cli.py reports a forced
    one that is unavailable); without it, the best this host allows.
    """
    supervisor = Supervisor(tracking or choose_tracking(config.process_tracking))
    # From here on, this process dying (SIGKILL included) ends its runs' processes.
    supervisor.guard(guardian_log())
    try:
        with StdioGuard() as stdio:
            try:
                source = await open_input(stdio.stdin_fd)
                sink = await open_output(stdio.wire_out_fd)
            except (OSError, ValueError) as exc:
                logger.error("cannot serve on this stdin/stdout: %s", exc)
                return 1
            # A state directory that cannot be used leaves the history in memory.
            store = await RunStore.open(config.state_dir, config.history_limit)
            try:
                with _pi_sessions(config, store) as pi_sessions:
                    return await _serve_with_store(
                        config, store, source, sink, supervisor, pi_sessions
                    )
            finally:
                await store.close()
    finally:
        # Every child was waited for: our cgroups are empty, the guardian is told `bye`.
        await supervisor.aclose()


def guardian_log() -> GuardianLog:
    """The guardian writes its line (a WARNING) where the server's log goes, in its format."""
    log = destination(logging.WARNING)
    return GuardianLog(fd=log[0], json=log[1]) if log is not None else GuardianLog(fd=None)


@contextlib.contextmanager
def _pi_sessions(config: ServerConfig, store: RunStore) -> Iterator[Path]:
    """Where pi keeps its session files: in the state directory, for a later resume;
    with the history in memory (no resume), in a private temporary directory removed
    when the server exits (also when the state directory's is not safe to use)."""
    if store.durable:
        pi_sessions = config.state_dir / PI_SESSIONS_DIR
        try:
            private_directory(pi_sessions)
        except OSError as exc:
            logger.warning("%s; pi's session files go to a temporary directory", exc)
        else:
            yield pi_sessions
            return
    scratch = Path(tempfile.mkdtemp(prefix="subagent-host-pi-sessions-"))  # 0700
    try:
        yield scratch
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


async def _serve_with_store(
    config: ServerConfig,
    store: RunStore,
    source: InputStream,
    sink: OutputStream,
    supervisor: Supervisor,
    pi_sessions: Path,
) -> int:
    loop = asyncio.get_running_loop()
    supervisor.reap_on_sigchld()
    sessions = SessionFiles(pi_dir=pi_sessions)  # the one place pi's session files are
    recovering = await store.start(supervisor, config.grace_ms, sessions)
    # What is left of the settings' problems never stops the server (an error did: parse_config).
    for problem in config.settings.diagnostics:
        level = logging.INFO if problem.severity == "info" else logging.WARNING
        logger.log(level, "%s", problem.message)
    protocol = make_protocol()
    notifier = Notifier(protocol.converter)
    publisher = EventPublisher(notifier)

    def record_and_publish(run: Run, event: RunEvent) -> None:
        store.record(run, event)
        publisher(run, event)

    def record_projection(run: Run, index: int, projection: Projection) -> None:
        store.record_projection(run, index, functools.partial(seal, projection))

    def record_projections(run: Run, projections: list[Projection]) -> None:
        for index, projection in enumerate(projections):
            record_projection(run, index, projection)

    built_in = built_in_backends(config, pi_sessions)
    acp_agents = configured_agents(config)
    backends = {**built_in, **acp_agents}
    probes = VersionProbes(supervisor, probe_environment(backends))
    # In the background: ping lists each version once known (a built-in CLI's from its
    # `--version`; an ACP agent's: its own answer to `initialize`, which also says what
    # it can do).
    probes.start([backend.executable for backend in built_in.values() if backend.executable])
    acp_probes = AcpProbes(supervisor, probe_environment(backends))
    acp_probes.start(acp_agents.values())
    executor = executor_for(config.executor, supervisor, os.environ)
    if isinstance(executor, RayExecutor):
        executor.open_soon()  # joining a cluster takes seconds: not on a first spawn's path
    workflow_records = WorkflowRecords(
        definition=lambda run, plan: store.record_workflow(run, workflow_record(plan)),
        child_added=record_projection,
        text=store.record_text,
        snapshot=snapshot_writer(server_files(config)),
        touched=store.touch,
    )
    orchestrator = build_orchestrator(
        config,
        supervisor,
        record_and_publish,
        record_projections,
        backends,
        workflow_records,
        sessions,
        new_run_id=store.new_run_id,  # reserved on disk: a run may be written late
        executor=executor,
        identities=ProgramIdentities(probes, acp_probes),
    )
    store.on_pruned(orchestrator.forget)  # a pruned run is gone from memory too
    store.live = orchestrator.get  # a run this server holds is answered from memory
    connection = Connection(protocol, AutoDecoder(config.max_message_bytes, config.framing), sink)
    ctx = HandlerContext(
        config=config,
        session_id=config.session_id or new_session_id(),
        orchestrator=orchestrator,
        store=store,
        progress=publisher,
        toolchain=Toolchain(backends, probes, dict(os.environ), acp_probes),
        process_tracking=lambda: supervisor.mode,
        hold_output=connection.holding,
        framing=lambda: connection.framing.value,
        after_answer=after_answer,
        stop_elsewhere=_stop_elsewhere(config, store) if store.durable else None,
        executor_ready=executor.bridge if isinstance(executor, RayExecutor) else None,
        lifecycle=protocol.lifecycle,
    )
    # A client that does not read, or a disk slower than a child prints: streamed
    # children are held back (nothing is dropped) until the backlog is gone.
    sink.watch_backlog(
        lambda: orchestrator.streams.close("client"), lambda: orchestrator.streams.open("client")
    )
    store.watch_backlog(
        lambda: orchestrator.streams.close("store"), lambda: orchestrator.streams.open("store")
    )
    protocol.attach(build_method_table(ctx), connection.emit, connection.writable)
    notifier.attach(connection.emit)
    control = await _open_control(config, store, ctx)

    stopping = asyncio.Event()
    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, _on_stop_signal, signum, stopping)
    try:
        await _serve_until_done(connection, protocol, source, sink, stopping)
        if protocol.lifecycle.has_exited:
            logger.info(
                "the client sent exit%s: ending as at end of input",
                "" if protocol.lifecycle.is_shut_down else " without shutdown",
            )
        if control is not None:  # nobody may start a stop once the client is gone
            control.stop_accepting()
        # The client is gone (or the server was told to stop): end what still runs.
        # Said at the default level: a client that just closed stdin may not have
        # meant to end its background runs, and nobody is left to answer.
        if live := orchestrator.live():
            logger.warning(
                "cancelling %s: the client is gone (%s)",
                plural(len(live), "background run"),
                DISCONNECTED,
            )
        await orchestrator.shutdown(DISCONNECTED)
        if isinstance(executor, RayExecutor):
            await executor.close()  # every remote child has ended: leave the cluster
        if control is not None:
            await control.aclose()
        if recovering is not None:
            # What gone servers left and is still in its grace is handed to the guardian,
            # which outlives this server; with no guardian listening, it is waited for.
            if not recovering.done():
                supervisor.hand_over_sweeps()
            await asyncio.gather(recovering, return_exceptions=True)
        await store.end()
        connection.flush()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(sink.aclose(), OUTPUT_FLUSH_TIMEOUT_S)
    finally:
        if control is not None:
            control.stop_accepting()  # the socket never outlives the server
        for signum in STOP_SIGNALS:
            loop.remove_signal_handler(signum)
        source.close()
        await probes.close()  # a probe still running is ended with its tree
        await acp_probes.close()
    status = protocol.lifecycle.exit_status
    if status:
        logger.info("server stopped (exit status %d: exit without shutdown)", status)
    else:
        logger.info("server stopped")
    return status


async def _open_control(
    config: ServerConfig, store: RunStore, ctx: HandlerContext
) -> ControlListener | None:
    """Listen on this server's control socket (protocol.md §10.1), and remove the sockets
    dead servers left (in the background); None (with a warning) when the state directory
    has no room for it."""
    if not store.durable or store.instance_id is None:
        return None  # runs in memory: no other process can find them to stop

    def table() -> Mapping[str, Method]:
        from subagent_host.handlers.control import build_control_table

        return build_control_table(ctx)

    listener = ControlListener(
        socket_path(config.state_dir, store.instance_id), table, config.max_message_bytes
    )
    try:
        await listener.start(live=store.live_instances)
    except (OSError, UntrustedSocket) as exc:
        listener.stop_accepting()
        logger.warning("no control socket, `subagent-host stop` cannot reach this server: %s", exc)
        return None
    return listener


def _stop_elsewhere(
    config: ServerConfig, store: RunStore
) -> Callable[[str, StopParams], Awaitable[bool]]:
    """A stdio `stop` of a run another server on this state directory holds: asked of
    that server on its control socket (protocol.md §10)."""

    async def stop(run_id: str, params: StopParams) -> bool:
        # Imported on first use: a server's start loads no client code.
        from subagent_host.client.control import ControlUnreachable, stop_at
        from subagent_host.client.errors import HostError as RemoteError

        owner = await store.live_owner(run_id)
        if owner is None:
            raise RunNotFound(
                f"run {run_id} is not running: the server process that ran it is gone; the "
                "next server started on this state directory marks it interrupted and ends "
                "any process it left",
                data=RunRef(run_id, reason="server-gone"),
            )
        instance_id, pid = owner
        try:
            snapshot = await stop_at(
                socket_path(config.state_dir, instance_id),
                pid=pid,
                run_id=run_id,
                grace_ms=params.grace_ms,
                reason=params.reason,
            )
        except (ControlUnreachable, UntrustedSocket, RemoteError, ConnectionError) as exc:
            raise RunNotFound(
                f"run {run_id} is running in another server process (pid {pid}) on this state "
                f"directory, which could not be asked to stop it ({exc}); stop it through "
                "that server",
                data=RunRef(run_id, reason="owned-by-another-server"),
            ) from exc
        return bool(snapshot.already_terminal)

    return stop


def _on_stop_signal(signum: int, stopping: asyncio.Event) -> None:
    logger.info("received %s: stopping", signal.Signals(signum).name)
    stopping.set()


async def _serve_until_done(
    connection: Connection,
    protocol: HostProtocol,
    source: InputStream,
    sink: OutputStream,
    stopping: asyncio.Event,
) -> None:
    reading = asyncio.create_task(connection.read_until_eof(source))
    signalled = asyncio.create_task(stopping.wait())
    broken = asyncio.create_task(sink.wait_broken())
    answered: asyncio.Task[None] | None = None
    try:
        await asyncio.wait({reading, signalled, broken}, return_when=asyncio.FIRST_COMPLETED)
        if reading.done() and not reading.cancelled() and reading.exception() is not None:
            logger.error("cannot read stdin: %s", reading.exception())
        if broken.done():
            # Nobody reads our answers any more: the client is gone, as at EOF.
            logger.warning("the client closed stdout; stopping as if stdin had ended")
            reading.cancel()
        if not stopping.is_set():
            # stdin ended: answer what was read; a signal meanwhile cancels the rest.
            answered = asyncio.create_task(protocol.wait_answered())
            await asyncio.wait({answered, signalled}, return_when=asyncio.FIRST_COMPLETED)
        if stopping.is_set():
            reading.cancel()
            protocol.cancel_in_flight()
            try:
                await asyncio.wait_for(protocol.wait_answered(), CANCELLED_ANSWER_TIMEOUT_S)
            except TimeoutError:
                logger.error(
                    "%s ignored cancellation; exiting", plural(protocol.in_flight, "request")
                )
    finally:
        tasks = [task for task in (reading, signalled, broken, answered) if task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
