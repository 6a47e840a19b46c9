"""What `describe()` tells of the backends, and when it is made again."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import psutil

from subagent_host.backends.claude import ClaudeBackend
from subagent_host.backends.command import CommandBackend
from subagent_host.backends.probe import VersionProbes
from subagent_host.backends.supervisor import Supervisor
from subagent_host.planning.toolchain import Toolchain
from tests.waits import loop_turns


def fake_cli(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A CLI that prints its version once `go` exists (or after ~5 s), and records its pid."""
    program, go, pidfile = tmp_path / "fake-claude", tmp_path / "go", tmp_path / "pid"
    program.write_text(
        "#!/bin/sh\n"
        f'echo $$ > "{pidfile}"\n'
        "i=0\n"
        f'while [ ! -e "{go}" ] && [ $i -lt 500 ]; do sleep 0.01; i=$((i+1)); done\n'
        'echo "claude 9.9.9"\n'
    )
    program.chmod(0o755)
    return program, go, pidfile


async def test_describe_answers_the_same_tuple_until_a_version_probe_ends_then_shows_the_version(
    tmp_path: Path,
) -> None:
    program, go, pidfile = fake_cli(tmp_path)
    supervisor = Supervisor()
    probes = VersionProbes(supervisor, os.environ)
    toolchain = Toolchain(
        {"claude": ClaudeBackend(executable=str(program)), "command": CommandBackend()}, probes
    )
    try:
        before = toolchain.describe()
        assert [(info.id, info.available, info.version) for info in before] == [
            ("claude", True, None),
            ("command", True, None),
        ]
        assert toolchain.describe() is before
        probing = asyncio.ensure_future(probes.version(str(program)))
        await loop_turns()
        assert not probing.done()
        assert toolchain.describe() is before  # the probe has not ended: nothing changed
        go.touch()
        assert await asyncio.wait_for(probing, 10) == "claude 9.9.9"
        after = toolchain.describe()
        assert after[0].version == "claude 9.9.9"
        assert toolchain.describe() is after
    finally:
        await probes.close()
        supervisor.close()
    assert not psutil.pid_exists(int(pidfile.read_text()))
