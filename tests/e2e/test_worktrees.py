"""Isolated children over real stdio: each in a git worktree and on a branch of its own.

`isolation: "worktree"` (protocol.md §8.7) gives each child a worktree of the
repository around its `cwd`, under the state directory, on the branch
`subagent/<first 8 of runId>-<index>` made from `HEAD`. When it ends, its
snapshot's `workspace` tells what it left; a worktree holding nothing is removed
with its branch, one with commits or changes is kept. Every test makes its own
repositories, and proves at its end that no process and no worktree is left.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from subagent_host.store.instances import SESSION_RETENTION
from subagent_host.store.schema import DB_NAME
from tests.e2e.harness import (
    EXIT_TIMEOUT_S,
    ServerProcess,
    error_of,
    reply_to,
    result_of,
    running_server,
    server_executable,
    state_args,
)
from tests.e2e.test_preflight import LAUNCH_REJECTED, error_codes, rejection_codes

GIT_TIMEOUT_S: Final = 30.0
# Appends its line to the shared file and commits it on its branch.
COMMIT_LINE: Final = (
    'echo "$1" >> shared.txt && git add shared.txt && '
    'git -c user.name=child -c user.email=child@example.invalid commit -q -m "$1"'
)


def git(repo: Path, *args: str) -> str:
    """git's output in `repo` (a test's own repository; bounded)."""
    done = subprocess.run(  # noqa: TID251 - a test's own setup, not the server's loop
        ["git", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        timeout=GIT_TIMEOUT_S,
        check=True,
    )
    return done.stdout


def make_repository(path: Path) -> Path:
    """A repository with one commit holding `shared.txt` (one line) and `sub/`."""
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "shared.txt").write_text("base\n")
    (path / "sub").mkdir()
    (path / "sub" / "keep.txt").write_text("kept\n")
    git(path, "add", ".")
    git(path, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "b")
    return path


def worktrees_of(repo: Path) -> list[str]:
    """The repository's linked worktrees (its own checkout left out)."""
    listing = git(repo, "worktree", "list", "--porcelain")
    paths = [line.split(" ", 1)[1] for line in listing.splitlines() if line.startswith("worktree ")]
    return paths[1:]


def branches_of(repo: Path) -> list[str]:
    return git(repo, "branch", "--format=%(refname:short)").split()


def remove_kept(repo: Path) -> None:
    """Remove what a test kept on purpose, so it can prove nothing else is left."""
    for path in worktrees_of(repo):
        git(repo, "worktree", "remove", "--force", path)


def assert_no_worktree_left(repo: Path, state: Path) -> None:
    assert worktrees_of(repo) == []
    left = sorted(os.listdir(state / "worktrees")) if (state / "worktrees").exists() else []
    assert left == [], left


def assert_gone(repo: Path, space: dict[str, Any]) -> None:
    """A worktree and its branch that were removed."""
    assert not Path(space["path"]).exists()
    assert space["branch"] not in branches_of(repo)
    assert space["path"] not in worktrees_of(repo)


def isolated(command: list[str], **extra: Any) -> dict[str, Any]:
    return {"command": command, "isolation": "worktree", **extra}


async def isolated_tasks(server: ServerProcess, repo: Path, *commands: list[str]) -> dict[str, Any]:
    """A task-mode run of these commands in parallel, each isolated, in `repo`: its snapshot."""
    tasks = [isolated(command) for command in commands]
    spawn = {"tasks": tasks, "cwd": str(repo), "mode": "task"}
    snapshot: dict[str, Any] = await result_of(server, "spawn", spawn)
    return snapshot


