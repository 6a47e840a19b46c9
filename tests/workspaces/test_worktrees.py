"""Worktrees made, measured and removed with real git in a test's own repository
(`workspaces/worktrees.py`, protocol.md §8.7), git run as this process's own children."""

from __future__ import annotations

from pathlib import Path

import pytest

from subagent_host.workspaces.worktrees import (
    Git,
    GitFailed,
    Opened,
    OutsideWorktree,
    Worktrees,
    outside_repository,
    repository_root,
)
from tests.e2e.test_worktrees import branches_of, git, make_repository, worktrees_of

RUN_ID = "0123456789abcdef0123456789abcdef"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repository(tmp_path / "repo")


@pytest.fixture
def worktrees(tmp_path: Path) -> Worktrees:
    return Worktrees(tmp_path / "state" / "worktrees", Git())


def commit_all(path: Path, message: str) -> None:
    git(path, "add", "--all")
    git(path, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", message)


def test_a_repository_is_found_by_its_dot_git_from_any_directory_inside(
    repo: Path, tmp_path: Path
) -> None:
    assert repository_root(str(repo / "sub")) == str(repo)
    assert repository_root(str(repo)) == str(repo)
    assert repository_root(str(tmp_path)) is None


def test_a_directory_that_leads_out_of_its_repository_as_written_is_told(
    repo: Path, tmp_path: Path
) -> None:
    (tmp_path / "outside" / "sub").mkdir(parents=True)
    (repo / "out").symlink_to(tmp_path / "outside")
    (repo / "in").symlink_to("sub")
    assert outside_repository(str(repo / "out" / "sub")) == str(repo)
    assert outside_repository(str(repo / "in")) is None  # a link that stays inside
    assert outside_repository(str(repo / "sub")) is None
    assert outside_repository(str(tmp_path / "outside")) is None  # in no repository


async def test_a_link_of_head_may_lead_within_the_worktree_but_never_out_of_it(
    repo: Path, worktrees: Worktrees, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (repo / "in").symlink_to("sub")
    (repo / "out").symlink_to(outside)
    commit_all(repo, "links")
    for name in ("in", "out"):  # the repository's own are directories now
        (repo / name).unlink()
        (repo / name / "deeper").mkdir(parents=True)
    opened = await worktrees.open(RUN_ID, 0, str(repo / "in" / "deeper"))
    assert opened.cwd == str(worktrees.root / f"{RUN_ID}-0" / "in" / "deeper")
    assert (Path(opened.path) / "sub" / "deeper").is_dir()  # made where the link leads
    await worktrees.remove(opened.path, branch=opened.branch, force=True, merged_only=False)
    with pytest.raises(OutsideWorktree, match="cwd-outside-worktree"):
        await worktrees.open(RUN_ID, 1, str(repo / "out" / "deeper"))
    assert list(outside.iterdir()) == []  # nothing made where it leads
    assert worktrees_of(repo) == [] and branches_of(repo) == ["main"]


async def test_a_worktree_is_made_on_its_branch_from_head_in_the_same_relative_directory(
    repo: Path, worktrees: Worktrees
) -> None:
    opened = await worktrees.open(RUN_ID, 3, str(repo / "sub"))
    assert opened.path == str(worktrees.root / f"{RUN_ID}-3")
    assert opened.branch == "subagent/01234567-3"
    assert opened.base_commit == git(repo, "rev-parse", "HEAD").strip()
    assert opened.cwd == str(worktrees.root / f"{RUN_ID}-3" / "sub")
    assert (Path(opened.cwd) / "keep.txt").read_text() == "kept\n"
    assert worktrees_of(repo) == [opened.path]
    assert oct((worktrees.root).stat().st_mode & 0o777) == "0o700"
    clean = await worktrees.finish_attempt(opened)
    assert clean.kept is False and clean.commits == 0 and clean.uncommitted == 0
    assert worktrees_of(repo) == [] and opened.branch not in branches_of(repo)


async def test_renames_deletions_binary_files_and_commits_are_all_measured_against_the_base(
    repo: Path, worktrees: Worktrees
) -> None:
    opened = await worktrees.open(RUN_ID, 0, str(repo))
    path = Path(opened.path)
    (path / "blob.bin").write_bytes(b"\0\1\2")
    commit_all(path, "a binary file")
    git(path, "mv", "sub/keep.txt", "moved.txt")  # staged, not committed
    (path / "shared.txt").unlink()
    (path / "new.txt").write_text("one\ntwo\n")

    report = await worktrees.finish_attempt(opened)
    assert report.commits == 1 and report.kept is True
    assert report.uncommitted == 3  # the staged rename (once), the deletion, the new file
    assert report.changed_files == (
        "blob.bin",
        "moved.txt",
        "new.txt",
        "shared.txt",
        "sub/keep.txt",
    )
    assert (report.diff_stat.files, report.diff_stat.insertions, report.diff_stat.deletions) == (
        5,
        3,  # moved.txt's line and new.txt's two (the binary file counts no lines)
        2,  # sub/keep.txt's and shared.txt's
    )
    # The child's own index is as it left it: the rename staged, the rest not.
    assert git(path, "diff", "--cached", "--name-status").split() == [
        "R100",
        "sub/keep.txt",
        "moved.txt",
    ]
    await worktrees.remove(opened.path, force=True, merged_only=False)
    assert worktrees_of(repo) == []


async def test_a_repository_without_a_commit_cannot_give_a_worktree(
    tmp_path: Path, worktrees: Worktrees
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    with pytest.raises(GitFailed, match="has no commit yet"):
        await worktrees.open(RUN_ID, 0, str(empty))


async def test_a_branch_with_commits_not_merged_is_kept_when_only_merged_ones_are_deleted(
    repo: Path, worktrees: Worktrees
) -> None:
    opened: Opened = await worktrees.open(RUN_ID, 1, str(repo))
    (Path(opened.path) / "shared.txt").write_text("changed\n")
    commit_all(Path(opened.path), "a change")
    removal = await worktrees.remove(opened.path, force=True, merged_only=True)
    assert (removal.removed, removal.branch, removal.branch_deleted) == (
        True,
        opened.branch,
        False,
    )
    assert opened.branch in branches_of(repo) and worktrees_of(repo) == []
    assert await worktrees.listed() == []
