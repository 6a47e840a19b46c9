"""`subagent-host conformance`: the command line of the harness."""

from __future__ import annotations

import argparse
import asyncio
import json
import shlex
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from subagent_host.conformance.mismatch import FRAMINGS, FramingName
from subagent_host.conformance.runner import (
    DEFAULT_JOBS,
    DEFAULT_REPLY_TIMEOUT_S,
    Outcome,
    Settings,
    run_framing,
)
from subagent_host.conformance.schema import load_validator
from subagent_host.conformance.selection import PatternError, compile_pattern


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="subagent-host conformance",
        description="Run the protocol's conformance cases (protocol.md) against a server "
        "over its stdin and stdout. Exit status 0 only when every selected case passed.",
    )
    parser.add_argument(
        "--server",
        metavar="CMD ARGS",
        help="the server command, split like a shell line (default: this installation's, "
        f"{sys.executable} -m subagent_host). The harness appends --state-dir DIR and, "
        "for some cases, other options of protocol.md §7",
    )
    parser.add_argument("--framing", choices=("ndjson", "lsp", "both"), default="both")
    parser.add_argument(
        "-k",
        dest="pattern",
        metavar="PATTERN",
        help="run only cases whose id, section or keywords match: words (substrings) "
        "with and, or, not and parentheses, e.g. -k 'stop and not agents'",
    )
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the results to FILE")
    parser.add_argument(
        "--with-agents",
        action="store_true",
        help="also run the cases that need the agent CLIs (pi, claude, codex) installed, "
        "and the ACP cases (the harness's own ACP agent, on this Python, configured as a "
        "backend of the server with --config)",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=DEFAULT_JOBS,
        help=f"cases run at once (default: {DEFAULT_JOBS})",
    )
    parser.add_argument(
        "--reply-timeout",
        type=float,
        default=DEFAULT_REPLY_TIMEOUT_S,
        metavar="S",
        help="seconds to wait for any one answer before the case fails "
        f"(default: {DEFAULT_REPLY_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--schema",
        type=Path,
        metavar="FILE",
        help="validate answers against this OpenRPC document (default: the one the package "
        "ships, when jsonschema is installed; else the keys protocol.md requires)",
    )
    parser.add_argument("--list", action="store_true", help="list the selected cases and exit")
    return parser


def main(argv: Sequence[str], out: TextIO = sys.stdout) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        matches = compile_pattern(args.pattern)
    except PatternError as exc:
        parser.error(str(exc))
    if args.jobs < 1:
        parser.error("--jobs must be at least 1")
    server = (
        tuple(shlex.split(args.server)) if args.server else (sys.executable, "-m", "subagent_host")
    )
    if not server:
        parser.error("--server is empty")
    server = (_from_here(server[0]), *server[1:])
    framings: tuple[FramingName, ...] = FRAMINGS if args.framing == "both" else (args.framing,)
    # The cases load only now: `--help` and a bad option answer without them.
    from subagent_host.conformance.cases import all_cases

    cases = all_cases()
    by_pattern = [c for c in cases if matches(c.words())]
    selected = [c for c in by_pattern if args.with_agents or not c.needs_agents]
    if args.list:
        for case in selected:
            print(f"{case.id}  {case.section}  {' '.join(case.keywords)}", file=out)
        return 0
    try:
        validator = load_validator(args.schema)
    except (OSError, ValueError, ImportError) as exc:
        parser.error(f"--schema {args.schema}: {exc}")
    settings = Settings(server, validator, args.jobs, args.reply_timeout)
    print(f"conformance: {shlex.join(server)}; shapes checked by {validator.name}", file=out)

    def report(outcome: Outcome) -> None:
        print(line(outcome), file=out, flush=True)

    outcomes: list[Outcome] = []
    timings: dict[str, float] = {}
    for framing in framings:
        began = time.monotonic()
        outcomes += asyncio.run(run_framing(selected, framing, settings, report))
        timings[framing] = round(time.monotonic() - began, 1)
    skipped_k = len(cases) - len(by_pattern)
    skipped_agents = len(by_pattern) - len(selected)
    failed = [o for o in outcomes if o.verdict == "FAIL"]
    summary = {
        "passed": len(outcomes) - len(failed),
        "failed": len(failed),
        "skippedByPattern": skipped_k,
        "skippedNeedAgents": skipped_agents,
        "secondsPerFraming": timings,
    }
    print(summary_line(summary), file=out)
    for outcome in failed:
        print(f"  failed: {outcome.framing} {outcome.case.id}", file=out)
    if args.json:
        args.json.write_text(json.dumps(results(server, outcomes, summary), indent=2) + "\n")
    return 1 if failed or not outcomes else 0


def line(outcome: Outcome) -> str:
    head = f"{outcome.verdict} {outcome.framing:<6} {outcome.case.id} {outcome.case.section}"
    if outcome.verdict == "PASS":
        return f"{head} ({outcome.seconds:.1f} s)"
    return f"{head}: expected {outcome.expected}; seen {outcome.seen}"


def summary_line(summary: dict[str, Any]) -> str:
    times = ", ".join(f"{f} {s} s" for f, s in summary["secondsPerFraming"].items())
    return (
        f"{summary['passed']} passed, {summary['failed']} failed; skipped: "
        f"{summary['skippedByPattern']} by -k, {summary['skippedNeedAgents']} needing "
        f"--with-agents (skipped cases do not count); {times}"
    )


def results(server: tuple[str, ...], outcomes: list[Outcome], summary: dict[str, Any]) -> Any:
    return {
        "server": list(server),
        "summary": summary,
        "cases": [
            {
                "id": o.case.id,
                "section": o.case.section,
                "framing": o.framing,
                "keywords": list(o.case.keywords),
                "verdict": o.verdict,
                "seconds": round(o.seconds, 3),
                **(
                    {"expected": o.expected, "seen": o.seen, "stderr": o.stderr}
                    if o.expected
                    else {}
                ),
            }
            for o in outcomes
        ],
    }


def _from_here(program: str) -> str:
    """A relative program path (`.venv/bin/subagent-host`) means from where the harness was
    started, as in a shell: each case runs its server in a directory of its own."""
    if "/" in program and not Path(program).is_absolute():
        return str(Path(program).resolve())
    return program
