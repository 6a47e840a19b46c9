"""The shim (executors/shim.py) on this machine: nothing a shimmed child starts outlives it.

Each test starts real processes under a real shim and proves at its end, through the
run marker in the children's environment, that none of them is left.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import psutil
import pytest

from subagent_host.backends.cgroups import ticks_now
from subagent_host.executors.shimmed import ShimExit, ShimmedChild, start_shimmed
from tests.raycluster import later_than

FAKES = Path(__file__).parent.parent / "fakes"
EXIT_TIMEOUT_S = 20.0
MARKER = "SUBAGENT_HOST_SHIM_TEST"
BURN_HALF_A_SECOND = (
    "import time\nend = time.process_time() + 0.5\nwhile time.process_time() < end: pass"
)


def marked(marker: str) -> list[psutil.Process]:
    """Every process whose environment carries this test's marker."""
    found = []
    for process in psutil.process_iter():
        try:
            if process.environ().get(MARKER) == marker:
                found.append(process)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


@pytest.fixture
async def marker() -> AsyncIterator[str]:
    """A marker for this test's children; afterwards, none of them may be left."""
    value = uuid.uuid4().hex
    yield value
    left = await asyncio.to_thread(marked, value)
    assert [p for p in left if p.status() != psutil.STATUS_ZOMBIE] == []


def env_of(marker: str) -> dict[str, str]:
    return {"PATH": os.environ["PATH"], MARKER: marker}


async def start(marker: str, *argv: str, grace_s: float = 5.0) -> ShimmedChild:
    return await start_shimmed(argv, cwd=os.getcwd(), env=env_of(marker), grace_s=grace_s)


async def ended(child: ShimmedChild) -> ShimExit:
    """The child's exit, and the end of its pipes (no transport of the test outlives it)."""
    exit = await asyncio.wait_for(child.exit(), EXIT_TIMEOUT_S)
    await asyncio.wait_for(asyncio.gather(child.stdout.read(), child.stderr.read()), EXIT_TIMEOUT_S)
    return exit


async def outcome(child: ShimmedChild) -> tuple[int, str | None, int]:
    """How the child ended: its returncode, what stopped it, the leftovers ended."""
    exit = await ended(child)
    return exit.returncode, exit.stopped_by, exit.leftovers


async def tree_ready(child: ShimmedChild) -> None:
    line = await asyncio.wait_for(child.stdout.readline(), EXIT_TIMEOUT_S)
    assert line == b"ready\n", line


async def test_the_child_s_output_and_exit_status_come_back_over_the_pipes(marker: str) -> None:
    child = await start(marker, "sh", "-c", "echo out; echo err >&2; exit 3")
    out = await asyncio.wait_for(child.stdout.read(), EXIT_TIMEOUT_S)
    err = await asyncio.wait_for(child.stderr.read(), EXIT_TIMEOUT_S)
    assert (out, err) == (b"out\n", b"err\n")
    assert await outcome(child) == (3, None, 0)


