"""`subagent-host doctor`: is this machine ready to run subagents? (protocol.md §7)

One line per check, `✓` passed, `✗` failed, `!` worth knowing, each failure or warning
with its fix; exit 0 when none failed, 1 otherwise. The checks are in
terminal/diagnosis.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Final

from rich.console import Console
from rich.text import Text

from subagent_host.command_line import parse_config
from subagent_host.terminal.checks import Check
from subagent_host.terminal.diagnosis import diagnose
from subagent_host.terminal.options import any_path, subcommand_parser

NAME: Final = "doctor"
MARKS: Final = {True: ("✓", "green"), False: ("✗", "red"), None: ("!", "yellow")}


def main(argv: Sequence[str]) -> int:
    parser = subcommand_parser(
        NAME,
        "Check what running subagents here needs: Python, the state directory, SQLite, "
        "the agent CLIs, their versions and credentials, pi's models.json, process tracking "
        "and the delegation depth.",
        # A --state-dir that is no directory is a failed check here, not a bad option.
        state_dir=any_path,
    )
    args = parser.parse_args(argv)
    # The same configuration as `serve` with these options; the state directory to use
    # is chosen by the doctor (it changes nothing in one that is not as it must be).
    server_args = [] if args.config is None else ["--config", str(args.config)]
    for directory in args.trust_project:
        server_args += ["--trust-project", str(directory)]
    # Read as serve reads it: a safety setting that cannot be read is serve's one line
    # and exit 2 here too (protocol.md §19).
    config, _warning = parse_config(server_args)
    state_dir = args.state_dir if args.state_dir is not None else config.state_dir
    checks = asyncio.run(diagnose(state_dir, server_args))
    console = Console(highlight=False, soft_wrap=True)
    for check in checks:
        console.print(line(check))
    return 0 if all(check.passed is not False for check in checks) else 1


def line(check: Check) -> Text:
    mark, style = MARKS[check.passed]
    text = Text.assemble((mark, style), " ", (check.name, "bold"), ": ", check.detail)
    if check.fix is not None and check.passed is not True:
        text.append(f" (fix: {check.fix})")
    return text