async def test_parallel_isolated_children_edit_one_file_each_on_its_own_branch(
    tmp_path: Path,
) -> None:
    repo = make_repository(tmp_path / "repo")
    state = tmp_path / "state"
    async with running_server(*state_args(state)) as server:
        run = await isolated_tasks(
            server,
            repo,
            ["sh", "-c", COMMIT_LINE, "sh", "from child 0"],
            ["sh", "-c", COMMIT_LINE, "sh", "from child 1"],
            ["sh", "-c", 'echo "not committed" >> shared.txt'],
            ["true"],
        )
        assert run["status"] == "completed", run
        run_id = run["runId"]
        base = git(repo, "rev-parse", "HEAD").strip()
        spaces = [child["workspace"] for child in run["children"]]
        for index, space in enumerate(spaces):
            assert space["branch"] == f"subagent/{run_id[:8]}-{index}"
            assert space["path"] == str(state.resolve() / "worktrees" / f"{run_id}-{index}")
            assert space["baseCommit"] == base

        for index in (0, 1):  # each branch holds its own change, and only it
            space = spaces[index]
            assert space["commits"] == 1 and space["uncommitted"] == 0, space
            assert space["changedFiles"] == ["shared.txt"], space
            assert space["diffStat"] == {"files": 1, "insertions": 1, "deletions": 0}, space
            assert space["kept"] is True and space["headCommit"] != base, space
            shown = git(repo, "show", f"{space['branch']}:shared.txt")
            assert shown == f"base\nfrom child {index}\n"

        dirty = spaces[2]
        assert (dirty["commits"], dirty["uncommitted"], dirty["kept"]) == (0, 1, True), dirty
        assert dirty["changedFiles"] == ["shared.txt"] and dirty["headCommit"] == base, dirty
        assert (Path(dirty["path"]) / "shared.txt").read_text() == "base\nnot committed\n"

        clean = spaces[3]  # nothing in it: the worktree and its branch are gone
        assert clean["kept"] is False and clean["changedFiles"] == [], clean
        assert_gone(repo, clean)
        assert sorted(worktrees_of(repo)) == sorted(s["path"] for s in spaces[:3])

        # The shared checkout itself was never touched.
        assert (repo / "shared.txt").read_text() == "base\n"
        assert git(repo, "status", "--porcelain") == ""
        await server.finish()
    remove_kept(repo)
    assert_no_worktree_left(repo, state)


async def test_new_untracked_files_count_as_uncommitted_changes_and_keep_the_worktree(
    tmp_path: Path,
) -> None:
    repo = make_repository(tmp_path / "repo")
    state = tmp_path / "state"
    writes = "printf 'a\\nb\\n' > new.txt && mkdir -p deep && echo x > deep/also.txt && pwd"
    async with running_server(*state_args(state)) as server:
        run = await result_of(
            server,
            "spawn",
            isolated(["sh", "-c", writes], cwd=str(repo / "sub"), mode="task"),
        )
        assert run["status"] == "completed", run
        space = run["children"][0]["workspace"]
        # It ran in `sub/` of its worktree, as it was asked to run in `sub/` of the repository.
        assert run["output"]["text"].strip() == os.path.join(space["path"], "sub")
        assert space["changedFiles"] == ["sub/deep/also.txt", "sub/new.txt"], space
        assert space["diffStat"] == {"files": 2, "insertions": 3, "deletions": 0}, space
        assert (space["uncommitted"], space["commits"], space["kept"]) == (2, 0, True), space
        # Measuring staged nothing of the child's own: the files are still untracked.
        assert git(Path(space["path"]), "status", "--porcelain") == "?? sub/deep/\n?? sub/new.txt\n"
        status = await result_of(server, "status", {"runId": run["runId"]})
        assert status["children"][0]["workspace"] == space  # as stored
        await server.finish()
    remove_kept(repo)
    assert_no_worktree_left(repo, state)


async def assert_refused(server: ServerProcess, launch: dict[str, Any], code: str) -> None:
    """`preflight` and `spawn` both refuse the launch for this one diagnostic, at `isolation`."""
    result = await result_of(server, "preflight", launch)
    assert result["accepted"] is False, result
    assert error_codes(result) == [code], result
    assert result["diagnostics"][0]["path"] == "isolation"
    error = await error_of(server, "spawn", launch)
    assert error["code"] == LAUNCH_REJECTED, error
    assert rejection_codes(error) == [code]


