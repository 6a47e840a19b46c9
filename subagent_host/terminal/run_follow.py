"""`subagent-host run` once its server is starting: spawn the child, follow it to its end,
print its output and tell the exit status (protocol.md §7, "`run`"; see terminal/run.py).

Imported by `run` only after it has started its server, so that these imports (the
client library, the live line) run while the server starts.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable, Sequence
from typing import Any, Final

import attrs

from subagent_host.client import (
    Host,
    HostConnectionError,
    HostError,
    InvalidParams,
    LaunchRejected,
    RunSnapshot,
)
from subagent_host.rpc.wire import EventWire, make_converter
from subagent_host.terminal import views
from subagent_host.terminal.progress import RunProgress
from subagent_host.terminal.run_exits import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_LIMIT_REACHED,
    EXIT_TIMED_OUT,
    EXIT_USAGE,
    PROG,
    SIGNAL_BASE,
    Interrupts,
)
from subagent_host.terminal.run_live import LiveOutput, LiveStderr
from subagent_host.terminal.run_talk import Talk, interactive_spawn
from subagent_host.values.events import OutputEvent

# How often the live line asks for a fresh snapshot (tokens are in snapshots only).
TICK_S: Final = 1.0

# A command child's stdout is kept in memory up to this, then in a temporary file.
SPOOL_BYTES: Final = 8 * 1024 * 1024

# A server whose output has ended is exiting: how long to wait to read how it exited.
SERVER_EXIT_S: Final = 5.0


async def supervise(
    process: asyncio.subprocess.Process,
    args: argparse.Namespace,
    spawn: dict[str, Any],
    interrupts: Interrupts,
) -> int:
    """Run the spawn on the started server `process` and follow it; the exit status.
    The server is ended on the way out (`Host.aclose`)."""
    streamed = StreamedOutput() if spawn["command"] else None
    # A conversation's turns show as they come, wherever they go.
    shows_live = args.interactive or (not args.quiet and not args.json and sys.stdout.isatty())
    if shows_live and spawn["stream"] is None:
        spawn = {**spawn, "stream": True}  # an agent's text and tool calls, as they come
    async with Host.adopt(process) as host:
        # The line shows from the start: a server takes a moment to answer its first call.
        with RunProgress() as progress:
            live = LiveOutput(progress) if shows_live else None
            # A command's stderr as it comes, unless only its final output is asked for.
            stderr = None
            if streamed is not None and not args.quiet and not args.json:
                stderr = LiveStderr(progress, marked=shows_live and sys.stderr.isatty())
            takers: list[EventTaker] = [progress.event]
            takers += [shown.take for shown in (streamed, live, stderr) if shown is not None]

            def flush() -> None:
                for shown_live in (live, stderr):
                    if shown_live is not None:
                        shown_live.flush()

            talk = None
            if args.interactive:
                # An agent's first turn is its prompt (or its definition's instructions).
                prompted = not spawn["command"] or spawn["prompt"] is not None
                talk = Talk(host, progress, prompted=prompted, before_asking=flush)
            ended = await _launch(host, spawn, progress, interrupts, takers, talk)
            flush()
        # Told before the server is ended: its exit may wait for what it still ends of
        # servers that are gone (protocol.md §13), the run's output never does.
        return _tell_end(ended, args, streamed, interrupts, live, stderr)


EventTaker = Callable[[EventWire], None]
"""What sees each of the run's events as it comes: the live line, the output."""


def _tell_end(
    ended: RunSnapshot | Refused,
    args: argparse.Namespace,
    streamed: StreamedOutput | None,
    interrupts: Interrupts,
    live: LiveOutput | None,
    stderr: LiveStderr | None,
) -> int:
    """Print the run's output (or why there is none) and say how it ended; the exit status."""
    if isinstance(ended, Refused):
        if ended.message:
            _say(ended.message)
        return ended.exit_status
    try:
        if args.json:
            _write_json(ended)
        elif live is None or not live.printed:  # else it was shown as it came
            _write_output(ended, streamed)
    except BrokenPipeError:
        return views.reader_gone()
    if interrupts.received is not None:
        return SIGNAL_BASE + interrupts.received
    _report_end(ended, stderr_shown=stderr is not None and stderr.shown)
    return exit_status(ended)


