"""`maxTokens` and `maxCostUsd` with real agent CLIs, against a mock model that never stops
calling its shell tool and reports the same usage for every response (100 input tokens
and one per conversation item, 20 output; pi prices them at $3 and $15 a million): a
budget above the first response's spending and below two responses' is reached with the
second response, the run ends `limit-reached` with `reachedLimit` `max-tokens` or
`max-cost`, nothing is left running, and a resume may only lower a budget."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

import pytest

from tests.e2e.harness import error_of, frame, result_of, running_server
from tests.e2e.test_max_turns import CLIS, each_cli
from tests.mock_llm import BASE_INPUT_TOKENS, KEYWORD_LOOP_TOOL, OUTPUT_TOKENS, MockLLM

# More than one response spends (BASE_INPUT_TOKENS + a few items + OUTPUT_TOKENS), no
# more than two do.
MAX_TOKENS: Final = 2 * BASE_INPUT_TOKENS
assert BASE_INPUT_TOKENS + OUTPUT_TOKENS + 20 < MAX_TOKENS
# pi's price of the mock model: a response costs about $0.0006 (input $3, output $15 a
# million tokens); one is within it, two are not.
MAX_COST_USD: Final = 0.001
LOOPS: Final = f"{KEYWORD_LOOP_TOOL} until told to stop"
INVALID_PARAMS: Final = -32602
LAUNCH_REJECTED: Final = -32003
PARSE_ERROR: Final = -32700


def budget_clis() -> list[Any]:
    """The CLIs that report tokens while they run (codex only when its turn ends)."""
    return [param for param in each_cli() if param.values[0] in ("pi", "claude")]


def pi_only() -> list[Any]:
    return [param for param in each_cli() if param.values[0] == "pi"]


def budget_cases() -> list[Any]:
    """Each CLI with each budget it can be held to: (cli, budget, value, reachedLimit)."""
    cases: list[tuple[Any, str, float, str]] = [
        (param, "maxTokens", MAX_TOKENS, "max-tokens") for param in budget_clis()
    ]
    cases += [(param, "maxCostUsd", MAX_COST_USD, "max-cost") for param in pi_only()]
    return [
        pytest.param(param.values[0], budget, value, limit, marks=param.marks)
        for param, budget, value, limit in cases
    ]


def spent(child: dict[str, Any], budget: str) -> float:
    """What the child's usage says it spent of `budget`."""
    usage = child["usage"]
    if budget == "maxCostUsd":
        cost: float = usage["costUsd"]
        return cost
    tokens: int = usage["inputTokens"] + usage["outputTokens"]
    return tokens


@pytest.mark.parametrize(("cli", "budget", "value", "limit"), budget_cases())
async def test_a_child_that_would_go_on_calling_tools_ends_limit_reached_at_its_budget(
    tmp_path: Path, mock: MockLLM, cli: str, budget: str, value: float, limit: str
) -> None:
    spawn, environment, api = CLIS[cli]
    params = {**spawn, "prompt": LOOPS, budget: value}
    async with running_server(
        "--state-dir", str(tmp_path / "state"), env=environment(tmp_path, mock)
    ) as server:
        checked = await result_of(server, "preflight", {**params, "requiredLimits": [budget]})
        assert checked["accepted"], checked
        limits = {receipt["name"]: receipt for receipt in checked["receipts"]["limits"]}
        assert (limits[budget]["value"], limits[budget]["enforcement"]) == (value, "host-hard")
        assert checked["plan"]["children"][0]["limits"][budget] == value
        run = await result_of(
            server, "spawn", {**params, "mode": "task", "preflightId": checked["preflightId"]}
        )
        child = run["children"][0]
        assert (run["status"], run.get("reachedLimit")) == ("limit-reached", limit), run
        assert (child["status"], child.get("reason")) == ("limit-reached", limit)
        assert spent(child, budget) >= value
        assert "output" not in run or run["output"]["partial"]
        await server.finish()
    # running_server proved that no process carrying the run's marker survived.
    asked = [request for request in mock.requests if request.path.startswith(api)]
    # The second response reaches the budget; the request after it may have gone out.
    assert 2 <= len(asked) <= 3


