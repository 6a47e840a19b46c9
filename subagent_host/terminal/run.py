"""`subagent-host run`: one child through a server of its own; its output on stdout, its
end as the exit status (protocol.md §7, "`run`").

A client of the core like any other: it starts a server (`Host.start`, with the same
--state-dir, --config and --trust-project, in a session of its own so that a terminal's
Ctrl-C reaches this process only), spawns the child in background mode, follows its
events, and reads its final snapshot. It never runs a child itself. A signal (Ctrl-C,
SIGTERM, SIGHUP) stops the run through the server (the stop sequence, the server's
grace) before this process exits with 128+n, so nothing is left behind.
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
from collections.abc import Sequence
from typing import IO, Any, Final

import attrs

from subagent_host import SERVER_NAME
from subagent_host.cli import add_number, existing_directory
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
from subagent_host.terminal.options import server_arguments, subcommand_parser
from subagent_host.terminal.progress import RunProgress
from subagent_host.terminal.scope import Scope
from subagent_host.values import MAX_DURATION_MS

PROG: Final = f"{SERVER_NAME} run"

EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
# The server ended before the run did: its run is `interrupted` (sysexits' EX_TEMPFAIL:
# trying again may work).
EXIT_INTERRUPTED: Final = 75
EXIT_TIMED_OUT: Final = 124  # as timeout(1)
# Next to 124: a limit the run was given ended it (today an agent's max turns). Clear of
# 126/127 (a shell's "cannot run") and of 128+n (signals).
EXIT_LIMIT_REACHED: Final = 125
SIGNAL_BASE: Final = 128  # a shell's 128+n for "ended by signal n"

# The signals that stop the run before this process exits: Ctrl-C, kill, a closed terminal.
STOPPING_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# How often the live line asks for a fresh snapshot (tokens are in snapshots only).
TICK_S: Final = 1.0
# A command child's stdout is kept in memory up to this, then in a temporary file.
SPOOL_BYTES: Final = 8 * 1024 * 1024
# A server whose output has ended is exiting: how long to wait to read how it exited.
SERVER_EXIT_S: Final = 5.0

EPILOG: Final = """\
The child gets no stdin (an empty pipe, closed at once) and the environment a server
gives its children (protocol.md §8.3). Its final output goes to stdout: a command's
stdout exactly as it printed it (decoded as UTF-8), an agent's final text. Live
progress goes to stderr when stderr is a terminal; otherwise stderr holds errors only
(a failed command's last 4 KiB of stderr, one line for any other failure).

exit status:
  0      the run completed
  N      the command failed: its own exit status (128+n when signal n killed it)
  1      any other failure (an agent failed, a command could not start, the server
         could not start or could not run it)
  2      a bad command line, or a launch the server refused (-32602 invalid params,
         -32003 launch rejected: its message on stderr)
  75     interrupted: the server ended before the run did (or before answering)
  124    timed out (--timeout-ms, or the configured timeout or stall timeout)
  125    a limit the run was given ended it (an agent's max turns)
  128+n  this command got signal n (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP): the run was
         stopped first, with the server's grace (grace_ms in a settings file);
         141 (as SIGPIPE): the reader of stdout had gone
  143    the run was stopped from elsewhere (`subagent-host stop`, a server shutdown)
"""


def build_parser() -> argparse.ArgumentParser:
    parser = subcommand_parser(
        "run",
        "Run one child through a server of its own: a COMMAND after '--' (no shell), or\n"
        "an agent CLI given a PROMPT. Prints its final output on stdout and exits with a\n"
        "status that says how it ended.",
    )
    parser.usage = (
        f"{PROG} [options] -- COMMAND [ARG...]\n"
        f"       {PROG} [options] [--backend pi|claude|codex] [--agent NAME] PROMPT\n"
        f"       {PROG} [options] --agent NAME"
    )
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument("prompt", nargs="?", metavar="PROMPT", help="an agent's task")
    parser.add_argument(
        "--backend",
        metavar="B",
        help="command, pi, claude or codex (default: command for a COMMAND, else the "
        "agent's, else as the server chooses: protocol.md §8.1)",
    )
    parser.add_argument("--agent", metavar="NAME", help="a named agent definition (§18)")
    parser.add_argument("--model", metavar="M", help="an agent's model")
    add_number(
        parser,
        "--timeout-ms",
        1,
        MAX_DURATION_MS,
        "end the child after N milliseconds (exit status 124)",
    )
    parser.add_argument(
        "--cwd", type=existing_directory, metavar="DIR", help="the child's working directory"
    )
    parser.add_argument("--label", metavar="L", help="the run's label, shown by runs and show")
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the final RunSnapshot (as the protocol sends it) instead of the output",
    )
    return parser


def parse(argv: Sequence[str]) -> tuple[argparse.Namespace, dict[str, Any]]:
    """The options and the spawn's params; a bad command line exits 2 with one line."""
    options, command = list(argv), None
    if "--" in options:  # everything after the first `--` is the command, never an option
        at = options.index("--")
        options, command = options[:at], tuple(options[at + 1 :])
    parser = build_parser()
    args = parser.parse_args(options)
    if command == ():
        parser.error("nothing to run after '--': give a COMMAND")
    if command and args.prompt is not None:
        parser.error("give a PROMPT or a COMMAND after '--', not both (the child gets no stdin)")
    if not command and args.prompt is None and args.agent is None:
        parser.error("nothing to run: give a COMMAND after '--', a PROMPT, or --agent NAME")
    spawn = {
        "command": command,
        "prompt": args.prompt,
        "agent": args.agent,
        "backend": args.backend,
        "model": args.model,
        "timeout_ms": args.timeout_ms,
        "cwd": str(args.cwd) if args.cwd is not None else None,
        "label": args.label,
        # A command's stdout is its output, whole: streamed, it is not cut to the caps.
        "stream": True if command else None,
        "mode": "background",
    }
    return args, spawn


def main(argv: Sequence[str]) -> int:
    args, spawn = parse(argv)
    try:
        return asyncio.run(_run(args, spawn))
    except KeyboardInterrupt:  # before the handlers were in place or after: nothing ran
        return SIGNAL_BASE + signal.SIGINT


async def _run(args: argparse.Namespace, spawn: dict[str, Any]) -> int:
    # The server's log is replayed once the run is over: written meanwhile, it would
    # tear the live line apart.
    with Interrupts() as interrupts, tempfile.TemporaryFile() as server_log:
        try:
            return await _supervise(args, spawn, interrupts, server_log)
        finally:
            server_log.seek(0)
            sys.stderr.flush()
            shutil.copyfileobj(server_log, sys.stderr.buffer)
            sys.stderr.flush()


async def _supervise(
    args: argparse.Namespace, spawn: dict[str, Any], interrupts: Interrupts, server_log: IO[bytes]
) -> int:
    streamed = StreamedOutput() if spawn["command"] else None
    async with Host.start(server_arguments(args), own_session=True, stderr=server_log) as host:
        # The line shows from the start: a server takes a moment to answer its first call.
        with RunProgress() as progress:
            ended = await _launch(host, spawn, progress, interrupts, streamed)
    if isinstance(ended, Refused):
        if ended.message:
            _say(ended.message)
        return ended.exit_status
    try:
        if args.json:
            _write_json(ended)
        else:
            _write_output(ended, streamed)
    except BrokenPipeError:
        return views.reader_gone()
    if interrupts.received is not None:
        return SIGNAL_BASE + interrupts.received
    _report_end(ended)
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
    streamed: StreamedOutput | None,
) -> RunSnapshot | Refused:
    """Spawn the run and follow it to its end; its final snapshot."""
    if interrupts.received is not None:
        return Refused(SIGNAL_BASE + interrupts.received)
    try:
        run = await host.spawn(**spawn)
    except HostError as exc:
        refused_params = isinstance(exc, InvalidParams | LaunchRejected)
        return Refused(EXIT_USAGE if refused_params else EXIT_FAILED, exc.message)
    except HostConnectionError as exc:
        return await _server_gone(host, exc)
    try:
        return await _follow(host, run, progress, interrupts, streamed)
    except HostConnectionError as exc:
        return Refused(
            EXIT_INTERRUPTED, f"interrupted: the server ended before the run did ({exc})"
        )


async def _server_gone(host: Host, exc: HostConnectionError) -> Refused:
    """The server ended before it answered the spawn: it could not start (it exited with a
    status, its log says why), or it died (it may have started the run: `interrupted`)."""
    assert host.process is not None
    with contextlib.suppress(TimeoutError):
        # Its output has ended: it is exiting, if it has not already.
        await asyncio.wait_for(host.process.wait(), SERVER_EXIT_S)
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
    streamed: StreamedOutput | None,
) -> RunSnapshot:
    """Follow the run to its end, stopping it first if a signal comes; its final snapshot."""
    progress.started(run)
    events = asyncio.create_task(_take_events(host, run.run_id, progress, streamed))
    interrupted = asyncio.create_task(interrupts.wait())
    ticking = asyncio.create_task(_tick(host, run.run_id, progress)) if progress.shown else None
    try:
        await asyncio.wait({events, interrupted}, return_when=asyncio.FIRST_COMPLETED)
        if not events.done():
            progress.stopping()
            await host.stop(run_id=run.run_id, reason=stop_reason(interrupts.received))
        await events  # to the terminal status: the rest of the output came before it
    finally:
        tasks = [task for task in (events, interrupted, ticking) if task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return await host.status(run.run_id)


def stop_reason(signum: signal.Signals | None) -> str:
    """The reason the run records when a signal stopped it."""
    return f"{PROG} got {signal.Signals(signum or signal.SIGINT).name}"


async def _take_events(
    host: Host, run_id: str, progress: RunProgress, streamed: StreamedOutput | None
) -> None:
    async for event in host.events(run_id):
        progress.event(event)
        if streamed is not None:
            streamed.take(event)


async def _tick(host: Host, run_id: str, progress: RunProgress) -> None:
    """Fresh snapshots for the live line (tokens), while it shows."""
    while True:
        await asyncio.sleep(TICK_S)
        try:
            progress.seen(await host.status(run_id))
        except (HostError, HostConnectionError):
            return


class Interrupts(Scope):
    """The stopping signals, caught while a run goes on: the first one is kept (later ones
    change nothing: the stop it started ends within the server's grace)."""

    def __init__(self) -> None:
        self.received: signal.Signals | None = None
        self._event = asyncio.Event()

    def open(self) -> None:
        loop = asyncio.get_running_loop()
        for signum in STOPPING_SIGNALS:
            loop.add_signal_handler(signum, self._receive, signum)

    def close(self) -> None:
        loop = asyncio.get_running_loop()
        for signum in STOPPING_SIGNALS:
            loop.remove_signal_handler(signum)

    def _receive(self, signum: signal.Signals) -> None:
        if self.received is None:
            self.received = signum
            self._event.set()

    async def wait(self) -> None:
        await self._event.wait()


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
        if event.type == "output" and event.text:
            self.file.write(event.text.encode())


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


def _report_end(final: RunSnapshot) -> None:
    """One line on stderr for a run that did not complete; a failed command's own stderr."""
    if final.status == "completed":
        return
    child = final.children[0] if len(final.children) == 1 else None
    if child is not None and child.backend == "command" and _exited(child.error):
        data = child.error.data if child.error is not None else None
        tail = data.get("stderrTail") if isinstance(data, dict) else None
        if isinstance(tail, str) and tail:
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
