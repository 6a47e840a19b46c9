"""A state directory others can write to, a planted symlink, a snapshot aimed at the
server's own files, a path that cannot be examined (protocol.md §7, §13, §17): each is
refused in one line or one diagnostic, and nothing the server did not create is changed."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final

import attrs
import pytest

from subagent_host.store.schema import DB_NAME
from tests.e2e.harness import error_of, result_of, running_server, server_executable

NOBODY: Final = 65534
LAUNCH_REJECTED: Final = -32003
PING: Final = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'

needs_root = pytest.mark.skipif(os.getuid() != 0, reason="giving a file to another user needs root")


@attrs.frozen
class Ended:
    """How a server started once ended."""

    returncode: int
    stdout: str
    stderr: str


async def serve_once(*args: str) -> Ended:
    """One server start with a ping on stdin, to its end (proven to leave nothing)."""
    async with running_server(*args) as server:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            await server.send(json.loads(PING))
        code, messages = await server.finish()
    lines = "".join(json.dumps(message, separators=(",", ":")) + "\n" for message in messages)
    return Ended(code, lines, server.stderr_text)


def assert_refused_in_one_line(done: Ended | subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("subagent-host"), done.stderr
    assert "Traceback" not in done.stderr
    for word in words:
        assert word in done.stderr, done.stderr


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


# --- a shared state directory ---------------------------------------------------------------


@needs_root
async def test_a_symlink_another_user_planted_in_a_sticky_shared_state_dir_is_refused(
    tmp_path: Path,
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)  # like /tmp: ours (root's), everybody may add entries
    elsewhere = tmp_path / "elsewhere.sqlite3"
    planted = shared / DB_NAME
    planted.symlink_to(elsewhere)
    os.lchown(planted, NOBODY, NOBODY)

    done = await serve_once("--state-dir", str(shared))

    assert_refused_in_one_line(done, "not safe", f"{planted} is a symlink")
    assert not elsewhere.exists()
    assert mode(shared) == 0o1777  # never chmod'ed
    assert sorted(os.listdir(shared)) == [DB_NAME]


@needs_root
async def test_runs_does_not_read_a_history_through_a_planted_symlink(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    assert (await serve_once("--state-dir", str(mine))).returncode == 0  # a real history
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    planted = shared / DB_NAME
    planted.symlink_to(mine / DB_NAME)
    os.lchown(planted, NOBODY, NOBODY)
    before = sorted(os.listdir(mine))

    runs = await asyncio.create_subprocess_exec(
        server_executable(),
        "runs",
        "--state-dir",
        str(shared),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(runs.communicate(), 60)
    done = Ended(await runs.wait(), out.decode(), err.decode())

    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == f"subagent-host runs: cannot read {planted}: {planted} is a symlink\n"
    assert sorted(os.listdir(mine)) == before and sorted(os.listdir(shared)) == [DB_NAME]


@needs_root
async def test_a_state_dir_of_another_user_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    theirs.chmod(0o1777)
    os.chown(theirs, NOBODY, NOBODY)

    done = await serve_once("--state-dir", str(theirs))

    assert_refused_in_one_line(done, f"{theirs} belongs to uid {NOBODY}")
    assert (mode(theirs), os.listdir(theirs)) == (0o1777, [])


@needs_root
@pytest.mark.parametrize("name", ["pi-sessions", "worktrees"])
async def test_a_directory_under_the_state_dir_of_another_user_is_refused(
    tmp_path: Path, name: str
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    planted = state / name
    planted.mkdir()
    planted.chmod(0o777)
    os.chown(planted, NOBODY, NOBODY)

    done = await serve_once("--state-dir", str(state))

    assert_refused_in_one_line(done, f"{planted} belongs to uid {NOBODY}")
    assert mode(planted) == 0o777 and sorted(os.listdir(state)) == [name]


async def test_a_group_writable_state_dir_of_ours_is_refused_never_chmoded(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o775)

    done = await serve_once("--state-dir", str(state))

    assert_refused_in_one_line(done, f"{state} is writable by group or others (mode 775)")
    assert mode(state) == 0o775


async def test_a_sticky_state_dir_of_ours_and_one_readable_by_others_are_used_as_they_are(
    tmp_path: Path,
) -> None:
    for name, bits in (("sticky", 0o1777), ("readable", 0o755)):
        state = tmp_path / name
        state.mkdir()
        state.chmod(bits)

        done = await serve_once("--state-dir", str(state))

        assert done.returncode == 0, done.stderr
        assert '"persistence":"sqlite"' in done.stdout
        assert mode(state) == bits  # what the server did not create, it never chmods
        assert mode(state / DB_NAME) == 0o600
        assert mode(state / "pi-sessions") == 0o700


@needs_root
async def test_a_log_file_symlink_another_user_planted_is_not_followed(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    # Open to all and not sticky: in a sticky one the kernel itself may refuse to follow
    # another user's link (fs.protected_symlinks); here only the server can.
    shared.chmod(0o777)
    target = tmp_path / "target"
    planted = shared / "host.log"
    planted.symlink_to(target)
    os.lchown(planted, NOBODY, NOBODY)

    done = await serve_once("--state-dir", str(tmp_path / "state"), "--log-file", str(planted))

    assert_refused_in_one_line(done, "cannot open log file", "symlink of another user")
    assert not target.exists()


async def test_a_log_file_symlink_of_our_own_is_followed(tmp_path: Path) -> None:
    target = tmp_path / "target.log"
    link = tmp_path / "host.log"
    link.symlink_to(target)

    done = await serve_once(
        "--state-dir", str(tmp_path / "state"), "--log-file", str(link), "--log-level", "info"
    )

    assert done.returncode == 0, done.stderr
    assert link.is_symlink() and "server stopped" in target.read_text()


def test_the_doctor_says_why_a_state_dir_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o777)
    from subagent_host.terminal.diagnosis import check_state_dir

    found = check_state_dir(state)

    assert found.passed is False
    assert found.detail == (
        f"a server refuses it: {state} is writable by group or others (mode 777) and not sticky"
    )


# --- a snapshot aimed at the server's own files ---------------------------------------------


async def test_a_snapshot_path_in_the_state_dir_or_at_the_log_file_is_refused(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    log = tmp_path / "host.log"
    alias = tmp_path / "alias"
    alias.symlink_to(state)
    link_to_db = tmp_path / "link.json"
    link_to_db.symlink_to(state / DB_NAME)
    aimed = {
        "the database": state / DB_NAME,
        "a new file in it": state / "snapshot.json",
        "the database through a linked directory": alias / DB_NAME,
        "a symlink to the database": link_to_db,
        "the log file": log,
    }
    args = ("--state-dir", str(state), "--session", "s1", "--log-file", str(log))
    async with running_server(*args) as server:
        for what, path in aimed.items():
            workflow = {
                "name": "w",
                "task": "t",
                "snapshotPath": str(path),
                "chain": [{"command": ["true"]}],
            }
            error = await error_of(server, "spawn", {"workflow": workflow, "mode": "task"})
            assert error["code"] == LAUNCH_REJECTED, (what, error)
            (problem,) = error["data"]["diagnostics"]
            assert (problem["code"], problem["path"]) == (
                "invalid-snapshot-path",
                "workflow.snapshotPath",
            ), what
            assert "state directory" in problem["message"] or "log file" in problem["message"]
            checked = await result_of(server, "preflight", {"workflow": workflow})
            assert checked["accepted"] is False, (what, checked)
        listed = await result_of(server, "status", {})
        assert listed["runs"] == []
        assert (await server.finish())[0] == 0
    assert (state / DB_NAME).read_bytes().startswith(b"SQLite format 3\0")
    assert not (state / "snapshot.json").exists()


# --- paths that cannot be examined ----------------------------------------------------------


def _as_nobody() -> list[str] | None:
    """The prefix that runs a command as `nobody`, when this test may and /proc/1/cwd
    then cannot be read (its readlink denied), else None."""
    setpriv = shutil.which("setpriv")
    if os.getuid() != 0 or setpriv is None:
        return None
    prefix = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    probe = subprocess.run(  # noqa: TID251 - a one-shot probe, no event loop here
        [*prefix, "readlink", "/proc/1/cwd"], capture_output=True, timeout=30
    )
    return prefix if probe.returncode != 0 else None


AS_NOBODY: Final = _as_nobody()
needs_unreadable = pytest.mark.skipif(
    AS_NOBODY is None,
    reason="needs root, setpriv and a /proc/1/cwd that nobody may not read",
)


@pytest.fixture
def nobody_home() -> Iterator[tuple[Path, dict[str, str]]]:
    """A directory of `nobody`'s own (outside pytest's, which only root may enter) and an
    environment that points there: its state directory is `state` in it."""
    with tempfile.TemporaryDirectory(prefix="subagent-host-nobody-") as directory:
        home = Path(directory)
        os.chown(home, NOBODY, NOBODY)
        env = {**os.environ, "HOME": str(home), "XDG_CONFIG_HOME": str(home / "config")}
        env["XDG_STATE_HOME"] = str(home / "xdg-state")
        yield home, env


@needs_unreadable
@pytest.mark.parametrize(
    "argv",
    [
        ["--state-dir", "/proc/1/cwd/state"],
        ["--config", "/proc/1/cwd/subagents.json"],
        ["--log-file", "/proc/1/cwd/host.log"],
        ["--trust-project", "/proc/1/cwd"],
        ["run", "--cwd", "/proc/1/cwd", "--", "true"],
        ["runs", "--state-dir", "/proc/1/cwd/state"],
        ["doctor", "--state-dir", "/proc/1/cwd/state"],
    ],
)
def test_an_option_naming_a_path_that_cannot_be_examined_is_one_line_and_status_2(
    nobody_home: tuple[Path, dict[str, str]], argv: Sequence[str]
) -> None:
    assert AS_NOBODY is not None
    home, env = nobody_home
    done = subprocess.run(  # noqa: TID251 - a one-shot command, no event loop here
        [*AS_NOBODY, server_executable(), *argv],
        input="",
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=home,
    )

    assert_refused_in_one_line(done, "/proc/1/cwd", "cannot be examined")


@needs_unreadable
async def test_a_cwd_or_snapshot_path_that_cannot_be_examined_is_a_rejected_launch(
    nobody_home: tuple[Path, dict[str, str]],
) -> None:
    assert AS_NOBODY is not None
    home, env = nobody_home
    workflow = {
        "name": "w",
        "task": "t",
        "snapshotPath": "/proc/1/cwd/snapshot.json",
        "chain": [{"command": ["true"]}],
    }
    cases = {
        "cwd": {"command": ["true"], "cwd": "/proc/1/cwd", "mode": "task"},
        "workflow.snapshotPath": {"workflow": workflow, "mode": "task"},
    }
    async with running_server(
        "--state-dir",
        str(home / "state"),
        program=(*AS_NOBODY, server_executable()),
        env=env,
        cwd=home,
    ) as server:
        for where, params in cases.items():
            error = await error_of(server, "spawn", params)
            assert error["code"] == LAUNCH_REJECTED, (where, error)
            found = [(d["code"], d["path"]) for d in error["data"]["diagnostics"]]
            code = "invalid-cwd" if where == "cwd" else "invalid-snapshot-path"
            assert found == [(code, where)], error
            assert "cannot be examined" in error["message"]
            checked = await result_of(server, "preflight", params)
            assert checked["accepted"] is False, checked
        assert (await server.finish())[0] == 0
    assert "internal error" not in server.stderr_text, server.stderr_text
    assert json.loads(json.dumps(error))  # the reply was a plain JSON-RPC error
