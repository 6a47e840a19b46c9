"""The probe of configured ACP agents: real Qwen Code answers `initialize` (no model is
asked, so no mock LLM is needed), and tiny misbehaving agents are told apart, each with
its reason; every probe ends the agent's whole tree, within its bound."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Final

import psutil

from subagent_host.backends.acp import AcpBackend
from subagent_host.backends.acp_probe import AcpProbe, AcpProbes
from subagent_host.backends.supervisor import RUN_MARKER, Supervisor
from subagent_host.values.facts import AcpAgentInfo, AcpPromptCapabilities
from tests.backends.conftest import assert_gone
from tests.backends.fixtures.record_acp import qwen_args
from tests.backends.fixtures.tiny_acp import tiny_agent
from tests.e2e.agents import AGENT_BIN, agent_path, needs_cli

QWEN: Final = needs_cli("qwen")  # e2e, skipped when it is not installed
BOUND_S: Final = 2.0  # the probes' bound here: a silent agent is given up on after it


async def probe_one(backend: AcpBackend, marker: str, timeout_s: float = BOUND_S) -> AcpProbe:
    """One probe, run as a server runs it (its environment carrying the test's marker, so
    the `marker` fixture proves nothing it started survives)."""
    supervisor = Supervisor()
    probes = AcpProbes(supervisor, {"PATH": agent_path(), RUN_MARKER: marker}, timeout_s)
    try:
        probes.start([backend])
        assert probes.cached(backend.id) is None  # in the background: not done yet
        probe = await asyncio.wait_for(probes.probe(backend.id), timeout_s + 30)
        assert probe is not None
        assert probes.cached(backend.id) == probe
        return probe
    finally:
        await probes.close()
        supervisor.close()


@QWEN[0]
@QWEN[1]
async def test_qwen_answers_initialize_with_its_info_and_load_session(
    tmp_path: Path, marker: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    backend = AcpBackend(
        "qwen",
        str(AGENT_BIN / "qwen"),
        qwen_args("http://127.0.0.1:9/v1"),  # never asked: initialize needs no model
        {"HOME": str(home)},
    )
    probe = await probe_one(backend, marker, timeout_s=60)
    assert probe.runs and probe.found and probe.reason is None
    answer = probe.answer
    assert answer is not None
    assert answer.protocol_version == 1
    assert answer.agent_info == AcpAgentInfo(name="qwen-code", version="0.24.4", title="Qwen Code")
    assert answer.capabilities.load_session is True
    assert answer.capabilities.prompt_capabilities == AcpPromptCapabilities(True, True, True)
    assert answer.auth_methods == ("openai",)


async def test_a_tiny_agent_answers_without_load_session(tmp_path: Path, marker: str) -> None:
    executable, args = tiny_agent(tmp_path, "answers")
    probe = await probe_one(AcpBackend("tiny", executable, tuple(args)), marker)
    assert probe.runs
    assert probe.answer is not None
    assert probe.answer.agent_info == AcpAgentInfo(name="tiny", version="0.0.1", title="Tiny")
    assert probe.answer.capabilities.load_session is False
    assert probe.answer.capabilities.prompt_capabilities == AcpPromptCapabilities(
        True, False, False
    )
    assert probe.answer.auth_methods == ()


async def test_a_missing_program_is_not_found_and_nothing_starts(marker: str) -> None:
    probe = await probe_one(AcpBackend("gone", "no-such-acp-agent-here"), marker)
    assert (probe.found, probe.answer) == (False, None)
    assert probe.reason == "'no-such-acp-agent-here' is not on the server's PATH"


async def test_an_agent_that_exits_at_once_is_told_with_its_status_and_stderr(
    tmp_path: Path, marker: str
) -> None:
    executable, args = tiny_agent(tmp_path, "exits")
    probe = await probe_one(AcpBackend("tiny", executable, tuple(args)), marker)
    assert probe.found and not probe.runs
    assert probe.reason == (
        "it exited (status 3) before answering initialize; "
        "its stderr ended: tiny: no model configured"
    )


async def test_an_agent_that_never_answers_is_given_up_on_and_its_tree_ended(
    tmp_path: Path, marker: str
) -> None:
    pidfile = tmp_path / "grandchild"
    executable, args = tiny_agent(tmp_path, "silent", str(pidfile))
    probe = await probe_one(AcpBackend("tiny", executable, tuple(args)), marker)
    assert probe.found and probe.answer is None
    assert probe.reason == f"no answer to initialize within {BOUND_S:g} s"
    await assert_gone([int(pidfile.read_text())])  # the agent's own child went with it


async def test_an_agent_that_prints_text_is_not_acp(tmp_path: Path, marker: str) -> None:
    executable, args = tiny_agent(tmp_path, "text")
    probe = await probe_one(AcpBackend("tiny", executable, tuple(args)), marker)
    assert probe.reason == (
        "it printed a line that is not a JSON object: Welcome to tiny, the agent!"
    )


async def test_an_agent_of_another_protocol_version_cannot_run(tmp_path: Path, marker: str) -> None:
    executable, args = tiny_agent(tmp_path, "v2")
    probe = await probe_one(AcpBackend("tiny", executable, tuple(args)), marker)
    assert probe.answer is not None and probe.answer.protocol_version == 2
    assert probe.reason == "it speaks ACP version 2, not 1"


async def test_closing_the_probes_mid_probe_ends_the_agent_tree(
    tmp_path: Path, marker: str
) -> None:
    pidfile = tmp_path / "grandchild"
    executable, args = tiny_agent(tmp_path, "silent", str(pidfile))
    supervisor = Supervisor()
    probes = AcpProbes(supervisor, {"PATH": agent_path(), RUN_MARKER: marker}, timeout_s=600)
    try:
        probes.start([AcpBackend("tiny", executable, tuple(args))])
        for _ in range(1000):  # the grandchild says it started: nothing else tells it
            if pidfile.exists() and pidfile.read_text():
                break
            await asyncio.sleep(0.01)
        grandchild = int(pidfile.read_text())
        assert psutil.pid_exists(grandchild)
        await asyncio.wait_for(probes.close(), 30)
        assert probes.cached("tiny") is None and await probes.probe("tiny") is None
    finally:
        supervisor.close()
    await assert_gone([grandchild])