async def test_the_child_gets_exactly_the_environment_and_stdin_it_was_given(
    marker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAY_ADDRESS", "not-for-children")
    child = await start_shimmed(
        ["sh", "-c", "env | sort; cat"],
        cwd="/",
        env=env_of(marker),
        grace_s=1.0,
        stdin=b"the prompt",
    )
    out = await asyncio.wait_for(child.stdout.read(), EXIT_TIMEOUT_S)
    assert await outcome(child) == (0, None, 0)
    *variables, prompt = out.decode().splitlines()
    names = {line.partition("=")[0] for line in variables}
    assert {"PATH", MARKER} <= names and "RAY_ADDRESS" not in names, names
    assert prompt == "the prompt"


async def test_the_shim_leads_its_own_session_and_is_not_the_caller_s_child(marker: str) -> None:
    child = await start(marker, "sh", "-c", "echo ready; exec sleep 60")
    await tree_ready(child)
    shim = psutil.Process(child.shim)
    assert shim.ppid() != os.getpid()
    assert os.getsid(child.shim) == child.shim
    assert psutil.Process(child.pid).ppid() == child.shim
    child.stop(1.0)
    assert (await outcome(child))[1] == "sigterm"


async def test_a_program_that_cannot_start_is_an_oserror_with_its_errno(marker: str) -> None:
    with pytest.raises(OSError) as raised:
        await start(marker, "/nonexistent/program")
    assert raised.value.errno == 2


async def test_a_stop_ends_a_tree_that_ignores_sigterm_with_sigkill_after_the_grace(
    marker: str,
) -> None:
    child = await start(
        marker, sys.executable, str(FAKES / "tree.py"), "5", "--ignore-term", grace_s=0.3
    )
    await tree_ready(child)
    assert len(await asyncio.to_thread(marked, marker)) == 5  # the shim has not the marker
    child.stop(0.3)
    assert await outcome(child) == (-signal.SIGKILL, "sigkill", 0)


async def test_the_lifeline_s_end_ends_every_descendant_even_one_in_its_own_session(
    marker: str,
) -> None:
    script = "setsid sleep 300 & echo ready; exec sleep 300"
    child = await start(marker, "sh", "-c", script, grace_s=1.0)
    await tree_ready(child)
    child.abandon()  # as the caller's death would
    assert await outcome(child) == (-signal.SIGTERM, "sigterm", 0)


async def test_a_daemon_left_by_a_child_that_exited_is_ended_and_counted(marker: str) -> None:
    script = "setsid sh -c 'trap \"\" TERM; exec sleep 300' </dev/null >/dev/null 2>&1 & exit 0"
    child = await start(marker, "sh", "-c", script, grace_s=0.3)
    assert await outcome(child) == (0, None, 1)


async def test_the_exit_counts_the_cpu_of_the_whole_tree_an_orphan_the_shim_reaped_included(
    marker: str,
) -> None:
    # The burner is orphaned at once (its subshell exits) and comes back to the shim, the
    # subreaper; `cat` holds the child until the burner closes the pipe by exiting.
    burn = f"{sys.executable} -c '{BURN_HALF_A_SECOND}'"
    child = await start(marker, "sh", "-c", f"({burn} &) | cat")
    exit = await ended(child)
    assert (exit.returncode, exit.leftovers) == (0, 0)
    assert exit.cpu_seconds >= 0.5, exit
    assert exit.processes >= 3, exit  # sh, cat and the burner at least


async def test_the_exit_counts_the_most_processes_and_the_memory_of_the_tree_at_once(
    marker: str,
) -> None:
    child = await start(marker, sys.executable, str(FAKES / "tree.py"), "5", grace_s=5.0)
    await tree_ready(child)
    tree = await asyncio.to_thread(marked, marker)
    # Forked copies of one interpreter: the tree's sum is well above its largest process.
    rss = sum(process.memory_info().rss for process in tree)
    child.stop(5.0)
    exit = await ended(child)
    assert (exit.stopped_by, exit.processes) == ("sigterm", 5)
    assert exit.peak_rss_bytes >= rss * 0.9, (exit, rss)


async def test_the_exit_counts_the_peak_memory_of_a_process_that_has_ended(marker: str) -> None:
    child = await start(marker, sys.executable, "-c", "data = b'x' * (64 << 20)")
    exit = await ended(child)
    assert (exit.returncode, exit.processes) == (0, 1)
    assert exit.peak_rss_bytes >= 64 << 20, exit


async def test_a_caller_killed_with_sigkill_leaves_nothing_of_the_tree(
    marker: str, tmp_path: Path
) -> None:
    caller = tmp_path / "caller.py"
    caller.write_text(
        "import asyncio, os, sys\n"
        "from subagent_host.executors.shimmed import start_shimmed\n"
        "async def main():\n"
        "    child = await start_shimmed(['sh', '-c', 'setsid sleep 300 & echo ready; "
        "exec sleep 300'], cwd='/', env={'PATH': os.environ['PATH'], "
        f"'{MARKER}': '{marker}'}}, grace_s=0.5)\n"
        "    print(await child.stdout.readline(), flush=True)\n"
        "    await asyncio.sleep(300)\n"
        "asyncio.run(main())\n"
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(caller), stdout=asyncio.subprocess.PIPE
    )
    assert process.stdout is not None
    line = await asyncio.wait_for(process.stdout.readline(), EXIT_TIMEOUT_S)
    assert b"ready" in line
    process.kill()  # by pid: the one process this test started
    await process.wait()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + EXIT_TIMEOUT_S
    while await asyncio.to_thread(marked, marker):
        assert loop.time() < deadline, "the shim did not end the tree"
        await asyncio.sleep(0.05)  # polling /proc: nothing of ours to await on


TALKER = str(FAKES / "talker.py")


async def said(child: ShimmedChild, prefix: bytes) -> bytes:
    """The next line of the child's stdout, which must start with `prefix`."""
    line = await asyncio.wait_for(child.stdout.readline(), EXIT_TIMEOUT_S)
    assert line.startswith(prefix), line
    return line


async def test_a_child_with_its_stdin_kept_open_is_talked_to_signalled_and_closed(
    marker: str,
) -> None:
    child = await start_shimmed(
        [sys.executable, TALKER], cwd="/", env=env_of(marker), grace_s=0.3, keep_stdin=True
    )
    old = int((await said(child, b"ready ")).split()[1])
    for word in ("one", "two", "three"):  # in order, each after the last was taken
        await child.write_input(word.encode() + b"\n")
    assert [await said(child, b"got ") for _ in range(3)] == [
        b"got one\n",
        b"got two\n",
        b"got three\n",
    ]
    # A Ctrl-C to its group: the child hears it and reads on; the shim is not in its group.
    child.signal_group(signal.SIGINT)
    await said(child, b"interrupted")
    assert os.getpgid(child.pid) == child.pid != os.getpgid(child.shim)
    # What it started since now (a helper that ignores SIGTERM) is ended; the older one not.
    since = await later_than(old)
    await child.write_input(b"spawn\n")
    new = int((await said(child, b"spawned ")).split()[1])
    ending = child.end_descendants(0.3, ticks_now() - since)
    assert await asyncio.wait_for(ending, EXIT_TIMEOUT_S) == 1
    assert not psutil.pid_exists(new) or psutil.Process(new).status() == psutil.STATUS_ZOMBIE
    assert psutil.Process(old).status() != psutil.STATUS_ZOMBIE
    child.close_input()
    await child.write_input(b"to nobody\n")  # once closed: nothing, and no error
    assert await outcome(child) == (0, None, 1)  # the old helper, left running at its exit
    await child.write_input(b"after its end\n")
    assert await child.end_descendants(0.3, None) == 0


async def test_a_child_without_its_stdin_kept_open_reads_its_end_at_once(marker: str) -> None:
    child = await start(marker, "sh", "-c", "cat; echo done")
    assert await said(child, b"done")
    await child.write_input(b"ignored\n")  # its stdin is closed: nothing, no error
    assert await outcome(child) == (0, None, 0)


async def test_writing_to_a_child_that_exited_with_its_stdin_open_is_harmless(
    marker: str,
) -> None:
    child = await start_shimmed(
        ["sh", "-c", "echo bye"], cwd="/", env=env_of(marker), grace_s=0.3, keep_stdin=True
    )
    assert await said(child, b"bye")
    assert await outcome(child) == (0, None, 0)
    for _ in range(3):  # the pipe's reader is gone: nothing, and no error
        await asyncio.wait_for(child.write_input(b"x" * 70000), EXIT_TIMEOUT_S)
    child.signal_group(signal.SIGINT)
    assert await child.end_descendants(0.3, None) == 0
