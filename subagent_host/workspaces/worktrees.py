"""Make, measure, list and remove the worktrees of isolated children (protocol.md §8.7).

Each isolated child gets `<state>/worktrees/<runId>-<index>`, a worktree of the
repository around its `cwd` on a new branch `subagent/<first 8 of runId>-<index>`
made from `HEAD`; it runs in the same relative directory inside it. When an
attempt ends, `finish_attempt` measures what it left (commits on the branch, uncommitted
changes and new untracked files, against the commit it began from) and removes
a worktree that holds nothing, with its branch. Kept ones are listed and removed
on request (`subagent-host worktrees`); with the runs history pruning deletes only
when they hold no work (an orphaned one is listed until a person removes it).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path
from typing import Final

import attrs

from subagent_host.state_layout import WORKTREES_DIR, private_directory
from subagent_host.values import WORKTREE
from subagent_host.values.facts import DiffStat, Workspace
from subagent_host.workspaces.git import Git, GitFailed

__all__ = [
    "WORKTREES_DIR",
    "Git",
    "GitFailed",
    "CWD_OUTSIDE_WORKTREE",
    "Opened",
    "OutsideWorktree",
    "Removal",
    "Worktrees",
    "outside_repository",
    "repository_root",
]

# The worktrees' directory in the state directory.
BRANCH_PREFIX: Final = "subagent/"
# How many changed files a report names; `diffStat.files` counts them all.
MAX_CHANGED_FILES: Final = 200
# The part of a run id a branch name carries: short enough to type, long enough to
# tell the runs of one repository apart.
BRANCH_RUN_ID_CHARS: Final = 8
# Beside a worktree while it is measured: the index its changes are staged in, so
# the child's own index (what it staged) is left as it was.
MEASURING_INDEX_SUFFIX: Final = ".index"
# The diagnostic and the child's error code for a `cwd` that leads out of its worktree.
CWD_OUTSIDE_WORKTREE: Final = "cwd-outside-worktree"


class OutsideWorktree(GitFailed):
    """The child's directory inside its worktree resolves outside it (a symbolic link of
    HEAD leads out): it must not start there."""


def within(path: str, root: str) -> bool:
    """`path` is `root` or under it (both already resolved)."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def outside_repository(directory: str) -> str | None:
    """The repository root that holds `directory` by its path (the nearest ancestor, as
    written, with a `.git`), when `directory` resolves outside it: a symbolic link of the
    repository leads out, and a worktree's copy of that link would lead out too.
    None when it stays inside, or no ancestor as written has a `.git`."""
    current = os.path.normpath(os.path.abspath(directory))
    while True:
        if os.path.lexists(os.path.join(current, ".git")):
            inside = within(os.path.realpath(directory), os.path.realpath(current))
            return None if inside else current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def repository_root(directory: str) -> str | None:
    """The root of the git work tree around `directory` (the nearest with a `.git`), or None.

    Reads the filesystem only, so planning can tell a repository without starting git.
    """
    current = os.path.realpath(directory)
    while True:
        if os.path.lexists(os.path.join(current, ".git")):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return None
        current = parent


def worktree_name(run_id: str, index: int) -> str:
    """The worktree's directory name under `<state>/worktrees`."""
    return f"{run_id}-{index}"


def branch_name(run_id: str, index: int) -> str:
    return f"{BRANCH_PREFIX}{run_id[:BRANCH_RUN_ID_CHARS]}-{index}"


@attrs.frozen
class Opened:
    """A child's worktree, ready for it to run in."""

    path: str
    """The worktree's root."""
    branch: str
    base_commit: str
    cwd: str
    """Where the child runs: its `cwd`'s place relative to the repository, inside the worktree."""


@attrs.frozen
class Removal:
    """What removing a worktree did."""

    removed: bool
    """The worktree is gone (it may have been gone already)."""
    branch: str | None
    """Its branch, when it had one."""
    branch_deleted: bool
    """False when the branch was kept: it holds commits not merged into the repository's HEAD."""


@attrs.frozen
class Listed:
    """A worktree found under `<state>/worktrees`."""

    name: str
    """`<runId>-<index>`."""
    path: str
    branch: str | None
    """Its branch; None when git could not tell (a worktree damaged by hand)."""

    @property
    def run_id(self) -> str:
        return self.name.rpartition("-")[0]

    @property
    def index(self) -> int | None:
        index = self.name.rpartition("-")[2]
        return int(index) if index.isdigit() else None


def reopened(workspace: Workspace, cwd: str) -> Opened:
    """A kept worktree as a resumed attempt runs in it again."""
    return Opened(
        path=workspace.path, branch=workspace.branch, base_commit=workspace.base_commit, cwd=cwd
    )


