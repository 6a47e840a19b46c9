"""What leaves the machine, over real stdio: each agent child's receipt names its model
provider at the endpoint it is given (the pinned CLIs against the loopback mock LLM, which
then receives their requests), a command child's says its network is unknown, and with
`require_egress_consent` an agent launch, or a resume of one, runs only with
`egressConsent: true`, which is fingerprinted, kept with the run and shown by `status`."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import pytest

from tests.e2e.agents import AGENT_BIN, PI_SPAWN, consent_required, pi_environment, server_args
from tests.e2e.harness import ServerProcess, error_of, result_of, running_server, state_args
from tests.e2e.test_agent_clis import Cli, each_cli
from tests.mock_llm import KEYWORD_ANSWER_NOW, MockLLM

pytestmark = pytest.mark.e2e

LAUNCH_REJECTED: Final = -32003
RESUME_DENIED: Final = -32004
COMMAND: Final = {"command": ["sh", "-c", "cat"], "prompt": "hi", "mode": "task"}
CONSENT_REQUIRED: Final = ("egress-consent-required", "egressConsent")


def needs(name: str) -> pytest.MarkDecorator:
    return pytest.mark.skipif(
        not (AGENT_BIN / name).exists(), reason=f"the pinned {name} CLI is not installed"
    )


def codes(diagnostics: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    return [(d["code"], d.get("path")) for d in diagnostics if d["severity"] == "error"]


def egress(checked: dict[str, Any]) -> list[Any]:
    return [child["egress"] for child in checked["receipts"]["access"]["children"]]


async def test_a_command_child_s_egress_is_unknown_and_needs_no_consent(tmp_path: Path) -> None:
    args = (*state_args(tmp_path / "state"), "--require-egress-consent")
    async with running_server(*args) as server:
        pong = await result_of(server, "ping", {})
        assert pong["admission"] == {"requirePreflight": False, "requireEgressConsent": True}
        checked = await result_of(server, "preflight", COMMAND)
        assert checked["accepted"], checked
        assert egress(checked) == [[{"kind": "unknown"}]]
        run = await result_of(server, "spawn", COMMAND)
        assert run["status"] == "completed" and "egressConsent" not in run
        await server.finish()


async def test_egress_consent_is_fingerprinted_a_preflight_with_it_admits_no_spawn_without_it(
    tmp_path: Path,
) -> None:
    async with running_server(*state_args(tmp_path / "state")) as server:
        for preflight, spawn in (({"egressConsent": True}, {}), ({}, {"egressConsent": True})):
            checked = await result_of(server, "preflight", {**COMMAND, **preflight})
            assert checked["plan"].get("egressConsent") is preflight.get("egressConsent")
            launch = {**COMMAND, **spawn, "preflightId": checked["preflightId"]}
            refused = await error_of(server, "spawn", launch)
            assert refused["code"] == LAUNCH_REJECTED
            assert codes(refused["data"]["diagnostics"]) == [("preflight-mismatch", "preflightId")]
        # `false` says what absence says: the same plan.
        absent = await result_of(server, "preflight", COMMAND)
        refusing = await result_of(server, "preflight", {**COMMAND, "egressConsent": False})
        assert absent["fingerprint"] == refusing["fingerprint"]
        run = await result_of(
            server,
            "spawn",
            {**COMMAND, "egressConsent": False, "preflightId": absent["preflightId"]},
        )
        assert run["status"] == "completed"
        await server.finish()


async def refused_without_consent(server: ServerProcess, spawn: dict[str, Any]) -> dict[str, Any]:
    """Preflight and spawn without consent (absent, then false) are refused, the receipts
    still saying what would leave; returns the refused preflight."""
    for consent in ({}, {"egressConsent": False}):
        checked = await result_of(server, "preflight", {**spawn, **consent})
        assert checked["accepted"] is False and "preflightId" not in checked
        assert codes(checked["diagnostics"]) == [CONSENT_REQUIRED]
        refused = await error_of(server, "spawn", {**spawn, **consent})
        assert refused["code"] == LAUNCH_REJECTED
        assert codes(refused["data"]["diagnostics"]) == [CONSENT_REQUIRED]
    return checked


@needs("pi")
async def test_with_required_consent_a_pi_child_runs_only_with_it_at_the_endpoint_shown(
    tmp_path: Path, mock: MockLLM
) -> None:
    consent = consent_required(tmp_path)
    env = pi_environment(tmp_path, mock.openai_base_url)
    spawn = {**PI_SPAWN, "prompt": f"{KEYWORD_ANSWER_NOW} hi", "mode": "task"}
    shown = [{"kind": "model-provider", "backend": "pi", "endpoint": mock.openai_base_url}]
    args = (*server_args(tmp_path), *consent)
    async with running_server(*args, env=env) as server:
        # Read-only tools change nothing of it: the provider is reached all the same.
        narrowed = {**spawn, "access": {"filesystem": "read", "network": False}}
        assert egress(await refused_without_consent(server, narrowed)) == [shown]
        assert mock.requests == []  # nothing was sent

        checked = await result_of(server, "preflight", {**spawn, "egressConsent": True})
        assert checked["accepted"], checked
        assert egress(checked) == [shown] and checked["plan"]["egressConsent"] is True
        run = await result_of(
            server,
            "spawn",
            {**spawn, "egressConsent": True, "preflightId": checked["preflightId"]},
        )
        assert run["status"] == "completed", run
        assert run["egressConsent"] is True and run["admittedBy"] == "preflight"
        assert mock.requests, "pi sent its requests to the endpoint its receipt named"
        # The consent is kept with the run, and a resume of it carries it on.
        approval = await result_of(
            server, "preflight", {"resume": {"runId": run["runId"], "message": "again"}}
        )
        assert approval["accepted"], approval
        resumed = await result_of(server, "resume", {"token": approval["token"], "mode": "task"})
        assert resumed["egressConsent"] is True and resumed["children"][0]["attempt"] == 2
        await server.finish()
    async with running_server(*args, env=env) as server:
        again = await result_of(server, "status", {"runId": run["runId"]})
        assert again["egressConsent"] is True
        await server.finish()


@needs("pi")
async def test_a_run_launched_without_consent_is_not_resumed_where_consent_is_required(
    tmp_path: Path, mock: MockLLM
) -> None:
    env = pi_environment(tmp_path, mock.openai_base_url)
    spawn = {**PI_SPAWN, "prompt": f"{KEYWORD_ANSWER_NOW} hi", "mode": "task"}
    async with running_server(*server_args(tmp_path), env=env) as server:
        run = await result_of(server, "spawn", spawn)
        assert run["status"] == "completed" and "egressConsent" not in run
        approval = await result_of(
            server, "preflight", {"resume": {"runId": run["runId"], "message": "again"}}
        )
        assert approval["accepted"], approval
        await server.finish()
    async with running_server(
        *server_args(tmp_path), "--require-egress-consent", env=env
    ) as server:
        checked = await result_of(
            server, "preflight", {"resume": {"runId": run["runId"], "message": "again"}}
        )
        assert checked["accepted"] is False
        assert [d["code"] for d in checked["diagnostics"]] == ["egress-consent-required"]
        # A token issued before the policy held is refused too, and nothing starts.
        denied = await error_of(server, "resume", {"token": approval["token"]})
        assert denied["code"] == RESUME_DENIED
        assert denied["data"] == {
            "reason": "not-resumable",
            "code": "egress-consent-required",
        }
        status = await result_of(server, "status", {"runId": run["runId"]})
        assert status["children"][0]["attempt"] == 1
        await server.finish()


@each_cli("claude", "codex")
async def test_claude_and_codex_receipts_name_the_endpoint_they_are_given(
    tmp_path: Path, mock: MockLLM, cli: Cli
) -> None:
    env, url = cli.mock_environment(tmp_path, mock), cli.base_url(mock)
    launch = {**cli.spawn, "prompt": f"{KEYWORD_ANSWER_NOW} hi", "mode": "task"}
    launch["egressConsent"] = True
    async with running_server(
        *server_args(tmp_path), "--require-egress-consent", env=env
    ) as server:
        checked = await result_of(server, "preflight", launch)
        assert checked["accepted"], checked
        assert egress(checked) == [
            [{"kind": "model-provider", "backend": cli.name, "endpoint": url}]
        ]
        run = await result_of(server, "spawn", launch)
        assert run["status"] == "completed", run
        assert mock.requests, f"{cli.name} sent its requests to the endpoint its receipt named"
        await server.finish()