@attrs.frozen
class Refused:
    """The run did not start, or its end is unknown: what to say and the exit status."""

    exit_status: int
    message: str = ""


async def _launch(
    host: Host,
    spawn: dict[str, Any],
    progress: RunProgress,
    interrupts: Interrupts,
    takers: Sequence[EventTaker],
    talk: Talk | None = None,
) -> RunSnapshot | Refused:
    """Spawn the run and follow it to its end (talking to it, with `talk`); its final
    snapshot."""
    if interrupts.received is not None:
        return Refused(SIGNAL_BASE + interrupts.received)
    try:
        if talk is not None:
            spawn = await interactive_spawn(host, spawn)
        run = await host.spawn(**spawn)
    except HostError as exc:
        refused_params = isinstance(exc, InvalidParams | LaunchRejected)
        return Refused(EXIT_USAGE if refused_params else EXIT_FAILED, exc.message)
    except HostConnectionError as exc:
        return await _server_gone(host, exc)
    try:
        return await _follow(host, run, progress, interrupts, takers, talk)
    except HostConnectionError as exc:
        return Refused(
            EXIT_INTERRUPTED, f"interrupted: the server ended before the run did ({exc})"
        )


async def _server_gone(host: Host, exc: HostConnectionError) -> Refused:
    """The server ended before it answered the spawn: it could not start (it exited with a
    status, its log says why), or it died (it may have started the run: `interrupted`).
    A server that refused its options (status 2) has said why in one line: `run` exits
    2 with that line alone, as `serve` would."""
    assert host.process is not None
    with contextlib.suppress(TimeoutError):
        # Its output has ended: it is exiting, if it has not already.
        await asyncio.wait_for(host.process.wait(), SERVER_EXIT_S)
    if host.process.returncode == EXIT_USAGE:
        return Refused(EXIT_USAGE)
    if host.process.returncode is not None and host.process.returncode > 0:
        return Refused(
            EXIT_FAILED, f"the server could not start (exit status {host.process.returncode})"
        )
    return Refused(EXIT_INTERRUPTED, f"interrupted: the server ended before the run did ({exc})")


async def _follow(
    host: Host,
    run: RunSnapshot,
    progress: RunProgress,
    interrupts: Interrupts,
    takers: Sequence[EventTaker],
    talk: Talk | None = None,
) -> RunSnapshot:
    """Follow the run to its end (and talk to it), stopping it first if a signal comes;
    its final snapshot."""
    progress.started(run)
    if talk is not None:
        talk.run_id = run.run_id
        takers = [*takers, talk.take]
        interrupts.taken = talk.take_ctrl_c
    events = asyncio.create_task(_take_events(host, run.run_id, takers))
    interrupted = asyncio.create_task(interrupts.wait())
    talking = asyncio.create_task(talk.converse()) if talk is not None else None
    ticking = asyncio.create_task(_tick(host, run.run_id, progress)) if progress.shown else None
    try:
        waits: set[asyncio.Task[None]] = {events, interrupted}
        if talking is not None:
            waits.add(talking)
        while True:
            done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            if talking is None or talking not in done:
                break
            talking.result()  # the talk's failure (its server gone) is the follow's
            waits.discard(talking)  # it ended with the run: the events end too
        if not events.done():
            progress.stopping()
            await host.stop(run_id=run.run_id, reason=stop_reason(interrupts.received))
        await events  # to the terminal status: the rest of the output came before it
    finally:
        tasks = [task for task in (events, interrupted, talking, ticking) if task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return await host.status(run.run_id)


def stop_reason(signum: signal.Signals | None) -> str:
    """The reason the run records when a signal stopped it."""
    return f"{PROG} got {signal.Signals(signum or signal.SIGINT).name}"


async def _take_events(host: Host, run_id: str, takers: Sequence[EventTaker]) -> None:
    async for event in host.events(run_id):
        for take in takers:
            take(event)


async def _tick(host: Host, run_id: str, progress: RunProgress) -> None:
    """Fresh snapshots for the live line (tokens), while it shows."""
    while True:
        await asyncio.sleep(TICK_S)
        try:
            progress.seen(await host.status(run_id))
        except (HostError, HostConnectionError):
            return


class StreamedOutput:
    """A command child's stdout as its `output` events bring it (in memory, then in a
    temporary file), and whether every event came (none was lost: protocol.md §9)."""

    def __init__(self) -> None:
        self.file = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)
        self.whole = True
        self._last_seq = 0

    def take(self, event: EventWire) -> None:
        if event.seq != self._last_seq + 1:
            self.whole = False  # events the server no longer held: some text may be gone
        self._last_seq = event.seq
        if isinstance(event.event, OutputEvent) and event.event.text:
            self.file.write(event.event.text.encode())


