"""`subagent-host watch`, driven through a real terminal (tmux) while a live server records
runs: rows appear as runs are recorded, Enter shows a run's output, `s` stops a run,
`q` quits and gives the terminal back as it was."""

from __future__ import annotations

import asyncio
import re
import shlex
import sys
from pathlib import Path

import psutil
import pytest

from subagent_host.client import SpawnItem
from subagent_host.terminal.views import short_id
from subagent_host.values.events import ChildEvent
from tests.client.conftest import started
from tests.terminal.tmux import Terminal, needs_tmux, terminal
from tests.waits import still_running

pytestmark = [pytest.mark.e2e, needs_tmux]


def watch_command(state_dir: Path, *args: str, env: tuple[str, ...] = ()) -> list[str]:
    """watch in a shell that, once it ended, shows its status and the terminal's settings,
    then waits for a line (so the pane stays to be read). The shell outlives a Ctrl-C
    (its trap is not inherited: watch gets SIGINT as it would from a person's shell)."""
    watch = shlex.join(
        [
            *(("env", *env) if env else ()),
            sys.executable,
            "-m",
            "subagent_host",
            "watch",
            "--state-dir",
            str(state_dir),
            *args,
        ]
    )
    return [
        "sh",
        "-c",
        f'trap true INT; {watch}; echo "watch exited $?";'
        " stty -a | tr ' ;' '\\n\\n' | grep -x -e icanon -e -icanon -e echo -e -echo"
        " | tr '\\n' ' '; echo; read line",
    ]


async def quits_cleanly(term: Terminal) -> None:
    """`q` ends watch with status 0 and the terminal is back in line mode, echoing."""
    await term.keys("q")
    await term.shows(r"^watch exited 0$")
    settings = (await term.shows(r"^(.*icanon.*)$")).group(1).split()
    assert sorted(settings) == ["echo", "icanon"], settings


async def test_rows_appear_for_runs_two_live_servers_record_and_for_one_started_after_watch(
    tmp_path: Path,
) -> None:
    async with (
        started(tmp_path, "ndjson", "--session", "alpha") as (host, _seen),
        started(tmp_path, "lsp", "--session", "beta") as (other, _other_seen),
    ):
        done = await host.spawn(command=("echo", "hello"), mode="task", label="greeting")
        failed = await other.spawn(command=("sh", "-c", "echo why >&2; exit 3"), mode="task")
        async with terminal(watch_command(tmp_path / "state")) as term:
            await term.shows(rf"{short_id(done.run_id)}\s+completed\s+\S+\s+greeting\s+hello")
            await term.shows(rf"{short_id(failed.run_id)}\s+failed.*exited with status 3: why")
            later = await host.spawn(
                tasks=(
                    SpawnItem(command=("sh", "-c", "echo step one; sleep 30"), label="talker"),
                    SpawnItem(command=("sleep", "30")),
                ),
                stream=True,
            )
            await term.shows(rf"› {short_id(later.run_id)}\s+running\s+\S+\s+2 tasks\s+2 running")
            await term.shows(r"├ 0\s+running\s+\S+\s+talker\s+step one")
            await term.shows(r"└ 1\s+running\s+\S+\s+sleep 30")
            await term.shows(r"3 runs, 1 running")
            await host.stop(later.run_id, grace_ms=0)
            await term.shows(rf"{short_id(later.run_id)}\s+cancelled")
            await quits_cleanly(term)


async def test_watch_started_before_any_server_shows_runs_once_one_is_recorded(
    tmp_path: Path,
) -> None:
    async with terminal(watch_command(tmp_path / "state")) as term:
        await term.shows(r"no runs recorded in .*state")
        async with started(tmp_path) as (host, _seen):
            run = await host.spawn(command=("echo", "first"), mode="task")
            await term.shows(rf"› {short_id(run.run_id)}\s+completed.*first")
        await quits_cleanly(term)


async def test_enter_shows_the_selected_runs_output_tail_and_escape_goes_back(
    tmp_path: Path,
) -> None:
    async with started(tmp_path) as (host, _seen):
        script = "for i in $(seq 1 60); do echo line $i; done; echo oops >&2; exit 2"
        first = await host.spawn(command=("sh", "-c", script), mode="task")
        second = await host.spawn(command=("echo", "newest"), mode="task")
        async with terminal(watch_command(tmp_path / "state"), height=20) as term:
            await term.shows(rf"› {short_id(second.run_id)}")
            await term.keys("Down")
            await term.shows(rf"› {short_id(first.run_id)}")
            await term.keys("Enter")
            screen = (await term.shows(r"^stderr: oops$")).string
            assert f"run {short_id(first.run_id)}  failed" in screen
            assert "line 60" in screen and "error: command exited with status 2" in screen
            assert "line 1\n" not in screen  # the tail: the first lines do not fit
            await term.keys("Escape")
            await term.shows(rf"› {short_id(first.run_id)}\s+failed")
            await term.keys("Up", "Enter")
            await term.shows(r"^newest$")
            await term.keys("Enter")
            await term.shows(r"↑/↓ select")
            await quits_cleanly(term)


