"""What a resume compares before it starts an agent CLI: the file, its bytes, its argv.

No process runs here: programs are identified without version probes (the
end-to-end tests in tests/e2e/test_resume_launch.py run the real CLIs).
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs

from subagent_host.backends.acp import AcpBackend
from subagent_host.backends.identity import ProgramIdentities
from subagent_host.backends.pi import PiBackend
from subagent_host.planning.executable import identify_child
from subagent_host.planning.plan import ChildPlan
from subagent_host.planning.projection import project
from subagent_host.planning.views import Projection
from subagent_host.resuming.launch_check import LEGACY, VERIFIED, compare_launch, launch_check
from subagent_host.values import SessionResources

IDENTITIES = ProgramIdentities(None)  # paths and digests only: nothing is run


def program(directory: Path, text: str = "#!/bin/sh\nexit 0\n") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / "pi"
    script.write_text(text)
    script.chmod(0o755)
    return script


async def launched(
    tmp_path: Path, backend: PiBackend, tools: tuple[str, ...] | None = None
) -> Projection:
    child = ChildPlan(
        backend="pi", cwd=str(tmp_path), timeout_ms=60_000, stall_timeout_ms=30_000,
        prompt="hi", session_resources=SessionResources.FULL, tools=tools,
    )  # fmt: skip
    return project(child, backend, await identify_child(child, backend, IDENTITIES))


async def test_the_same_file_and_argv_are_verified_even_for_a_child_that_named_no_tools(
    tmp_path: Path,
) -> None:
    script = program(tmp_path / "bin")
    backend = PiBackend(tmp_path / "sessions", executable=str(script))
    projection = await launched(tmp_path, backend)  # pi was started without --tools
    assert "--tools" not in projection.argv_template
    assert projection.executable is not None
    assert projection.executable.path == str(script.resolve())
    assert launch_check(projection) == VERIFIED
    assert await compare_launch(projection, backend, IDENTITIES, None) is None


async def test_another_file_another_path_and_another_argv_are_each_named(tmp_path: Path) -> None:
    script = program(tmp_path / "bin")
    backend = PiBackend(tmp_path / "sessions", executable=str(script))
    projection = await launched(tmp_path, backend, tools=("read",))
    approved = projection.executable
    assert approved is not None

    replacement = program(tmp_path / "new", "#!/bin/sh\nexit 1\n")
    os.replace(replacement, script)
    change = await compare_launch(projection, backend, IDENTITIES, None)
    assert change is not None and change.changed == ("digest",), change
    assert change.expected == {"digest": approved.digest}

    elsewhere = program(tmp_path / "opt", "#!/bin/sh\nexit 1\n")
    moved = PiBackend(tmp_path / "sessions", executable=str(elsewhere))
    change = await compare_launch(projection, moved, IDENTITIES, None)
    assert change is not None and change.changed == ("executable", "digest", "argv"), change
    assert change.actual["executable"] == str(elsewhere.resolve())

    script.unlink()
    change = await compare_launch(projection, backend, IDENTITIES, None)
    assert change is not None and change.changed == ("executable", "digest"), change
    assert change.actual == {"executable": None, "digest": None}


async def test_a_projection_without_an_executable_is_legacy_and_not_compared(
    tmp_path: Path,
) -> None:
    backend = PiBackend(tmp_path / "sessions", executable=str(tmp_path / "gone"))
    projection = await launched(tmp_path, backend)
    assert projection.executable is None  # exec would find nothing: nothing recorded
    tampered = attrs.evolve(projection, argv_template=("other",))
    assert launch_check(tampered) == LEGACY
    assert await compare_launch(tampered, backend, IDENTITIES, None) is None


async def test_an_acp_agent_configured_with_other_arguments_is_another_launch(
    tmp_path: Path,
) -> None:
    """A configured ACP agent's launch is its configured program and arguments: a resume
    after its configuration changed them is `launch-changed` (its session id needs no
    file: the agent loads it, `session/load`)."""
    script = program(tmp_path / "bin")
    agent = AcpBackend("some-agent", str(script), ("--acp", "--model", "m"))
    child = ChildPlan(
        backend="some-agent", cwd=str(tmp_path), timeout_ms=60_000, stall_timeout_ms=30_000,
        prompt="hi",
    )  # fmt: skip
    projection = project(child, agent, await identify_child(child, agent, IDENTITIES))
    assert projection.argv_template == (str(script), "--acp", "--model", "m")
    assert await compare_launch(projection, agent, IDENTITIES, None) is None
    changed = AcpBackend("some-agent", str(script), ("--acp", "--model", "other"))
    change = await compare_launch(projection, changed, IDENTITIES, None)
    assert change is not None and change.changed == ("argv",), change
    assert change.actual["argv"] == [str(script), "--acp", "--model", "other"]
