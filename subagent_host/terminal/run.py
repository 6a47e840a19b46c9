"""`subagent-host run`: one child through a server of its own; its output on stdout, its
end as the exit status (protocol.md §7, "`run`").

A client of the core like any other: it starts a server first of all (with the same
--state-dir, --config and --trust-project, in a session of its own so that a terminal's
Ctrl-C reaches this process only), and only then imports the client library and the
rest (terminal/run_follow.py), while the server starts; it spawns the child in
background mode, follows its events, and reads its final snapshot. It never runs a
child itself. A signal (Ctrl-C, SIGTERM, SIGHUP) stops the run through the server (the
stop sequence, the server's grace) before this process exits with 128+n, so nothing is
left behind.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shlex
import shutil
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, Final

from subagent_host.command_line import parse_config
from subagent_host.options import add_number, existing_directory
from subagent_host.server_process import server_command, start_server_process
from subagent_host.state_layout import SERVER_LOG
from subagent_host.terminal.options import server_arguments, subcommand_parser
from subagent_host.terminal.run_exits import (
    EXIT_USAGE,
    PROG,
    SIGNAL_BASE,
    Interrupts,
)
from subagent_host.terminal.server_log import server_log
from subagent_host.values import MAX_DURATION_MS

EPILOG: Final = """\
The child gets no stdin (an empty pipe, closed at once) and the environment a server
gives its children (protocol.md §8.3). Its final output goes to stdout: a command's
stdout exactly as it printed it (decoded as UTF-8), an agent's final text. When stdout
is a terminal (and without --quiet or --json), the output is shown as it comes instead,
line by line: a command's stdout, an agent's text and one line per tool call. A
command's stderr goes to stderr as it comes (without --quiet or --json): as it printed
it, or, when stdout and stderr are both a terminal, each line marked `stderr│ ` among
the output lines. A live status line goes to stderr when stderr is a terminal, below
the output, while this command is in the terminal's foreground (nothing is drawn by a
`run ... &`); otherwise stderr holds the command's stderr and errors only (with --quiet
or --json, a failed command's last 4 KiB of stderr once it has ended; one line for any
other failure). The server's log goes to server.log in the state directory (-v also
shows it once the run is over); past 1 MiB it is moved to server.log.1 as a run starts.

With -i the child is interactive: it lives on after each turn. Its output shows as it
comes (whatever stdout is), and once its turn has ended a `> ` prompt (on stderr, when
stdin and stderr are a terminal) takes the next message from stdin; an empty line or
the end of stdin (Ctrl-D) closes the run, which then ends completed. A COMMAND is given
its PROMPT, if any, as its first line, and each message as one line on stdin; its turn
ends at its next line of output. A claude, codex or ACP agent's child asks before its
tools run: the tool is shown, and a line answers (y allow once, a allow always, n
reject). Ctrl-C
interrupts the turn that runs; a second Ctrl-C within 2 seconds, or one while no turn
runs, stops the run (130).

exit status:
  0      the run completed
  N      the command failed: its own exit status (128+n when signal n killed it)
  1      any other failure (an agent failed, a command could not start, the server
         could not start or could not run it)
  2      a bad command line (its server's options too: the server's line says why),
         a safety setting of a configuration file that cannot be read (one line),
         or a launch the server refused (-32602 invalid params,
         -32003 launch rejected: its message on stderr; a disabled agent too)
  75     interrupted: the server ended before the run did (or before answering)
  124    timed out (--timeout-ms, or the configured timeout or stall timeout)
  125    a limit the run was given ended it (an agent's max turns, tokens or cost)
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
        f"       {PROG} [options] [--backend NAME] [--agent NAME] PROMPT\n"
        f"       {PROG} [options] --agent NAME\n"
        f"       {PROG} -i [options] [PROMPT] [-- COMMAND [ARG...]]"
    )
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = EPILOG
    parser.add_argument(
        "prompt",
        nargs="?",
        metavar="PROMPT",
        help="an agent's task (with -i, a COMMAND's first line)",
    )
    parser.add_argument(
        "--backend",
        metavar="B",
        help="command, pi, claude, codex or a configured ACP agent's name (default: "
        "command for a COMMAND, else the agent's, else as the server chooses: protocol.md §8.1)",
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
        "--egress-consent",
        action="store_true",
        help="consent to an agent sending its prompt, the files it reads and its tools' output "
        "to its model provider (egressConsent: a server with require_egress_consent needs it)",
    )
    parser.add_argument(
        "-i",
        "--interactive",
        action="store_true",
        help="talk to the child: after each turn a '> ' prompt takes the next message "
        "(an empty line or Ctrl-D closes the run); tools it asks about are answered here",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the final RunSnapshot (as the protocol sends it) instead of the output",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help=f"show the server's log on stderr once the run is over (it is always in "
        f"{SERVER_LOG} in the state directory)",
    )
    parser.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="on a terminal too, print only the final output, once the run has ended",
    )
    return parser