async def test_isolation_outside_a_git_repository_is_refused_at_preflight_and_spawn(
    tmp_path: Path,
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    state = tmp_path / "state"
    async with running_server(*state_args(state)) as server:
        launch = isolated(["true"], cwd=str(plain))
        await assert_refused(server, launch, "not-a-git-repository")

        item = {"tasks": [{"command": ["true"]}, isolated(["true"])], "cwd": str(plain)}
        error = await error_of(server, "spawn", item)
        assert [(d["code"], d["path"]) for d in error["data"]["diagnostics"]] == [
            ("not-a-git-repository", "tasks[1].isolation")
        ]
        wrong = await reply_to(server, "preflight", {"command": ["true"], "isolation": "chroot"})
        assert error_codes(wrong["result"]) == ["invalid-isolation"]
        assert (await result_of(server, "status", {}))["runs"] == []  # nothing ran
        await server.finish()
    assert not (state / "worktrees").exists()


async def test_the_plan_and_receipts_show_isolation_only_when_asked(tmp_path: Path) -> None:
    repo = make_repository(tmp_path / "repo")
    async with running_server(*state_args(tmp_path / "state")) as server:
        shared = await result_of(server, "preflight", {"command": ["true"], "cwd": str(repo)})
        alone = await result_of(server, "preflight", isolated(["true"], cwd=str(repo)))
        assert "isolation" not in shared["plan"]["children"][0]
        assert "isolation" not in shared["receipts"]["access"]["children"][0]
        assert alone["plan"]["children"][0]["isolation"] == "worktree"
        assert alone["receipts"]["access"]["children"][0]["isolation"] == "worktree"
        assert alone["fingerprint"] != shared["fingerprint"]
        await server.finish()


# First attempt: writes note.txt and fails. A later one finds it, adds a line, says where.
NOTE_THEN_FAIL: Final = [
    "sh",
    "-c",
    "if [ -f note.txt ]; then echo again >> note.txt; pwd; else echo first > note.txt; exit 3; fi",
]


async def approve_resume(server: Any, run_id: str) -> str:
    approval = await result_of(server, "preflight", {"resume": {"runId": run_id, "message": "go"}})
    assert approval["accepted"] is True, approval
    token: str = approval["token"]
    return token


async def test_a_resumed_isolated_child_runs_again_in_its_own_worktree(tmp_path: Path) -> None:
    repo = make_repository(tmp_path / "repo")
    state = tmp_path / "state"
    async with running_server(*state_args(state)) as server:
        run = await result_of(server, "spawn", isolated(NOTE_THEN_FAIL, cwd=str(repo), mode="task"))
        assert run["status"] == "failed", run
        first = run["children"][0]["workspace"]
        assert (first["uncommitted"], first["changedFiles"], first["kept"]) == (
            1,
            ["note.txt"],
            True,
        )

        token = await approve_resume(server, run["runId"])
        resumed = await result_of(server, "resume", {"token": token, "mode": "task"})
        child = resumed["children"][0]
        assert (resumed["status"], child["attempt"]) == ("completed", 2), resumed
        assert child["output"]["text"].strip() == first["path"]  # the same worktree
        again = child["workspace"]
        assert {k: again[k] for k in ("path", "branch", "baseCommit")} == {
            k: first[k] for k in ("path", "branch", "baseCommit")
        }
        assert again["diffStat"] == {"files": 1, "insertions": 2, "deletions": 0}, again
        assert (Path(first["path"]) / "note.txt").read_text() == "first\nagain\n"
        assert not (repo / "note.txt").exists()
        await server.finish()
    remove_kept(repo)
    assert_no_worktree_left(repo, state)


async def test_a_child_whose_worktree_is_gone_is_not_resumed(tmp_path: Path) -> None:
    repo = make_repository(tmp_path / "repo")
    state = tmp_path / "state"
    async with running_server(*state_args(state)) as server:
        kept = await result_of(
            server, "spawn", isolated(NOTE_THEN_FAIL, cwd=str(repo), mode="task")
        )
        token = await approve_resume(server, kept["runId"])  # approved while it is there
        git(repo, "worktree", "remove", "--force", kept["children"][0]["workspace"]["path"])
        assert await resume_refusal(server, kept["runId"]) == "workspace-gone"
        error = await error_of(server, "resume", {"token": token, "mode": "task"})
        assert error["code"] == -32004, error
        assert (error["data"]["reason"], error["data"]["code"]) == (
            "not-resumable",
            "workspace-gone",
        )
        status = await result_of(server, "status", {"runId": kept["runId"]})
        assert status["children"][0]["attempt"] == 1  # nothing was started

        # A clean child's worktree was removed when it ended: nothing to resume in either.
        clean = await result_of(
            server, "spawn", isolated(["sh", "-c", "exit 3"], cwd=str(repo), mode="task")
        )
        assert clean["children"][0]["workspace"]["kept"] is False, clean
        assert await resume_refusal(server, clean["runId"]) == "workspace-gone"
        await server.finish()
    assert_no_worktree_left(repo, state)


async def resume_refusal(server: Any, run_id: str) -> str:
    """The one error code of a `preflight {resume}` that is refused (no token)."""
    reply = await reply_to(server, "preflight", {"resume": {"runId": run_id, "message": "go"}})
    assert reply["result"]["accepted"] is False and "token" not in reply["result"], reply
    codes = error_codes(reply["result"])
    assert len(codes) == 1, reply
    return codes[0]


async def subcommand(state: Path, *args: str, name: str = "worktrees") -> tuple[int, str, str]:
    """`subagent-host NAME ARGS` on the state directory: its status, stdout, stderr."""
    process = await asyncio.create_subprocess_exec(
        server_executable(),
        name,
        *args,
        "--state-dir",
        str(state),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), EXIT_TIMEOUT_S)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def test_a_child_index_below_0_is_refused_in_one_line_naming_the_option(
    tmp_path: Path,
) -> None:
    status, out, err = await subcommand(tmp_path / "state", "remove", "abcdefgh", "--index", "-1")
    assert (status, out) == (2, "")
    assert len(err.splitlines()) == 1 and "--index" in err and "out of range" in err


