"""`maxTurns` with each real agent CLI, against a mock model that never stops calling
its shell tool: the child is ended as its third response begins (claude stops itself
before it, at its own `--max-turns`), the run ends `limit-reached` with
`reachedLimit: "max-turns"`, nothing is left running, and the preflight's receipts
say the limit is `host-hard`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import pytest

from tests.e2e.agents import (
    AGENT_BIN,
    claude_environment,
    codex_environment,
    pi_environment,
    server_args,
)
from tests.e2e.harness import result_of, running_server
from tests.e2e.test_claude import SPAWN as CLAUDE_SPAWN
from tests.e2e.test_codex import SPAWN as CODEX_SPAWN
from tests.e2e.test_pi import SPAWN as PI_SPAWN
from tests.mock_llm import KEYWORD_LOOP_TOOL, MockLLM

MAX_TURNS: Final = 2
Environment = Callable[[Path, MockLLM], dict[str, str]]
# Each CLI: its spawn fields, its server environment, and the API path it asks the model on.
CLIS: Final[dict[str, tuple[dict[str, Any], Environment, str]]] = {
    "pi": (PI_SPAWN, lambda tmp, m: pi_environment(tmp, m.openai_base_url), "/v1/chat"),
    "claude": (CLAUDE_SPAWN, lambda tmp, m: claude_environment(tmp, m.base_url), "/v1/messages"),
    "codex": (CODEX_SPAWN, lambda tmp, m: codex_environment(tmp, m.openai_base_url), "/v1/resp"),
}
# How many requests the model may have seen: claude stops itself before request N + 1;
# pi prints `turn_start` as it sends request N + 1, which may go out before it is ended;
# codex shows response N + 1 only when it arrives, and its (quick) tool may have run and
# request N + 2 gone out before it is ended. Without the limit the model is asked for ever.
REQUESTS: Final = {
    "claude": (MAX_TURNS, MAX_TURNS),
    "pi": (MAX_TURNS, MAX_TURNS + 1),
    "codex": (MAX_TURNS + 1, MAX_TURNS + 2),
}


def each_cli() -> list[Any]:
    return [
        pytest.param(
            name,
            marks=[
                pytest.mark.e2e,
                pytest.mark.skipif(
                    not (AGENT_BIN / name).exists(),
                    reason=f"the pinned {name} CLI is not installed: run scripts/install-agents",
                ),
            ],
        )
        for name in CLIS
    ]


@pytest.mark.parametrize("cli", each_cli())
async def test_a_child_that_would_go_on_calling_tools_ends_limit_reached_at_max_turns(
    tmp_path: Path, mock: MockLLM, cli: str
) -> None:
    spawn, environment, api = CLIS[cli]
    params = {**spawn, "prompt": f"{KEYWORD_LOOP_TOOL} until told to stop", "maxTurns": MAX_TURNS}
    async with running_server(*server_args(tmp_path), env=environment(tmp_path, mock)) as server:
        checked = await result_of(server, "preflight", {**params, "requiredLimits": ["maxTurns"]})
        assert checked["accepted"], checked
        limits = {limit["name"]: limit for limit in checked["receipts"]["limits"]}
        assert limits["maxTurns"]["value"] == MAX_TURNS
        assert limits["maxTurns"]["enforcement"] == "host-hard"
        assert checked["plan"]["children"][0]["limits"]["maxTurns"] == MAX_TURNS
        run = await result_of(
            server, "spawn", {**params, "mode": "task", "preflightId": checked["preflightId"]}
        )
        child = run["children"][0]
        assert (run["status"], run.get("reachedLimit")) == ("limit-reached", "max-turns"), run
        assert (child["status"], child.get("reason")) == ("limit-reached", "max-turns")
        assert "output" not in run or run["output"]["partial"]
        await server.finish()
    # running_server proved that no process carrying the run's marker survived.
    asked = [request for request in mock.requests if request.path.startswith(api)]
    fewest, most = REQUESTS[cli]
    assert fewest <= len(asked) <= most


@pytest.mark.parametrize("cli", [p for p in each_cli() if p.values == ("pi",)])
async def test_a_resume_may_lower_max_turns_never_raise_it_and_its_attempt_is_held_to_it(
    tmp_path: Path, mock: MockLLM, cli: str
) -> None:
    spawn, environment, _ = CLIS[cli]
    params = {**spawn, "prompt": f"{KEYWORD_LOOP_TOOL} please", "maxTurns": MAX_TURNS}
    async with running_server(*server_args(tmp_path), env=environment(tmp_path, mock)) as server:
        first = await result_of(server, "spawn", {**params, "mode": "task"})
        assert first["status"] == "limit-reached", first
        resume = {"runId": first["runId"], "message": f"{KEYWORD_LOOP_TOOL} again"}
        raised = await result_of(
            server, "preflight", {"resume": {**resume, "overrides": {"maxTurns": MAX_TURNS + 1}}}
        )
        assert not raised["accepted"]
        assert [d["code"] for d in raised["diagnostics"]] == ["override-not-allowed"]
        approved = await result_of(
            server, "preflight", {"resume": {**resume, "overrides": {"maxTurns": 1}}}
        )
        assert approved["accepted"], approved
        assert approved["contract"]["projection"]["limits"]["maxTurns"] == 1
        resumed = await result_of(server, "resume", {"token": approved["token"], "mode": "task"})
        child = resumed["children"][0]
        assert (resumed["status"], resumed.get("reachedLimit")) == ("limit-reached", "max-turns")
        assert (child["attempt"], child["status"]) == (2, "limit-reached"), resumed
        await server.finish()