def parse(argv: Sequence[str]) -> tuple[argparse.Namespace, dict[str, Any]]:
    """The options and the spawn's params; a bad command line exits 2 with one line."""
    options, command = list(argv), None
    if "--" in options:  # everything after the first `--` is the command, never an option
        at = options.index("--")
        options, command = options[:at], tuple(options[at + 1 :])
    parser = build_parser()
    args, extra = parser.parse_known_args(options)
    if command is None and args.backend is None and args.agent is None:
        _refuse_a_program_as_prompt(parser, options, args.prompt)
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if command == ():
        parser.error("nothing to run after '--': give a COMMAND")
    if command and args.prompt is not None and not args.interactive:
        parser.error("give a PROMPT or a COMMAND after '--', not both (the child gets no stdin)")
    if args.interactive and (args.json or args.quiet):
        parser.error("-i shows each turn as it comes: not with --json or --quiet")
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
        "egress_consent": True if args.egress_consent else None,
        # A command's stdout is its output, whole: streamed, it is not cut to the caps.
        # A conversation shows each turn as it comes.
        "stream": True if command or args.interactive else None,
        "mode": "background",
        "interactive": True if args.interactive else None,
    }
    return args, spawn


def _refuse_a_program_as_prompt(
    parser: argparse.ArgumentParser, options: list[str], prompt: str | None
) -> None:
    """`run ls` or `run echo hi` most likely meant a command, not a prompt for an agent:
    asked back in one line (exit 2) rather than sent to a model. `--backend` (or
    `--agent`) says a prompt was meant."""
    if prompt is None or shutil.which(prompt) is None:
        return
    at = _prompt_position(parser, options)
    meant = shlex.join([*options[:at], "--", *options[at:]])
    parser.exit(
        EXIT_USAGE,
        f"{PROG}: {prompt!r} is a program on PATH; did you mean '{PROG} {meant}'? "
        "(to send it as a prompt, give --backend)\n",
    )


class _Placed(str):
    """An argv item that knows its place in argv."""

    at: int


def _prompt_position(parser: argparse.ArgumentParser, options: list[str]) -> int:
    """Where in `options` the PROMPT positional is: the parser says which item it took,
    not the first item equal to it (`--label ls ls -l`: the second `ls`, the first is an
    option's value). argparse hands a positional's item on as the same object (no
    `type`), so an item that carries its index says where it was."""
    placed = []
    for index, item in enumerate(options):
        tagged = _Placed(item)
        tagged.at = index
        placed.append(tagged)
    args, _extra = parser.parse_known_args(placed)  # it parsed once already: no error
    if isinstance(args.prompt, _Placed):
        return args.prompt.at
    return options.index(args.prompt)  # an argparse that copies items: the first equal one


def main(argv: Sequence[str]) -> int:
    args, spawn = parse(argv)
    # A safety setting that cannot be read: serve's one line and exit 2, before any
    # server starts (protocol.md §19).
    config, _warning = parse_config(server_arguments(args))
    try:
        return asyncio.run(_run(args, spawn, config.state_dir))
    except KeyboardInterrupt:  # before the handlers were in place or after: nothing ran
        return SIGNAL_BASE + signal.SIGINT


async def _run(args: argparse.Namespace, spawn: dict[str, Any], state_dir: Path) -> int:
    # The server's log goes to a file (terminal/server_log.py): shown with -v, or when the
    # server could not start, once the run is over.
    with Interrupts() as interrupts, server_log(state_dir) as log:
        started: list[asyncio.subprocess.Process] = []
        try:
            return await _start_and_follow(args, spawn, interrupts, log.stream, started)
        finally:
            # A server that exited with a status could not start: its line says why.
            failed = any((process.returncode or 0) > 0 for process in started)
            if args.verbose or failed:
                log.replay()


async def _start_and_follow(
    args: argparse.Namespace,
    spawn: dict[str, Any],
    interrupts: Interrupts,
    server_log: IO[str],
    started: list[asyncio.subprocess.Process],
) -> int:
    """Start the server first of all, then import what spawns and follows the run (the
    client library, the live line) while the server starts: a server takes about half
    a second to its first answer, the imports a good part of that."""
    command = server_command(server_arguments(args))
    process = await start_server_process(command, own_session=True, stderr=server_log)
    started.append(process)
    try:
        from subagent_host.terminal.run_follow import supervise
    except BaseException:
        with contextlib.suppress(ProcessLookupError):  # already gone is fine
            process.kill()  # the one process started here: nothing would end it now
        await process.wait()
        raise
    return await supervise(process, args, spawn, interrupts)