@pytest.mark.parametrize("no_color", [False, True])
async def test_session_shows_only_that_sessions_runs_and_no_color_turns_colours_off(
    tmp_path: Path, no_color: bool
) -> None:
    async with started(tmp_path, "ndjson", "--session", "alpha") as (host, _seen):
        alpha = await host.spawn(command=("echo", "from alpha"), mode="task")
    async with started(tmp_path, "ndjson", "--session", "beta") as (host, _seen):
        beta = await host.spawn(command=("echo", "from beta"), mode="task")
    env = ("NO_COLOR=1",) if no_color else ()
    async with terminal(watch_command(tmp_path / "state", "--session", "beta", env=env)) as term:
        screen = (await term.shows(rf"{short_id(beta.run_id)}\s+completed")).string
        assert "session beta  1 run, 0 running" in screen
        assert short_id(alpha.run_id) not in screen
        coloured = await term.tmux("capture-pane", "-p", "-e", "-t", "watch")
        colours = re.findall(r"\x1b\[[0-9;]*(?:3[0-7]|38;[25];[0-9;]+)m", coloured)
        assert (colours == []) is no_color, colours[:3]
        await quits_cleanly(term)


@pytest.mark.parametrize(("how", "status"), [("ctrl-c", 130), ("sigterm", 143)])
async def test_ctrl_c_and_sigterm_end_watch_and_give_the_terminal_back(
    tmp_path: Path, how: str, status: int
) -> None:
    async with started(tmp_path) as (host, _seen):
        run = await host.spawn(command=("true",), mode="task")
        async with terminal(watch_command(tmp_path / "state")) as term:
            await term.shows(short_id(run.run_id))
            if how == "ctrl-c":
                await term.keys("C-c")
            else:
                pane = psutil.Process(await term.pane_pid())
                (watch,) = [p for p in pane.children() if "watch" in p.cmdline()]
                watch.terminate()
            await term.shows(rf"^watch exited {status}$")
            settings = (await term.shows(r"^(.*icanon.*)$")).group(1).split()
            assert sorted(settings) == ["echo", "icanon"], settings


async def test_s_asks_then_y_stops_the_selected_running_run_and_nothing_of_its_tree_survives(
    tmp_path: Path,
) -> None:
    async with started(tmp_path) as (host, _seen):
        run = await host.spawn(command=("sh", "-c", "sleep 300 & sleep 300"))
        async with asyncio.timeout(10):
            async for event in host.events(run.run_id):
                if isinstance(event.event, ChildEvent) and event.event.status == "running":
                    break
        pid = (await host.status(run.run_id)).children[0].pid
        assert pid is not None
        tree = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
        async with terminal(watch_command(tmp_path / "state")) as term:
            await term.shows(rf"› {short_id(run.run_id)}\s+running")
            # Asked first: any key but y keeps it running, q included.
            await term.keys("s")
            await term.shows(rf"stop run {short_id(run.run_id)} and its 1 child\? y/n")
            await term.keys("q")
            await term.shows(rf"run {short_id(run.run_id)} not stopped")
            assert (await host.status(run.run_id)).status == "running"
            assert all(process.is_running() for process in tree)
            await term.keys("s")
            await term.shows(rf"stop run {short_id(run.run_id)} and its 1 child\? y/n")
            await term.keys("y")
            await term.shows(rf"run {short_id(run.run_id)} cancelled|cannot stop")
            await term.shows(rf"{short_id(run.run_id)}\s+cancelled", timeout_s=5)
            assert await still_running(tree, timeout_s=5) == []
            assert (await host.status(run.run_id)).status == "cancelled"
            await quits_cleanly(term)


async def test_without_a_terminal_watch_says_so_in_one_line_and_exits_2(tmp_path: Path) -> None:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "subagent_host",
        "watch",
        "--state-dir",
        str(tmp_path / "state"),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    async with asyncio.timeout(30):
        out, err = await process.communicate()
    assert process.returncode == 2
    assert out == b""
    assert err.decode().splitlines() == [
        "subagent-host watch: needs a terminal on standard input and output"
        " ('subagent-host runs' lists runs without one)"
    ]