def unmeasured(opened: Opened) -> Workspace:
    """The report of a worktree just made (or whose child has not ended): nothing in it yet."""
    return Workspace(
        path=opened.path,
        branch=opened.branch,
        base_commit=opened.base_commit,
        head_commit=opened.base_commit,
        commits=0,
        changed_files=(),
        diff_stat=DiffStat(files=0, insertions=0, deletions=0),
        uncommitted=0,
        kept=True,
    )


class Worktrees:
    """The worktrees under one directory (`<state>/worktrees`), through one `Git`."""

    def __init__(self, root: Path, git: Git) -> None:
        self.root = root
        self._git = git

    async def open(self, run_id: str, index: int, cwd: str) -> Opened:
        """Make the child's worktree and branch from the `HEAD` of the repository around `cwd`.

        Raises GitFailed (nothing is left behind then but what git itself keeps).
        """
        git = self._git
        top = (await git("rev-parse", "--show-toplevel", cwd=cwd)).strip()
        try:
            base = (await git("rev-parse", "--verify", "HEAD^{commit}", cwd=top)).strip()
        except GitFailed:
            raise GitFailed(
                f"the repository at {top!r} has no commit yet: a {WORKTREE} starts from HEAD"
            ) from None
        try:
            await asyncio.to_thread(private_directory, self.root, parents=True)
        except OSError as exc:
            raise GitFailed(f"cannot make {str(self.root)!r}: {exc.strerror or exc}") from None
        path = str(self.root / worktree_name(run_id, index))
        branch = branch_name(run_id, index)
        await git("worktree", "add", "--quiet", "-b", branch, path, base, cwd=top)
        try:
            inside = await asyncio.to_thread(_same_place, path, top, cwd)
        except (OSError, OutsideWorktree) as exc:
            # Nothing ran in it: the worktree and its branch go (the child never starts).
            with contextlib.suppress(GitFailed):
                await self.remove(path, branch=branch, force=True, merged_only=False)
            if isinstance(exc, OutsideWorktree):
                raise
            raise GitFailed(f"cannot make the child's directory in {path!r}: {exc}") from None
        return Opened(path=path, branch=branch, base_commit=base, cwd=inside)

    async def finish_attempt(self, opened: Opened) -> Workspace:
        """What the attempt left in its worktree; one holding nothing is removed with its
        branch (kept: false)."""
        report = await self.measure(opened)
        if report.commits or report.uncommitted:
            return report
        try:
            await self.remove(opened.path, branch=opened.branch, force=False, merged_only=False)
        except GitFailed:
            return report  # kept, and listed: `subagent-host worktrees remove` can try again
        return attrs.evolve(report, kept=False)

    async def measure(self, opened: Opened) -> Workspace:
        """Commits on the branch and changes in the worktree since its base (kept: True)."""
        git, path = self._git, opened.path
        head = (await git("rev-parse", "HEAD", cwd=path)).strip()
        commits = int(await git("rev-list", "--count", f"{opened.base_commit}..HEAD", cwd=path))
        status = await git("status", "--porcelain=v1", "-z", "--untracked-files=all", cwd=path)
        uncommitted = _status_entries(status)
        changes = await self._changes(path, opened.base_commit) if commits or uncommitted else []
        files = sorted(name for _added, _removed, name in changes)
        return Workspace(
            path=path,
            branch=opened.branch,
            base_commit=opened.base_commit,
            head_commit=head,
            commits=commits,
            changed_files=tuple(files[:MAX_CHANGED_FILES]),
            diff_stat=DiffStat(
                files=len(files),
                insertions=sum(added for added, _removed, _name in changes),
                deletions=sum(removed for _added, removed, _name in changes),
            ),
            uncommitted=uncommitted,
            kept=True,
        )

    async def _changes(self, path: str, base: str) -> list[tuple[int, int, str]]:
        """Every file the worktree differs in from `base` (lines added, removed; 0 for a
        binary file), staged in an index of our own: untracked files count, and the
        child's own index stays as it left it."""
        index = path + MEASURING_INDEX_SUFFIX
        env = {"GIT_INDEX_FILE": index}
        try:
            await self._git("read-tree", "HEAD", cwd=path, env=env)
            await self._git("add", "--all", cwd=path, env=env)
            numstat = await self._git(
                "diff", "--cached", "--numstat", "--no-renames", "-z", base, cwd=path, env=env
            )
        finally:
            await asyncio.to_thread(_unlink, index)
        changes = []
        for entry in numstat.split("\0"):
            if entry:
                added, removed, name = entry.split("\t", 2)
                changes.append((_lines(added), _lines(removed), name))
        return changes

    async def remove(
        self, path: str, *, branch: str | None = None, force: bool, merged_only: bool
    ) -> Removal:
        """Remove the worktree at `path` and its branch (with `merged_only`, only a branch
        whose commits are merged into the repository's HEAD). `force` removes a worktree
        with whatever changes it holds. Raises GitFailed."""
        git = self._git
        if not await asyncio.to_thread(os.path.isdir, path):
            return Removal(removed=True, branch=branch, branch_deleted=False)
        common = await git("rev-parse", "--path-format=absolute", "--git-common-dir", cwd=path)
        common = common.strip()
        if branch is None:
            branch = (await git("branch", "--show-current", cwd=path)).strip() or None
        await git("worktree", "remove", *(("--force",) if force else ()), path, cwd=common)
        deleted = False
        if branch is not None:
            try:
                await git("branch", "-d" if merged_only else "-D", branch, cwd=common)
                deleted = True
            except GitFailed:
                if not merged_only:
                    raise
        return Removal(removed=True, branch=branch, branch_deleted=deleted)

    async def listed(self) -> list[Listed]:
        """The worktrees under the directory, by name."""
        names = await asyncio.to_thread(_directories, self.root)
        found = []
        for name in names:
            path = str(self.root / name)
            try:
                branch = (await self._git("branch", "--show-current", cwd=path)).strip() or None
            except GitFailed:
                branch = None
            found.append(Listed(name=name, path=path, branch=branch))
        return found

    async def remove_of_runs(self, run_ids: set[str]) -> list[Removal]:
        """Remove the worktrees of these runs (the history deleted them) that hold no work.

        One with uncommitted changes or commits not merged into the repository's HEAD
        (or that git cannot tell about) is kept, orphaned: only a person deletes work,
        with `subagent-host worktrees remove`.
        """
        removals = []
        for entry in await self.listed():
            if entry.run_id not in run_ids:
                continue
            with contextlib.suppress(GitFailed):
                if not await self.holds_work(entry.path):
                    removals.append(
                        await self.remove(
                            entry.path, branch=entry.branch, force=True, merged_only=True
                        )
                    )
        return removals

    async def holds_work(self, path: str) -> bool:
        """The worktree at `path` has uncommitted changes (new untracked files too) or
        commits its repository's HEAD does not hold. Raises GitFailed."""
        git = self._git
        status = await git("status", "--porcelain=v1", "-z", "--untracked-files=all", cwd=path)
        if _status_entries(status):
            return True
        head = (await git("rev-parse", "--verify", "HEAD^{commit}", cwd=path)).strip()
        common = await git("rev-parse", "--path-format=absolute", "--git-common-dir", cwd=path)
        # In the common directory HEAD is the repository's own, not the worktree's.
        ahead = await git("rev-list", "--count", head, "--not", "HEAD", cwd=common.strip())
        return int(ahead) > 0


