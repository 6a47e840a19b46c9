"""`subagent-host worktrees`: the git worktrees isolated children left, and their removal
(protocol.md §7.8, §8.7).

`worktrees` lists every worktree under `<state>/worktrees` (kept because its child
committed or changed something, or left by a server that died while it ran): the
run and child it belongs to, its branch, what the child's snapshot says it left
(`orphaned` when the history deleted the run but the worktree held work), and
its path. `worktrees remove RUN [--index N]` removes a run's (or one child's)
worktrees, changes and all; a branch holding commits not merged into the
repository's HEAD is kept, and said so. A running child's worktree is never removed.
git runs as this command's own short child processes; the database is read
read-only (`store/browse.py`), as `runs` reads it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from subagent_host import SERVER_NAME
from subagent_host.options import add_number
from subagent_host.runs.state import Run
from subagent_host.store.browse import MIN_PREFIX, BrowseError, StateBrowser
from subagent_host.terminal import views
from subagent_host.terminal.options import state_dir_of, subcommand_parser
from subagent_host.workspaces.worktrees import (
    WORKTREES_DIR,
    Git,
    GitFailed,
    Listed,
    Worktrees,
)

NAME: Final = "worktrees"
# A child's index: any whole number from 0 (no run has this many children).
ANY_INDEX: Final = 2**31 - 1
REMOVE: Final = "remove"
# A worktree whose run the history deleted: pruning keeps one that holds work.
ORPHANED: Final = "orphaned (its run is no longer recorded)"


def main(argv: Sequence[str]) -> int:
    if argv[:1] == [REMOVE]:
        parser = subcommand_parser(
            f"{NAME} {REMOVE}",
            "Remove the git worktrees of a run's isolated children (changes and all); a branch "
            "with commits not merged into the repository's HEAD is kept.",
        )
        parser.add_argument(
            "run", metavar="RUN", help="a run id, or its first 8 or more characters"
        )
        add_number(parser, "--index", 0, ANY_INDEX, "only child N's worktree")
        return views.guarded(parser, argv[1:], lambda args: asyncio.run(remove(args)))
    parser = subcommand_parser(
        NAME,
        "List the git worktrees isolated children left in the state directory "
        f"('{NAME} {REMOVE} RUN' removes them).",
    )
    return views.guarded(parser, argv, lambda args: asyncio.run(list_kept(args)))


def _worktrees(args: argparse.Namespace) -> tuple[Path, Worktrees]:
    state = state_dir_of(args)
    return state, Worktrees(state / WORKTREES_DIR, Git())


async def list_kept(args: argparse.Namespace) -> int:
    state, worktrees = _worktrees(args)
    found = await worktrees.listed()
    if not found:
        print(f"no worktrees in {worktrees.root}")
        return 0
    runs = await asyncio.to_thread(_recorded_runs, state, {entry.run_id for entry in found})
    for entry in found:
        run = runs.get(entry.run_id)
        print(
            f"{views.short_id(entry.run_id)}-{entry.index}  {entry.branch or '(no branch)'}  "
            f"{_what_it_left(run, entry)}  {entry.path}"
        )
    return 0


def _what_it_left(run: Run | None, entry: Listed) -> str:
    if run is None:
        return ORPHANED
    child = next((c for c in run.children if c.index == entry.index), None)
    if child is None or child.workspace is None:
        return "(not measured)"
    if not run.is_terminal:
        return "running"
    return views.workspace_summary(child.workspace)


def _recorded_runs(state: Path, run_ids: set[str]) -> dict[str, Run]:
    """The runs of these ids still in the history (none when there is no history)."""
    try:
        with StateBrowser.open(state) as browser:
            return {run_id: run for run_id in run_ids if (run := browser.load(run_id)) is not None}
    except BrowseError:
        return {}


async def remove(args: argparse.Namespace) -> int:
    state, worktrees = _worktrees(args)
    reference: str = args.run
    chosen = [
        entry
        for entry in await worktrees.listed()
        if _matches(entry.run_id, reference) and args.index in (None, entry.index)
    ]
    run_ids = {entry.run_id for entry in chosen}
    if len(run_ids) > 1:
        return _fail(f"{reference!r} is the start of more than one run id: give more of it")
    if not chosen:
        which = f"child {args.index} of run" if args.index is not None else "run"
        return _fail(f"no worktree of {which} {reference!r} in {worktrees.root}")
    runs = await asyncio.to_thread(_recorded_runs, state, run_ids)
    run = runs.get(chosen[0].run_id)
    if run is not None and not run.is_terminal:
        return _fail(f"run {views.short_id(run.run_id)} is still running: stop it first")
    status = 0
    for entry in chosen:
        try:
            removal = await worktrees.remove(
                entry.path, branch=entry.branch, force=True, merged_only=True
            )
        except GitFailed as exc:
            print(f"{SERVER_NAME} {NAME}: cannot remove {entry.path}: {exc}", file=sys.stderr)
            status = 1
            continue
        line = f"removed {entry.path}"
        if removal.branch is not None and removal.branch_deleted:
            line += f" and its branch {removal.branch}"
        elif removal.branch is not None:
            line += (
                f"; kept its branch {removal.branch}: it holds commits not merged into HEAD "
                f"(git branch -D {removal.branch} deletes it)"
            )
        print(line)
    return status


def _matches(run_id: str, reference: str) -> bool:
    return run_id == reference or (len(reference) >= MIN_PREFIX and run_id.startswith(reference))


def _fail(message: str) -> int:
    print(f"{SERVER_NAME} {NAME} {REMOVE}: {message}", file=sys.stderr)
    return 1