@pytest.mark.parametrize("cli", pi_only())
async def test_a_resume_may_lower_a_budget_never_raise_it_and_its_attempt_is_held_to_it(
    tmp_path: Path, mock: MockLLM, cli: str
) -> None:
    spawn, environment, _ = CLIS[cli]
    params = {**spawn, "prompt": LOOPS, "maxTokens": MAX_TOKENS, "mode": "task"}
    async with running_server(
        "--state-dir", str(tmp_path / "state"), env=environment(tmp_path, mock)
    ) as server:
        first = await result_of(server, "spawn", params)
        assert first["reachedLimit"] == "max-tokens", first
        resume = {"runId": first["runId"], "message": f"{KEYWORD_LOOP_TOOL} again"}
        for raised in ({"maxTokens": MAX_TOKENS + 1}, {"maxTokens": 0}):
            refused = await result_of(
                server, "preflight", {"resume": {**resume, "overrides": raised}}
            )
            assert not refused["accepted"]
            assert [d["code"] for d in refused["diagnostics"]] == ["override-not-allowed"]
        # Launched without a cost budget: any is lower than none.
        lowered = {"maxTokens": MAX_TOKENS // 2, "maxCostUsd": 5}
        approved = await result_of(
            server, "preflight", {"resume": {**resume, "overrides": lowered}}
        )
        assert approved["accepted"], approved
        limits = approved["contract"]["projection"]["limits"]
        assert (limits["maxTokens"], limits["maxCostUsd"]) == (MAX_TOKENS // 2, 5)
        resumed = await result_of(server, "resume", {"token": approved["token"], "mode": "task"})
        child = resumed["children"][0]
        # Each attempt is counted afresh; this one's first response (a longer
        # conversation now) spends more than its lowered budget.
        assert (resumed["status"], resumed.get("reachedLimit")) == ("limit-reached", "max-tokens")
        assert (child["attempt"], child["reason"]) == (2, "max-tokens"), resumed
        await server.finish()


@pytest.mark.parametrize("cli", pi_only())
async def test_bad_budgets_are_refused_with_the_field_they_are_in(
    tmp_path: Path, mock: MockLLM, cli: str
) -> None:
    spawn, environment, _ = CLIS[cli]
    launch = {**spawn, "prompt": LOOPS}
    async with running_server(
        "--state-dir", str(tmp_path / "state"), env=environment(tmp_path, mock)
    ) as server:
        # Not a number of the right kind: the params do not fit the method.
        for field, bad in (
            ("maxTokens", 1.5),
            ("maxTokens", "12"),
            ("maxTokens", True),
            ("maxCostUsd", "0.5"),
            ("maxCostUsd", False),
            ("maxCostUsd", []),
        ):
            error = await error_of(server, "spawn", {**launch, field: bad})
            assert error["code"] == INVALID_PARAMS, (field, bad, error)
            assert [e["path"] for e in error["data"]["errors"]] == [field]
        error = await error_of(server, "spawn", {"tasks": [{**launch, "maxTokens": 2.5}]})
        assert [e["path"] for e in error["data"]["errors"]] == ["tasks[0].maxTokens"]
        # A number, but no budget: the launch is refused, each at its field.
        for field, bad, code in (
            ("maxTokens", 0, "invalid-max-tokens"),
            ("maxTokens", -1, "invalid-max-tokens"),
            ("maxTokens", 2**53, "invalid-max-tokens"),
            ("maxTokens", 10**30, "invalid-max-tokens"),
            ("maxCostUsd", 0, "invalid-max-cost-usd"),
            ("maxCostUsd", -0.01, "invalid-max-cost-usd"),
        ):
            error = await error_of(server, "spawn", {**launch, field: bad})
            assert error["code"] == LAUNCH_REJECTED, (field, bad, error)
            found = [(d["code"], d["path"]) for d in error["data"]["diagnostics"]]
            assert found == [(code, field)], (field, bad)
        claude = await error_of(server, "spawn", {**launch, "backend": "claude", "maxCostUsd": 1})
        assert ("cost-not-reported", "maxCostUsd") in [
            (d["code"], d["path"]) for d in claude["data"]["diagnostics"]
        ]
        command = await error_of(server, "spawn", {"command": ["true"], "maxTokens": 5})
        found = [(d["code"], d["path"]) for d in command["data"]["diagnostics"]]
        assert found == [("not-honoured", "maxTokens")]
        # NaN is no JSON: the message cannot be read at all.
        body = json.dumps(
            {"jsonrpc": "2.0", "id": 99, "method": "spawn", "params": {**launch, "maxCostUsd": 1}}
        ).replace('"maxCostUsd": 1', '"maxCostUsd": NaN')
        await server.send_raw(frame(body.encode(), "ndjson"))
        assert (await server.receive())["error"]["code"] == PARSE_ERROR
        assert (await result_of(server, "ping", {}))["pong"] is True
        await server.finish()
    assert mock.requests == []  # nothing was started


@pytest.mark.parametrize("cli", pi_only())
async def test_a_configured_budget_applies_to_every_agent_child_that_names_none(
    tmp_path: Path, mock: MockLLM, cli: str
) -> None:
    spawn, environment, _ = CLIS[cli]
    config = tmp_path / "subagents.json"
    config.write_text(json.dumps({"max_tokens": MAX_TOKENS, "max_cost_usd": 2}))
    async with running_server(
        "--state-dir",
        str(tmp_path / "state"),
        "--config",
        str(config),
        env=environment(tmp_path, mock),
    ) as server:
        tasks = [{"prompt": LOOPS}, {"prompt": LOOPS, "maxTokens": 50}]
        checked = await result_of(server, "preflight", {**spawn, "tasks": tasks})
        assert checked["accepted"], checked
        shown = [child["limits"] for child in checked["plan"]["children"]]
        assert [(limits["maxTokens"], limits["maxCostUsd"]) for limits in shown] == [
            (MAX_TOKENS, 2),
            (50, 2),
        ]
        run = await result_of(server, "spawn", {**spawn, "prompt": LOOPS, "mode": "task"})
        assert run["reachedLimit"] == "max-tokens", run
        await server.finish()