async def test_kept_worktrees_are_listed_and_removed_by_the_worktrees_subcommand(
    tmp_path: Path,
) -> None:
    repo = make_repository(tmp_path / "repo")
    state = tmp_path / "state"
    async with running_server(*state_args(state)) as server:
        run = await isolated_tasks(
            server,
            repo,
            ["sh", "-c", COMMIT_LINE, "sh", "committed"],
            ["sh", "-c", "echo changed >> shared.txt"],
        )
        await server.finish()
    run_id = run["runId"]
    committed, changed = (child["workspace"] for child in run["children"])

    status, out, _ = await subcommand(state)
    assert status == 0
    lines = out.splitlines()
    assert len(lines) == 2, out
    assert lines[0].startswith(f"{run_id[:8]}-0  {committed['branch']}  1 commit, 0 uncommitted")
    assert lines[0].endswith(committed["path"])
    assert lines[1].startswith(f"{run_id[:8]}-1  {changed['branch']}  0 commits, 1 uncommitted")

    status, shown, _ = await subcommand(state, run_id, name="show")
    assert status == 0
    assert (
        f"child 0 worktree  {committed['branch']}  1 commit, 0 uncommitted, 1 file +1 -0" in shown
    )

    status, _, err = await subcommand(state, "remove", "nosuchrun")
    assert status == 1 and "no worktree of run 'nosuchrun'" in err, err

    status, out, _ = await subcommand(state, "remove", run_id[:8], "--index", "1")
    assert (status, out) == (0, f"removed {changed['path']} and its branch {changed['branch']}\n")
    assert_gone(repo, changed)

    status, out, _ = await subcommand(state, "remove", run_id)
    assert status == 0
    assert out.startswith(f"removed {committed['path']}; kept its branch {committed['branch']}")
    # The branch keeps the child's commit; the worktree is gone.
    assert git(repo, "show", f"{committed['branch']}:shared.txt") == "base\ncommitted\n"
    assert (await subcommand(state))[1] == f"no worktrees in {state / 'worktrees'}\n"
    assert_no_worktree_left(repo, state)