def exit_status(final: RunSnapshot) -> int:
    """How the run ended, as this command's exit status (see EPILOG)."""
    status = final.status
    if status == "completed":
        return 0
    if status == "timed-out":
        return EXIT_TIMED_OUT
    if status == "limit-reached":
        return EXIT_LIMIT_REACHED
    if status == "interrupted":
        return EXIT_INTERRUPTED
    if status == "cancelled":  # stopped by someone else: the stop sequence's SIGTERM
        return SIGNAL_BASE + signal.SIGTERM
    child = final.children[0] if len(final.children) == 1 else None
    if child is not None and child.backend == "command" and _exited(child.error):
        if child.exit_code:
            return child.exit_code
        if child.signal is not None and child.signal in signal.Signals.__members__:
            return SIGNAL_BASE + signal.Signals[child.signal]
    return EXIT_FAILED


def _exited(error: Any) -> bool:
    return error is not None and error.code == "exit-status"


def _write_output(final: RunSnapshot, streamed: StreamedOutput | None) -> None:
    out = sys.stdout.buffer
    if streamed is not None and streamed.whole:
        streamed.file.seek(0)
        shutil.copyfileobj(streamed.file, out)
        size = streamed.file.tell()
        streamed.file.seek(max(0, size - 1))
        last = streamed.file.read(1)
    else:
        if streamed is not None:
            _say("some of the output was lost on the way (the output kept by the run follows)")
        child = final.children[0] if final.children else None
        output = (child.output if child is not None else None) or final.output
        data = output.text.encode() if output is not None else b""
        out.write(data)
        last = data[-1:]
    if last and last != b"\n" and sys.stdout.isatty():
        out.write(b"\n")  # the prompt after it starts on a line of its own
    out.flush()


def _write_json(final: RunSnapshot) -> None:
    value = make_converter().unstructure(final)
    sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=2) + "\n")
    sys.stdout.flush()


def _report_end(final: RunSnapshot, *, stderr_shown: bool) -> None:
    """One line on stderr for a run that did not complete; a failed command's own stderr,
    unless it was shown as it came (`stderr_shown`)."""
    if final.status == "completed":
        return
    child = final.children[0] if len(final.children) == 1 else None
    if child is not None and child.backend == "command" and _exited(child.error):
        data = child.error.data if child.error is not None else None
        tail = data.get("stderrTail") if isinstance(data, dict) else None
        if isinstance(tail, str) and tail and not stderr_shown:
            sys.stderr.write(tail if tail.endswith("\n") else tail + "\n")
            sys.stderr.flush()
        return  # its exit status says the rest, as a shell's would
    if final.status == "failed" and final.error is not None:
        _say(final.error.message)
    elif final.status == "timed-out":
        _say(f"timed out after {final.enforced_timeout_ms} ms ({final.reason})")
    elif final.status == "limit-reached":
        _say(f"reached its limit: {final.reached_limit}")
    else:
        _say(f"{final.status}: {final.reason}")


def _say(message: str) -> None:
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)
