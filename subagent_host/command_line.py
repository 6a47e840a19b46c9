"""The options of `serve` and the configuration they select (protocol.md §7).

An option given here beats the configuration files (`settings/`), which beat the
defaults. Every face that reads the configuration (`serve`, `mcp`, the terminal's
subcommands) comes through `parse_config`, so each refuses a bad value alike.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Final, NamedTuple

from subagent_host import SERVER_NAME, __version__
from subagent_host.options import (
    OneLineParser,
    add_number,
    add_trust_project,
    existing_file,
    first,
    log_file,
    log_level,
    one_line,
    session_id,
    state_directory,
    word,
)
from subagent_host.terminal import COMMANDS as TERMINAL_COMMANDS
from subagent_host.values import DEPTH_VARIABLE, FRAMINGS, MAX_DURATION_MS, Framing

if TYPE_CHECKING:
    from subagent_host.config import ServerConfig
    from subagent_host.settings import ExecutorChoice, Settings

# The configuration's modules (its defaults, the settings files) load when an option's
# defaults are needed, not before: `run` starts its server from here first of all.
CONFIG_HELP: Final = (
    "a JSON settings file (an object), read after the global file ({global_file}) and "
    "a trusted project's {project_file}: it wins over them field by field, and "
    "command-line options win over every file. Keys: default_model, "
    "default_effort (or default_thinking_level, thinkingLevel), timeout_ms, "
    "stall_timeout_ms, max_concurrency, default_tools, default_mode, history_limit, "
    "enable_continue, default_backend, model_profiles ({agent: {model, effort}}), "
    "and, in the global and --config files only, state_dir, framing, process_tracking, "
    "max_queue, "
    "max_message_bytes, grace_ms, resume_token_ttl_ms, log_level, log_file, log_format, session, "
    "max_parallel, workflow_parallelism, output_cap_bytes, output_cap_lines, "
    "previous_cap_bytes, require_preflight, require_egress_consent, "
    "trusted_projects and backends ({pi|claude|codex: {executable}}, and ACP agents: "
    '{NAME: {protocol: "acp", executable, args, env}}). A bad field is '
    "logged as a warning and ignored"
)


class NumberOption(NamedTuple):
    """A whole-number option: its range, its default, and the `ServerConfig` field and
    settings key of the same name it fills."""

    name: str
    low: int
    high: int
    default: int
    help: str

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


@functools.cache
def number_options() -> tuple[NumberOption, ...]:
    """Every whole-number option of `serve`, with its range and default."""
    from subagent_host.config import (
        DEFAULT_GRACE_MS,
        DEFAULT_HISTORY_LIMIT,
        DEFAULT_MAX_CONCURRENCY,
        DEFAULT_MAX_MESSAGE_BYTES,
        DEFAULT_MAX_QUEUE,
        DEFAULT_RESUME_TOKEN_TTL_MS,
    )
    from subagent_host.settings import (
        MAX_CONCURRENCY,
        MAX_HISTORY_LIMIT,
        MAX_MESSAGE_BYTES,
        MAX_QUEUE,
        MIN_MESSAGE_BYTES,
        MIN_RESUME_TOKEN_TTL_MS,
    )

    return (
        NumberOption(
            "max_concurrency",
            1,
            MAX_CONCURRENCY,
            DEFAULT_MAX_CONCURRENCY,
            "children running at once across the server",
        ),
        NumberOption(
            "max_queue",
            0,
            MAX_QUEUE,
            DEFAULT_MAX_QUEUE,
            "children waiting (queued) across the server; a spawn or resume that would queue "
            "more is refused (-32005)",
        ),
        NumberOption(
            "max_message_bytes",
            MIN_MESSAGE_BYTES,
            MAX_MESSAGE_BYTES,
            DEFAULT_MAX_MESSAGE_BYTES,
            "largest message accepted; larger ones are answered -32600 and skipped",
        ),
        NumberOption(
            "grace_ms",
            0,
            MAX_DURATION_MS,
            DEFAULT_GRACE_MS,
            "wait between SIGTERM and SIGKILL when stopping a run",
        ),
        NumberOption(
            "resume_token_ttl_ms",
            MIN_RESUME_TOKEN_TTL_MS,
            MAX_DURATION_MS,
            DEFAULT_RESUME_TOKEN_TTL_MS,
            "lifetime of a resume token and of a preflight id",
        ),
        NumberOption(
            "history_limit",
            1,
            MAX_HISTORY_LIMIT,
            DEFAULT_HISTORY_LIMIT,
            "runs kept per session; older finished ones are deleted",
        ),
    )


# Every subcommand with its line for `subagent-host --help` (protocol.md §7): the
# terminal's own come from `subagent_host.terminal`, whose modules load only when asked for.
SERVER_COMMANDS: Final[dict[str, str]] = {
    "serve": "serves JSON-RPC 2.0 on stdin/stdout (the default when no subcommand is given)",
    "schema": "prints the protocol's OpenRPC 1.3 document, generated from the wire types",
    "conformance": "runs the protocol's conformance cases against a server",
    "mcp": "serves the same runs to an MCP client over stdio",
}

SUBCOMMANDS: Final[dict[str, str]] = {**SERVER_COMMANDS, **TERMINAL_COMMANDS}

DESCRIPTION: Final = (
    "Serve JSON-RPC 2.0 on stdin/stdout: run coding-agent CLIs and commands as supervised "
    "subagents. Framing is detected from the first byte: '{' or '[' means one JSON text per "
    "line, anything else LSP Content-Length framing."
)

EPILOG: Final = (
    "An option not given takes its value from the configuration files (see --config), else "
    "the default shown. See protocol.md for the methods. Logs go to stderr (or --log-file), "
    "never stdout."
)


def unknown_command(word: str) -> str:
    """The one line for a first word that is no subcommand: the nearest ones, if any."""
    import difflib

    near = difflib.get_close_matches(word, SUBCOMMANDS, n=3, cutoff=0.6)
    if near:
        return f"unknown command {word!r}; did you mean {' or '.join(map(repr, near))}?"
    return f"unknown command {word!r}: the commands are {', '.join(SUBCOMMANDS)}"


def _server_command(text: str) -> str:
    if text != "serve":
        raise argparse.ArgumentTypeError(
            unknown_command(text)
            if text not in SUBCOMMANDS
            else f"{text!r} comes first, before any option"
        )
    return text


def _wrapped(text: str) -> str:
    """`text` filled as argparse fills its own (the raw formatter keeps the command list)."""
    import shutil
    import textwrap

    return textwrap.fill(text, width=min(shutil.get_terminal_size().columns, 100) - 2)


def build_parser() -> argparse.ArgumentParser:
    """The program's own parser: an optional first word (`serve`, `schema`) and the options
    of `serve`, with every subcommand listed in its help, one line each."""
    width = max(map(len, SUBCOMMANDS)) + 2
    commands = "\n".join(f"  {name:<{width}}{line}" for name, line in SUBCOMMANDS.items())
    parser = OneLineParser(
        prog=SERVER_NAME,
        usage=f"{SERVER_NAME} [serve] [options]\n       {SERVER_NAME} COMMAND [options]",
        description=f"{_wrapped(DESCRIPTION)}\n\n"
        f"commands (each has its own --help: '{SERVER_NAME} COMMAND --help'):\n{commands}",
        epilog=_wrapped(EPILOG),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "command",
        nargs="?",
        type=_server_command,
        default="serve",
        metavar="COMMAND",
        help="serve (the default) or another command below",
    )
    parser.add_argument("--version", action="version", version=f"{SERVER_NAME} {__version__}")
    add_serve_options(parser)
    return parser


def build_serve_parser() -> argparse.ArgumentParser:
    """`subagent-host serve`: the same options, under its own name."""
    parser = OneLineParser(prog=f"{SERVER_NAME} serve", description=DESCRIPTION, epilog=EPILOG)
    add_serve_options(parser)
    return parser


def add_serve_options(parser: argparse.ArgumentParser, *, framing: bool = True) -> None:
    """Every option of `serve` (protocol.md §7): `serve` takes them all, and `mcp` all but
    `--framing` (it speaks NDJSON to the server it starts)."""
    import platformdirs

    from subagent_host.config import DEFAULT_LOG_FORMAT, user_config_dir
    from subagent_host.settings import (
        EXECUTORS,
        FILE_NAME,
        LOG_FORMATS,
        LOG_LEVELS,
        PROCESS_TRACKING,
        PROJECT_FILE,
    )

    parser.add_argument(
        "--state-dir",
        type=state_directory,
        metavar="DIR",
        help="where run history (SQLite) and backend session files live "
        f"(default: {platformdirs.user_state_path(SERVER_NAME)})",
    )
    parser.add_argument(
        "--session",
        type=session_id,
        metavar="ID",
        help="bind this connection to session ID (default: a fresh session)",
    )
    if framing:
        parser.add_argument(
            "--framing",
            choices=FRAMINGS,
            help="message framing on stdin/stdout (default: auto, detected from the first byte)",
        )
    parser.add_argument(
        "--process-tracking",
        choices=PROCESS_TRACKING,
        help="how every process a child starts is found and ended: cgroup (a writable "
        "cgroup v2 hierarchy), subreaper, or marker (the run marker alone); a forced one "
        "that this host cannot provide stops the start (default: auto, the best available)",
    )
    parser.add_argument(
        "--executor",
        choices=EXECUTORS,
        help="where children run: local (this machine) or ray (a Ray cluster; needs "
        "pip install 'subagent-host[ray]') (default: local)",
    )
    parser.add_argument(
        "--ray-address",
        type=word,
        metavar="ADDR",
        help="the Ray cluster to join (HOST:PORT of its head, or auto) (default: auto)",
    )
    parser.add_argument(
        "--ray-namespace",
        type=word,
        metavar="NAME",
        help="the Ray namespace of the server's actors (default: the server's own)",
    )
    for number in number_options():
        add_number(
            parser,
            number.flag,
            number.low,
            number.high,
            f"{number.help} (default: {number.default})",
        )
    parser.add_argument(
        "--require-preflight",
        action=argparse.BooleanOptionalAction,
        help="admit only a spawn that carries a valid preflightId from preflight; "
        "any other spawn is refused (-32003, preflight-required) (default: off)",
    )
    parser.add_argument(
        "--require-egress-consent",
        action=argparse.BooleanOptionalAction,
        help="admit a launch with an agent child only when it carries egressConsent: true "
        "(its prompts and files go to a model provider); any other is refused "
        "(-32003, egress-consent-required) (default: off)",
    )
    parser.add_argument(
        "--config",
        type=existing_file,
        metavar="FILE",
        help=CONFIG_HELP.replace("{global_file}", str(user_config_dir() / FILE_NAME)).replace(
            "{project_file}", str(PROJECT_FILE)
        ),
    )
    add_trust_project(
        parser,
        f"trust the project at DIR: when the server runs there, its .pi/ agents and "
        f"{PROJECT_FILE} are used (repeatable; adds to the files' trusted_projects)",
    )
    parser.add_argument(
        "--log-level",
        type=log_level,
        metavar="LEVEL",
        help=f"one of {', '.join(LOG_LEVELS)} (default: warning)",
    )
    parser.add_argument(
        "--log-file",
        type=log_file,
        metavar="FILE",
        help="append logs to FILE instead of stderr",
    )
    parser.add_argument(
        "--log-format",
        choices=LOG_FORMATS,
        help="text, for a person, or json: one object per line with time, level, logger, "
        "message, and runId, index and pid where the line is about a run "
        f"(default: {DEFAULT_LOG_FORMAT})",
    )


def read_depth(environ: Mapping[str, str]) -> tuple[int, str | None]:
    """This server's depth in a delegation chain, from its parent's marker.

    A malformed marker fails closed: the server counts as deepest, so it runs no
    children, rather than risk unbounded recursion.
    """
    from subagent_host.config import DEFAULT_MAX_DEPTH

    raw = environ.get(DEPTH_VARIABLE)
    if raw is None:
        return 0, None
    if raw.isdigit() and len(raw) <= 6:
        return int(raw), None
    return DEFAULT_MAX_DEPTH, f"ignoring malformed {DEPTH_VARIABLE}={raw[:20]!r}; spawns refused"


def parse_config(argv: Sequence[str] | None = None) -> tuple[ServerConfig, str | None]:
    """Parse argv over the configuration files; exits 2 with a message on a bad value.

    Reads the files (once, synchronously: the loop has not started). Their problems
    are kept in `config.settings.diagnostics` for the server to log, except one the
    server must not start with (a safety setting that cannot be read, protocol.md §19):
    that one is told in one line on stderr, and the process exits 2. Every face that
    reads the configuration comes through here, so each refuses alike.
    """
    import platformdirs

    from subagent_host.config import (
        DEFAULT_LOG_FORMAT,
        DEFAULT_LOG_LEVEL,
        DEFAULT_MAX_PARALLEL,
        DEFAULT_WORKFLOW_PARALLELISM,
        OUTPUT_CAP_BYTES,
        OUTPUT_CAP_LINES,
        PREVIOUS_CAP_BYTES,
        ServerConfig,
        user_config_dir,
        working_project,
    )
    from subagent_host.settings import load_settings

    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["serve"]:  # `serve --help` is serve's own
        parser, arguments = build_serve_parser(), arguments[1:]
    else:
        parser = build_parser()
    args = parser.parse_args(arguments)
    try:
        project_dir = working_project()
    except OSError as exc:
        parser.error(f"cannot tell the working directory (the project): {exc}")
    config_dir = user_config_dir()
    settings, project_trusted = load_settings(
        config_dir=config_dir,
        project_dir=project_dir,
        explicit=args.config,
        trusted=args.trust_project,
    )
    if (refusal := settings.refusal) is not None:
        parser.exit(2, f"{SERVER_NAME}: {one_line(refusal.message)}\n")
    framing = first(args.framing, settings.framing, "auto")
    depth, warning = read_depth(os.environ)
    config = ServerConfig(
        state_dir=first(
            args.state_dir, settings.state_dir, platformdirs.user_state_path(SERVER_NAME)
        ),
        session_id=args.session if args.session is not None else settings.session,
        framing=None if framing == "auto" else Framing(framing),
        process_tracking=first(args.process_tracking, settings.process_tracking, "auto"),
        executor=_executor_choice(parser, args, settings),
        **{
            number.name: first(
                getattr(args, number.name), getattr(settings, number.name), number.default
            )
            for number in number_options()
        },
        require_preflight=first(args.require_preflight, settings.require_preflight, False),
        require_egress_consent=first(
            args.require_egress_consent, settings.require_egress_consent, False
        ),
        max_parallel=settings.max_parallel or DEFAULT_MAX_PARALLEL,
        workflow_parallelism=settings.workflow_parallelism or DEFAULT_WORKFLOW_PARALLELISM,
        output_cap_bytes=settings.output_cap_bytes or OUTPUT_CAP_BYTES,
        output_cap_lines=settings.output_cap_lines or OUTPUT_CAP_LINES,
        previous_cap_bytes=settings.previous_cap_bytes or PREVIOUS_CAP_BYTES,
        config_file=args.config,
        trusted_projects=tuple(dict.fromkeys((*args.trust_project, *settings.trusted_projects))),
        log_level=first(args.log_level, settings.log_level, DEFAULT_LOG_LEVEL),
        log_file=args.log_file if args.log_file is not None else settings.log_file,
        log_format=first(args.log_format, settings.log_format, DEFAULT_LOG_FORMAT),
        depth=depth,
        settings=settings,
        config_dir=config_dir,
        project_dir=project_dir,
        project_trusted=project_trusted,
    )
    return config, warning


def _executor_choice(
    parser: argparse.ArgumentParser, args: argparse.Namespace, settings: Settings
) -> ExecutorChoice:
    """`--executor` and the `--ray-*` options over the files' `executor`; the cluster's
    options only with a cluster executor."""
    from subagent_host.settings import LOCAL, ExecutorChoice

    from_files = settings.executor or ExecutorChoice()
    kind = first(args.executor, from_files.kind, LOCAL)
    same = kind == from_files.kind  # the file's address is for the file's executor
    choice = ExecutorChoice(
        kind=kind,
        address=args.ray_address or (from_files.address if same else None),
        namespace=args.ray_namespace or (from_files.namespace if same else None),
    )
    if kind == LOCAL and (choice.address is not None or choice.namespace is not None):
        parser.error("--ray-address and --ray-namespace need --executor ray")
    return choice
