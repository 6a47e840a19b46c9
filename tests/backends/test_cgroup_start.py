"""How a child gets into its cgroup: the server steps in to fork it there, or a trampoline.

Both ways must put the child inside before its first instruction, leave the
server in its own cgroup, and never let a kill of a child's cgroup reach the server.
"""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
from collections.abc import AsyncIterator
from pathlib import Path

import attrs
import pytest

from subagent_host.backends import cgroups
from subagent_host.backends.cgroups import Group, Hierarchy
from subagent_host.backends.supervisor import RUN_MARKER, LaunchSpec, Supervisor
from subagent_host.backends.tracking import TrackingMode, TrackingUnavailable, choose
from tests.backends.test_supervisor import WAIT_S, Collect

STEP_IN = "step in"
TRAMPOLINE = "trampoline"


def own_cgroup_line() -> str:
    return next(
        line for line in Path("/proc/self/cgroup").read_text().splitlines() if line[:3] == "0::"
    )


@pytest.fixture(params=[STEP_IN, TRAMPOLINE])
async def supervisor(request: pytest.FixtureRequest) -> AsyncIterator[Supervisor]:
    try:
        tracking = choose(TrackingMode.CGROUP.value)
    except TrackingUnavailable as exc:
        pytest.skip(str(exc))
    if request.param == STEP_IN and tracking.home is None:
        pytest.skip("this process's cgroup is not an ancestor of the children's")
    if request.param == TRAMPOLINE:
        tracking.home = None
    supervisor = Supervisor(tracking)
    yield supervisor
    supervisor.close()


def spec(marker: str, *argv: str) -> LaunchSpec:
    env = {"PATH": os.environ["PATH"], RUN_MARKER: marker}
    return LaunchSpec(argv=argv, cwd="/", env=env)


def relative(supervisor: Supervisor, group: Group) -> str:
    assert supervisor.tracking.hierarchy is not None
    return "/" + str(group.path.relative_to(supervisor.tracking.hierarchy.mount))


async def test_a_child_and_its_first_fork_are_in_its_cgroup_and_the_server_is_back_home(
    supervisor: Supervisor, marker: str
) -> None:
    before = own_cgroup_line()
    sink = Collect()
    # The child's first instruction is the shell's; its first fork is `cat`.
    child = await supervisor.start(
        spec(marker, "sh", "-c", "cat /proc/$$/cgroup; cat /proc/self/cgroup"), sink
    )
    assert own_cgroup_line() == before
    assert child.group is not None
    inside = f"0::{relative(supervisor, child.group)}"
    await asyncio.wait_for(supervisor.wait(child), WAIT_S)
    assert sink.stdout.decode().splitlines().count(inside) == 2, sink.stdout
    assert not child.group.path.exists()
    assert own_cgroup_line() == before


