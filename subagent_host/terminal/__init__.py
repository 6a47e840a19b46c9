"""The command line for a person at a terminal: `run`, `runs`, `show`, `logs`, `stop`,
`send`, `interrupt`, `permit`, `close`, `watch`, `doctor` (protocol.md §7).

Each subcommand is a thin client of the one core: it starts or reaches a server through
the client library (`subagent_host.client`), or reads the state directory through the
store's read-only view (store/browse.py); none runs children itself. `serve` stays pure
protocol.

`COMMANDS` names each subcommand and its module; the module is imported only when its
subcommand is asked for, so `serve`, `--version` and `--help` never load terminal code.
"""

from __future__ import annotations

from typing import Final

COMMANDS: Final[dict[str, str]] = {
    # name: one line for `subagent-host --help`. The module is subagent_host.terminal.<name>,
    # with `main(argv: Sequence[str]) -> int`.
    "run": "runs one command or agent and prints its output (exit status: how it ended)",
    "runs": "lists the recent runs of the state directory, of every session",
    "show": "shows one run: its children, how they ended, its error and output tail",
    "logs": "prints a run's output and activity in order (-f follows it until it ends)",
    "stop": "stops a run that a server on this state directory runs, from any process",
    "send": "sends a message to a running run's interactive child, from any process",
    "interrupt": "ends the current turn of a running run's interactive child",
    "permit": "answers a permission a running run's interactive child waits on (allow|reject)",
    "close": "closes a running run's interactive children: they end completed",
    "watch": "shows the runs and their children live, full screen (arrows, Enter, s, q)",
    "doctor": "checks that this machine can run subagents, one line per check with its fix",
    "worktrees": "lists the git worktrees isolated children kept; 'worktrees remove RUN' removes",
}