# Three isolated children: one changes a file, one commits, one changes a file the
# test then restores (a worktree that holds no work any more).
CHANGES: Final = ["sh", "-c", "echo changed >> shared.txt"]
COMMITS: Final = ["sh", "-c", COMMIT_LINE, "sh", "committed"]


def restore(space: dict[str, Any]) -> None:
    """Undo what a child changed in its worktree: it holds nothing any more."""
    git(Path(space["path"]), "checkout", "--", "shared.txt")


async def assert_work_kept_and_orphaned(
    repo: Path, state: Path, run_id: str, spaces: list[dict[str, Any]]
) -> None:
    """The history deleted the run: its worktrees holding work are left, listed orphaned;
    the one holding nothing is gone; `worktrees remove` still deletes them."""
    changed, committed, emptied = spaces
    assert_gone(repo, emptied)
    assert (Path(changed["path"]) / "shared.txt").read_text() == "base\nchanged\n"
    assert git(repo, "show", f"{committed['branch']}:shared.txt") == "base\ncommitted\n"
    assert sorted(worktrees_of(repo)) == sorted([changed["path"], committed["path"]])
    status, out, _ = await subcommand(state)
    assert status == 0
    lines = out.splitlines()
    assert len(lines) == 2, out
    for line in lines:
        assert line.startswith(f"{run_id[:8]}-") and "  orphaned (its run is no longer" in line
    status, _, err = await subcommand(state, "remove", run_id)
    assert status == 0, err
    assert_no_worktree_left(repo, state)


async def test_the_history_deletes_a_run_but_never_the_work_in_its_worktrees(
    tmp_path: Path,
) -> None:
    repo = make_repository(tmp_path / "repo")
    state = tmp_path / "state"
    async with running_server(*state_args(state, "s1", "--history-limit", "1")) as server:
        first = await isolated_tasks(server, repo, CHANGES, COMMITS, CHANGES)
        spaces = [child["workspace"] for child in first["children"]]
        assert all(space["kept"] for space in spaces)
        restore(spaces[2])
        await result_of(server, "spawn", {"command": ["true"], "mode": "task"})  # prunes first
        await error_of(server, "status", {"runId": first["runId"]})
        await server.finish()  # the server ends once the removals it started are done
    await assert_work_kept_and_orphaned(repo, state, first["runId"], spaces)


async def test_a_starting_server_deleting_idle_sessions_never_deletes_the_work_in_worktrees(
    tmp_path: Path,
) -> None:
    repo = make_repository(tmp_path / "repo")
    state = tmp_path / "state"
    async with running_server(*state_args(state, "s1")) as server:
        run = await isolated_tasks(server, repo, CHANGES, COMMITS, CHANGES)
        spaces = [child["workspace"] for child in run["children"]]
        assert all(space["kept"] for space in spaces)
        restore(spaces[2])
        await server.finish()
    # The session has been idle for longer than it is kept (protocol.md §13).
    long_ago = (datetime.now(UTC) - SESSION_RETENTION - timedelta(days=1)).isoformat()
    db = sqlite3.connect(state / DB_NAME, isolation_level=None)
    try:
        db.execute("UPDATE runs SET created_at = ?, ended_at = ?", (long_ago, long_ago))
    finally:
        db.close()
    async with running_server(*state_args(state, "s2")) as server:
        await result_of(server, "ping", {})
        await server.finish()  # the server ends once the removals it started are done
    await assert_work_kept_and_orphaned(repo, state, run["runId"], spaces)