@pytest.mark.parametrize("memory", [True, False])
async def test_a_childs_end_reads_memory_peak_only_where_a_memory_controller_gives_one(
    supervisor: Supervisor, marker: str, memory: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    hierarchy = supervisor.tracking.hierarchy
    assert hierarchy is not None
    supervisor.tracking.hierarchy = attrs.evolve(hierarchy, memory=memory)
    peaks: list[Path] = []
    read_peak = Group.memory_peak

    def noting_peak(group: Group) -> int | None:
        peaks.append(group.path)
        return read_peak(group)

    monkeypatch.setattr(Group, "memory_peak", noting_peak)
    child = await supervisor.start(spec(marker, "true"), Collect())
    await asyncio.wait_for(supervisor.wait(child), WAIT_S)

    assert child.group is not None and child.usage is not None
    assert peaks == ([child.group.path] if memory else [])
    if not memory:
        assert child.usage.rss_bytes == 0


async def test_a_start_that_fails_leaves_the_server_home_and_no_cgroup_behind(
    supervisor: Supervisor, marker: str
) -> None:
    before = own_cgroup_line()
    instance = supervisor.tracking.instance
    assert instance is not None
    with pytest.raises(FileNotFoundError):
        await supervisor.start(spec(marker, "no-such-program-here"), Collect())
    assert own_cgroup_line() == before
    assert instance.children() == []


async def test_the_child_gets_exactly_its_environment_whichever_way_it_enters(
    supervisor: Supervisor, marker: str
) -> None:
    sink = Collect()
    child = await supervisor.start(spec(marker, "env"), sink)
    await asyncio.wait_for(supervisor.wait(child), WAIT_S)
    assert sorted(sink.stdout.decode().splitlines()) == sorted(
        [f"PATH={os.environ['PATH']}", f"{RUN_MARKER}={marker}"]
    )


def test_no_stepping_in_where_the_servers_cgroup_is_not_above_the_childrens(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hierarchy = Hierarchy(mount=tmp_path, root=tmp_path / "subagent-host", memory=False)
    instance = Group(hierarchy.root / "i1-2")
    service = Group(tmp_path / "system.slice" / "server.service")  # a unit of its own
    for group in (service, Group(tmp_path)):
        group.path.mkdir(parents=True, exist_ok=True)
        group.procs_path.write_text("")  # writable: only where it is matters
    monkeypatch.setattr(cgroups, "own_cgroup", lambda _mount: service)
    assert cgroups.home_for(hierarchy, instance) is None
    monkeypatch.setattr(cgroups, "own_cgroup", lambda mount: Group(mount))
    assert cgroups.home_for(hierarchy, instance) == Group(tmp_path)


def test_the_servers_own_cgroup_is_read_from_proc_and_refused_outside_the_namespace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    own = cgroups.own_cgroup(tmp_path)
    line = own_cgroup_line()
    assert own == Group(tmp_path / line[3:].lstrip("/"))
    lines = tmp_path / "cgroup"
    lines.write_text("0::/../../elsewhere\n")
    real_open = open

    def fake_open(path: object, *args: object, **kwargs: object) -> object:
        return real_open(lines if path == "/proc/self/cgroup" else path, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr("builtins.open", fake_open)
    assert cgroups.own_cgroup(tmp_path) is None


KILLER = textwrap.dedent(
    """
    import os, subprocess, sys
    from pathlib import Path
    from subagent_host.backends.cgroups import Group, move_self
    group = Group(Path(sys.argv[1]))
    home = Group(Path(sys.argv[2]))
    move_self(group)
    sleeper = subprocess.Popen(["sleep", "1000"])
    listed = sorted(group.pids()) == [sleeper.pid]  # what a stop sequence would signal
    group.kill()
    sleeper.wait()
    move_self(home)
    print("alive", sleeper.returncode, listed, flush=True)
    """
)


async def test_a_cgroup_the_server_is_in_never_lists_it_and_its_kill_spares_it() -> None:
    try:
        tracking = choose(TrackingMode.CGROUP.value)
    except TrackingUnavailable as exc:
        pytest.skip(str(exc))
    if tracking.home is None or tracking.instance is None:
        pytest.skip("this process's cgroup is not an ancestor of the children's")
    group = tracking.place("kill-test")
    assert group is not None
    try:
        killer = await asyncio.create_subprocess_exec(
            *(sys.executable, "-c", KILLER, str(group.path), str(tracking.home.path)),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(killer.communicate(), WAIT_S)
        assert out == b"alive -9 True\n", err
        assert group.pids() == []
    finally:
        group.kill()  # whatever the test left (the server is not in it)
        Supervisor(tracking).close()


def test_the_processes_of_a_cgroup_are_all_read_however_many_they_are(tmp_path: Path) -> None:
    pids = list(range(100_000, 130_000))  # ~210 KB: several reads
    (tmp_path / "cgroup.procs").write_text("".join(f"{pid}\n" for pid in pids))
    assert Group(tmp_path).pids() == pids