def _same_place(worktree: str, top: str, cwd: str) -> str:
    """`cwd`'s place relative to the repository's root `top`, inside `worktree`; a
    directory HEAD does not hold (untracked, or ignored) is made, empty.

    Made and resolved one component at a time: a symbolic link HEAD holds may lead
    elsewhere in the worktree, but one that leads out of it (`lnk -> /outside`) raises
    OutsideWorktree before anything is made where it leads.
    """
    root = os.path.realpath(worktree)
    relative = os.path.relpath(os.path.realpath(cwd), os.path.realpath(top))
    current = root
    for part in [] if relative == os.curdir else relative.split(os.sep):
        candidate = os.path.join(current, part)
        if not os.path.lexists(candidate):
            os.mkdir(candidate)
        resolved = os.path.realpath(candidate)
        if part == os.pardir or not within(resolved, root):
            raise OutsideWorktree(
                f"{CWD_OUTSIDE_WORKTREE}: the child's directory {relative!r} in the worktree "
                f"{worktree!r} leads out of it (to {resolved!r}) through a symbolic link "
                "of HEAD: it does not start there"
            )
        current = resolved
    # As the worktree is named (its links stay inside it: checked above).
    return os.path.normpath(os.path.join(worktree, relative))


def _directories(root: Path) -> list[str]:
    try:
        return sorted(entry.name for entry in os.scandir(root) if entry.is_dir())
    except OSError:  # no such directory (none was made), or the state directory is unusable
        return []


def _unlink(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _lines(count: str) -> int:
    return 0 if count == "-" else int(count)  # `-`: a binary file


def _status_entries(status: str) -> int:
    """Paths `git status --porcelain -z` lists (a rename's origin path is not another)."""
    fields = status.split("\0")
    count = position = 0
    while position < len(fields):
        entry = fields[position]
        position += 1
        if not entry:
            continue
        count += 1
        if entry[:1] in ("R", "C"):  # its origin path follows
            position += 1
    return count