async def test_isolated_workflow_items_each_get_a_worktree(tmp_path: Path) -> None:
    repo = make_repository(tmp_path / "repo")
    state = tmp_path / "state"
    writes = ["sh", "-c", "echo {index} > item.txt"]
    async with running_server(*state_args(state)) as server:
        run = await result_of(
            server,
            "spawn",
            {
                "workflow": {
                    "name": "fan-out",
                    "task": "t",
                    "chain": [
                        {"forEach": '["a", "b"]', "item": isolated(writes)},
                        {"command": ["true"]},  # not isolated: no workspace
                    ],
                },
                "cwd": str(repo),
                "mode": "task",
            },
        )
        assert run["status"] == "completed", run
        isolated_ones = [child["workspace"] for child in run["children"][:2]]
        assert [s["branch"] for s in isolated_ones] == [
            f"subagent/{run['runId'][:8]}-0",
            f"subagent/{run['runId'][:8]}-1",
        ]
        for index, space in enumerate(isolated_ones):
            assert space["changedFiles"] == ["item.txt"] and space["kept"] is True
            assert (Path(space["path"]) / "item.txt").read_text() == f"{index}\n"
        assert "workspace" not in run["children"][2]
        await server.finish()
    remove_kept(repo)
    assert_no_worktree_left(repo, state)


async def test_an_isolated_child_whose_worktree_cannot_be_made_fails_without_starting(
    tmp_path: Path,
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")  # a repository, but no commit to start a worktree from
    state = tmp_path / "state"
    async with running_server(*state_args(state)) as server:
        run = await result_of(server, "spawn", isolated(["true"], cwd=str(empty), mode="task"))
        child = run["children"][0]
        assert (run["status"], child["status"]) == ("failed", "failed"), run
        assert child["error"]["code"] == "workspace-failed", child
        assert "has no commit yet" in child["error"]["message"], child
        assert "pid" not in child and "workspace" not in child, child
        await server.finish()
    assert_no_worktree_left(empty, state)


def repository_with_link_out(path: Path, outside: Path) -> Path:
    """A repository whose HEAD holds `lnk`, a symbolic link to `outside` (absolute)."""
    make_repository(path)
    (path / "lnk").symlink_to(outside)
    git(path, "add", "lnk")
    git(path, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "l")
    return path


async def test_a_cwd_that_leads_out_of_its_repository_is_refused_at_preflight_and_spawn(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    repo = repository_with_link_out(tmp_path / "repo", outside)
    state = tmp_path / "state"
    writes = ["sh", "-c", "echo written > written.txt"]
    async with running_server(*state_args(state)) as server:
        launch = isolated(writes, cwd=str(repo / "lnk" / "sub"), mode="task")
        await assert_refused(server, launch, "cwd-outside-worktree")
        assert (await result_of(server, "status", {}))["runs"] == []  # nothing ran
        await server.finish()
    assert sorted(os.listdir(outside)) == ["sub"] and os.listdir(outside / "sub") == []
    assert not (state / "worktrees").exists()
    assert_no_worktree_left(repo, state)


async def test_an_isolated_child_whose_cwd_in_its_worktree_leads_out_of_it_never_starts(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    repo = repository_with_link_out(tmp_path / "repo", outside)
    # The working tree no longer has the link (a directory in its place): the repository's
    # own `lnk/sub` is inside it, but HEAD's, which the worktree holds, leads out.
    (repo / "lnk").unlink()
    (repo / "lnk" / "sub").mkdir(parents=True)
    state = tmp_path / "state"
    writes = ["sh", "-c", "echo written > written.txt"]
    async with running_server(*state_args(state)) as server:
        launch = isolated(writes, cwd=str(repo / "lnk" / "sub"), mode="task")
        assert (await result_of(server, "preflight", launch))["accepted"] is True
        run = await result_of(server, "spawn", launch)
        child = run["children"][0]
        assert (run["status"], child["status"]) == ("failed", "failed"), run
        assert child["error"]["code"] == "cwd-outside-worktree", child
        assert "pid" not in child and "workspace" not in child, child
        await server.finish()
    assert os.listdir(outside) == []  # nothing made, nothing written where the link leads
    assert not (repo / "lnk" / "sub" / "written.txt").exists()
    assert_no_worktree_left(repo, state)
    assert branches_of(repo) == ["main"]
