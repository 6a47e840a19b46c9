"""Who a configured ACP agent is. Its launch identity (protocol.md §15, §24.5): its file and
digest as any agent CLI's, its version the `agentInfo.version` it answered the server's
probe with, and never what `--version` prints: the program is never run with it, at launch
or at a resume's check. No version when the probe got no answer, or found another file.
Its `testedVersion` (§24.6): the tested version of the agent its `agentInfo.name` names."""

from __future__ import annotations

import asyncio
import shlex
import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from subagent_host.backends.acp import AcpBackend
from subagent_host.backends.acp_probe import AcpProbes
from subagent_host.backends.identity import ProgramIdentities
from subagent_host.backends.probe import VersionProbes
from subagent_host.backends.supervisor import RUN_MARKER, Supervisor
from subagent_host.planning.executable import identify_child
from subagent_host.planning.plan import ChildPlan
from subagent_host.planning.projection import project
from subagent_host.planning.toolchain import Toolchain
from subagent_host.resuming.launch_check import compare_launch
from tests.backends.fixtures.tiny_acp import tiny_agent
from tests.e2e.agents import agent_path


def wrapper(directory: Path, behaviour: str, asked: Path) -> Path:
    """An agent program that, asked `--version`, leaves `asked` behind and says 9.9.9; else
    it is the tiny agent with `behaviour`."""
    directory.mkdir(parents=True, exist_ok=True)
    executable, args = tiny_agent(directory, behaviour)
    script = directory / "bin" / "agent"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$1" = --version ]; then touch {shlex.quote(str(asked))}; echo "agent 9.9.9"; '
        "exit 0; fi\n"
        f"exec {shlex.join([executable, *args])}\n"
    )
    script.chmod(0o755)
    return script


def copied(program: Path, directory: Path) -> Path:
    """The same bytes as `program`, as another file."""
    directory.mkdir()
    copy = directory / program.name
    shutil.copy2(program, copy)
    return copy


@pytest.fixture
async def supervised(marker: str) -> AsyncIterator[tuple[Supervisor, dict[str, str]]]:
    """A supervisor, and the probes' environment carrying the test's marker."""
    supervisor = Supervisor()
    try:
        yield supervisor, {"PATH": agent_path(), RUN_MARKER: marker}
    finally:
        supervisor.close()


def child_of(backend: AcpBackend, cwd: Path, path: str | None = None) -> ChildPlan:
    return ChildPlan(
        backend=backend.id, cwd=str(cwd), timeout_ms=60_000, stall_timeout_ms=30_000,
        prompt="hi", env={"PATH": path} if path is not None else {},
    )  # fmt: skip


async def test_an_acp_childs_version_is_what_it_answered_and_it_never_runs_version(
    tmp_path: Path, supervised: tuple[Supervisor, dict[str, str]]
) -> None:
    supervisor, env = supervised
    asked = tmp_path / "asked-version"
    answers = AcpBackend("tiny", str(wrapper(tmp_path / "a", "answers", asked)))
    exits = AcpBackend("gone", str(wrapper(tmp_path / "b", "exits", asked)))
    versions, acp = VersionProbes(supervisor, env), AcpProbes(supervisor, env)
    acp.start([answers, exits])
    identities = ProgramIdentities(versions, acp)
    try:
        child = child_of(answers, tmp_path)
        found = await identify_child(child, answers, identities)
        assert found is not None
        assert (found.path, found.version) == (answers.executable, "0.0.1")
        projection = project(child, answers, found)
        assert await compare_launch(projection, answers, identities, None) is None

        # An agent that gave no answer has no version: it is not asked another way.
        gone = await identify_child(child_of(exits, tmp_path), exits, identities)
        assert gone is not None and gone.version is None

        # A child whose PATH finds another file than the one that answered: not its version.
        copy = copied(Path(answers.executable), tmp_path / "copy")
        named = AcpBackend("tiny", "agent")
        other = await identify_child(child_of(named, tmp_path, str(copy.parent)), named, identities)
        assert other is not None and (other.path, other.version) == (str(copy), None)
    finally:
        await acp.close()
        await versions.close()
    assert not asked.exists()  # `--version` was never run


async def test_an_agent_cli_is_still_asked_its_version(
    tmp_path: Path, supervised: tuple[Supervisor, dict[str, str]]
) -> None:
    """The same program as a CLI's (no ACP backend named) is asked `--version`: the test
    above would see it if an ACP agent were."""
    supervisor, env = supervised
    asked = tmp_path / "asked-version"
    program = wrapper(tmp_path, "answers", asked)
    versions = VersionProbes(supervisor, env)
    try:
        found = await ProgramIdentities(versions).identify(str(program), str(tmp_path), None)
    finally:
        await versions.close()
    assert found is not None and found.version == "agent 9.9.9"
    assert asked.exists()


def answering(backend: str, name: str, version: str) -> AcpBackend:
    """An ACP agent that answers `initialize` as `name` `version`, then waits for its stdin."""
    result = {"protocolVersion": 1, "agentInfo": {"name": name, "version": version}}
    code = (
        "import json, sys\n"
        "request = json.loads(sys.stdin.readline())\n"
        f"print(json.dumps({{'jsonrpc': '2.0', 'id': request['id'], 'result': {result!r}}}),"
        " flush=True)\n"
        "sys.stdin.read()\n"
    )
    return AcpBackend(backend, sys.executable, ("-c", code))


async def test_an_acp_agent_has_the_tested_version_of_the_agent_it_says_it_is(
    supervised: tuple[Supervisor, dict[str, str]],
) -> None:
    supervisor, env = supervised
    # Configured as `mine`; `qwen-code` by its own account, which the tests run at 0.24.4.
    qwen, other = answering("mine", "qwen-code", "0.30.0"), answering("tiny", "tiny", "0.0.1")
    acp = AcpProbes(supervisor, env)
    acp.start([qwen, other])
    toolchain = Toolchain({qwen.id: qwen, other.id: other}, None, acp=acp)
    try:
        for backend in (qwen, other):
            assert await asyncio.wait_for(acp.probe(backend.id), 30) is not None
        listed = {info.id: info for info in toolchain.describe()}
    finally:
        await acp.close()
    assert (listed["mine"].version, listed["mine"].tested_version) == ("0.30.0", "0.24.4")
    assert (listed["tiny"].version, listed["tiny"].tested_version) == ("0.0.1", None)
