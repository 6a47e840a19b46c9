"""`preflight` for launches over real stdio: what it accepts, what it seals, what it binds.

A preflight starts nothing: it answers the normalized plan, its fingerprint and
receipts, or `accepted: false` with error diagnostics (a result, never an
error). An accepted preflight's `preflightId` binds one `spawn` of this session,
before it expires, to exactly the plan it showed (protocol.md §14, §4 -32003).
"""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from tests.e2e.harness import (
    EXIT_TIMEOUT_S,
    ServerProcess,
    error_of,
    reply_to,
    result_of,
    running_server,
    state_args,
)

FINGERPRINT: Final = re.compile(r"sha256:v1:[0-9a-f]{64}")
LAUNCH_REJECTED: Final = -32003
# The shortest lifetime the server accepts (`--resume-token-ttl-ms`, protocol.md: >= 1000).
SHORTEST_TTL_MS: Final = 1000
POLL_INTERVAL_S: Final = 0.02


# --- helpers (test_resume.py uses them too) ------------------------------------------


async def run_list(server: ServerProcess) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = (await result_of(server, "status", {}))["runs"]
    return runs


def parse_time(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


async def wait_until_past(stamp: str) -> None:
    """Wait (bounded) until the wall clock is past an `expiresAt` (shown to the millisecond)."""
    deadline = parse_time(stamp) + timedelta(milliseconds=5)
    async with asyncio.timeout(EXIT_TIMEOUT_S):
        while True:  # nothing to await: only the clock moves
            left = (deadline - datetime.now(UTC)).total_seconds()
            if left <= 0:
                return
            await asyncio.sleep(min(left, POLL_INTERVAL_S))


def real_path(path: Path) -> str:
    return str(path.resolve())


def error_codes(result: dict[str, Any]) -> list[str]:
    return [d["code"] for d in result["diagnostics"] if d["severity"] == "error"]


def rejection_codes(error: dict[str, Any]) -> list[str]:
    assert error["code"] == LAUNCH_REJECTED, error
    return [d["code"] for d in error["data"]["diagnostics"]]


def limit(result: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(x for x in result["receipts"]["limits"] if x["name"] == name)
    return found


# --- what a preflight answers ----------------------------------------------------------


async def test_an_accepted_preflight_shows_plan_fingerprint_receipts_and_starts_nothing(
    tmp_path: Path,
) -> None:
    request = {
        "command": ["sh", "-c", "cat"],
        "prompt": "hello",
        "cwd": str(tmp_path),
        "env": {"SECRET_NAME": "secret-value-42"},
        "timeoutMs": 45_000,
        "stallTimeoutMs": 30_000,
    }
    async with running_server(*state_args(tmp_path / "state")) as server:
        result = await result_of(server, "preflight", request)
        assert result["accepted"] is True, result
        assert error_codes(result) == []
        assert FINGERPRINT.fullmatch(result["fingerprint"]), result["fingerprint"]
        assert isinstance(result["preflightId"], str) and result["preflightId"]
        assert parse_time(result["expiresAt"]) > datetime.now(UTC)

        plan = result["plan"]
        assert plan["kind"] == "single" and len(plan["children"]) == 1
        child = plan["children"][0]
        assert {"index", "backend", "argv", "cwd", "tools", "envKeys", "limits"} <= child.keys()
        assert (child["index"], child["backend"]) == (0, "command")
        assert child["argv"] == ["sh", "-c", "cat"]
        assert child["cwd"] == real_path(tmp_path)
        assert child["envKeys"] == ["SECRET_NAME"]
        assert FINGERPRINT.fullmatch(child["promptDigest"]), child
        assert child["limits"] == {"timeoutMs": 45_000, "stallTimeoutMs": 30_000}
        assert "secret-value-42" not in str(result)  # env values are never shown

        access = result["receipts"]["access"]
        assert access["executionBoundary"] == "shared-user"
        assert [c["index"] for c in access["children"]] == [0]
        timeout = limit(result, "timeoutMs")
        assert (timeout["value"], timeout["enforcement"]) == (45_000, "host-hard")
        assert timeout["how"]
        for item in result["receipts"]["limits"]:
            assert item["enforcement"] in ("host-hard", "best-effort"), item

        assert await run_list(server) == []  # a preflight starts no run
        await server.finish()


REJECTED_LAUNCHES: Final[dict[str, tuple[dict[str, Any], str]]] = {
    "empty command": ({"command": []}, "empty-command"),
    "two shapes": ({"command": ["true"], "tasks": [{"command": ["true"]}]}, "invalid-shape"),
    "bad cwd": ({"command": ["true"], "cwd": "/nonexistent/subagent-host-e2e"}, "invalid-cwd"),
    "missing executable": ({"command": ["no-such-program-e2e-4711"]}, "executable-not-found"),
    "missing executable by path": (
        {"command": ["/nonexistent/subagent-host-e2e/prog"]},
        "executable-not-found",
    ),
    "missing executable in a task": (
        {"tasks": [{"command": ["true"]}, {"command": ["no-such-program-e2e-4711"]}]},
        "executable-not-found",
    ),
}


async def test_a_rejected_launch_is_a_result_with_an_error_diagnostic_and_no_id(
    tmp_path: Path,
) -> None:
    async with running_server(*state_args(tmp_path / "state")) as server:
        for name, (request, code) in REJECTED_LAUNCHES.items():
            reply = await reply_to(server, "preflight", request)
            assert "error" not in reply, (name, reply)
            result = reply["result"]
            assert result["accepted"] is False, (name, result)
            assert code in error_codes(result), (name, result)
            for diagnostic in result["diagnostics"]:
                assert diagnostic["severity"] in ("error", "warning", "info"), name
                assert diagnostic["message"], name
            assert "preflightId" not in result and "expiresAt" not in result, (name, result)
        assert await run_list(server) == []
        await server.finish()


async def test_required_limits_and_access_are_checked(tmp_path: Path) -> None:
    async with running_server(*state_args(tmp_path / "state")) as server:
        hard = await result_of(
            server, "preflight", {"command": ["true"], "requiredLimits": ["timeoutMs"]}
        )
        assert hard["accepted"] is True and hard["preflightId"], hard
        assert limit(hard, "timeoutMs")["enforcement"] == "host-hard"

        made_up = await result_of(
            server, "preflight", {"command": ["true"], "requiredLimits": ["madeUpLimit"]}
        )
        assert made_up["accepted"] is False and "preflightId" not in made_up, made_up
        assert error_codes(made_up) == ["limit-not-offered"]
        assert made_up["diagnostics"][0]["path"] == "requiredLimits[0]"

        read_only = await result_of(
            server, "preflight", {"command": ["true"], "access": {"filesystem": "read"}}
        )
        assert read_only["accepted"] is False and "preflightId" not in read_only, read_only
        assert "access-not-enforceable" in error_codes(read_only)
        assert read_only["receipts"]["access"]["executionBoundary"] == "shared-user"

        # spawn refuses what preflight refuses, with the same diagnostic.
        spawned = await error_of(
            server, "spawn", {"command": ["true"], "requiredLimits": ["madeUpLimit"]}
        )
        assert rejection_codes(spawned) == ["limit-not-offered"]
        assert await run_list(server) == []
        await server.finish()


# --- fingerprints ----------------------------------------------------------------------


async def test_a_fingerprint_is_stable_across_requests_and_server_restarts(
    tmp_path: Path,
) -> None:
    request = {
        "tasks": [
            {"command": ["sh", "-c", "cat"], "prompt": "one", "timeoutMs": 5000},
            {"command": ["echo", "two"], "env": {"K": "v"}},
        ],
        "cwd": str(tmp_path),
    }
    state = tmp_path / "state"
    async with running_server(*state_args(state)) as server:
        first = await result_of(server, "preflight", request)
        second = await result_of(server, "preflight", request)
        assert first["accepted"] and second["accepted"]
        assert first["fingerprint"] == second["fingerprint"]
        assert first["plan"] == second["plan"]
        assert first["preflightId"] != second["preflightId"]  # each approval is its own
        await server.finish()
    async with running_server(*state_args(state)) as server:
        third = await result_of(server, "preflight", request)
        assert third["fingerprint"] == first["fingerprint"]
        assert third["plan"] == first["plan"]
        # An approval is kept with the state: this session may use it after a restart.
        run = await result_of(
            server, "spawn", {**request, "preflightId": first["preflightId"], "mode": "task"}
        )
        assert run["status"] == "completed" and run["fingerprint"] == first["fingerprint"], run
        await server.finish()


async def test_a_fingerprint_follows_the_plan_and_only_the_plan(tmp_path: Path) -> None:
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    base: dict[str, Any] = {
        "command": ["sh", "-c", "cat"],
        "prompt": "p",
        "cwd": str(tmp_path),
        "timeoutMs": 60_000,
        "env": {"K": "v"},
    }
    changes_the_plan = {
        "argv": {**base, "command": ["sh", "-c", "cat; true"]},
        "cwd": {**base, "cwd": str(other_dir)},
        "timeoutMs": {**base, "timeoutMs": 60_001},
        "stallTimeoutMs": {**base, "stallTimeoutMs": 1000},
        "prompt": {**base, "prompt": "q"},
        "env key renamed": {**base, "env": {"K2": "v"}},
        "env key added": {**base, "env": {"K": "v", "L": "w"}},
        "no prompt": {key: value for key, value in base.items() if key != "prompt"},
        "shape": {  # the same one child, as a parallel run
            **{key: value for key, value in base.items() if key not in ("command", "prompt")},
            "tasks": [{"command": ["sh", "-c", "cat"], "prompt": "p"}],
        },
    }
    # protocol.md: the fingerprint covers the resolved plan, environment values left out;
    # the plan (plans.normalized_plan) has no label, mode or stream either.
    keeps_the_plan = {
        "env value": {**base, "env": {"K": "another value"}},
        "label": {**base, "label": "named"},
        "mode": {**base, "mode": "task"},
        "stream": {**base, "stream": True},
        "all access, spelled out": {
            **base,
            "access": {"filesystem": "write", "process": True, "network": True},
        },
    }
    async with running_server(*state_args(tmp_path / "state")) as server:
        reference = await result_of(server, "preflight", base)
        assert reference["accepted"], reference
        seen = {reference["fingerprint"]: "base"}
        for name, request in changes_the_plan.items():
            result = await result_of(server, "preflight", request)
            assert result["accepted"], (name, result)
            assert result["fingerprint"] not in seen, (name, seen.get(result["fingerprint"]))
            seen[result["fingerprint"]] = name
        for name, request in keeps_the_plan.items():
            result = await result_of(server, "preflight", request)
            assert result["accepted"], (name, result)
            assert result["fingerprint"] == reference["fingerprint"], name
            assert result["plan"] == reference["plan"], name
        await server.finish()


# --- preflightId binds one spawn -------------------------------------------------------


async def test_a_preflight_id_admits_exactly_its_plan_once(tmp_path: Path) -> None:
    request = {"command": ["sh", "-c", "cat"], "prompt": "approved", "cwd": str(tmp_path)}
    async with running_server(*state_args(tmp_path / "state")) as server:
        approved = await result_of(server, "preflight", request)
        assert approved["accepted"], approved
        preflight_id = approved["preflightId"]

        other = {**request, "prompt": "something else", "preflightId": preflight_id}
        mismatch = await error_of(server, "spawn", other)
        assert rejection_codes(mismatch) == ["preflight-mismatch"]
        assert mismatch["data"]["diagnostics"][0]["path"] == "preflightId"
        assert await run_list(server) == []  # no run was created

        run = await result_of(server, "spawn", {**request, "preflightId": preflight_id,
                                                "mode": "task"})  # fmt: skip
        assert run["status"] == "completed" and run["output"]["text"] == "approved", run
        assert run["fingerprint"] == approved["fingerprint"]
        runs = await run_list(server)
        assert [r["runId"] for r in runs] == [run["runId"]]

        replay = await error_of(server, "spawn", {**request, "preflightId": preflight_id})
        assert rejection_codes(replay) == ["preflight-consumed"]
        assert await run_list(server) == runs
        await server.finish()


async def test_a_spawn_without_a_preflight_has_the_fingerprint_preflight_shows(
    tmp_path: Path,
) -> None:
    request = {"chain": [{"command": ["echo", "a"]}, {"command": ["cat"], "prompt": "{previous}"}]}
    async with running_server(*state_args(tmp_path / "state")) as server:
        shown = await result_of(server, "preflight", request)
        assert shown["accepted"] and shown["plan"]["kind"] == "chain", shown
        run = await result_of(server, "spawn", {**request, "mode": "task"})
        assert run["status"] == "completed", run
        assert run["fingerprint"] == shown["fingerprint"]
        await server.finish()


async def test_an_expired_preflight_id_is_refused(tmp_path: Path) -> None:
    request = {"command": ["true"]}
    ttl = str(SHORTEST_TTL_MS)
    async with running_server(
        *state_args(tmp_path / "state", "s1", "--resume-token-ttl-ms", ttl)
    ) as server:
        approved = await result_of(server, "preflight", request)
        assert approved["accepted"], approved
        issued = datetime.now(UTC)
        assert parse_time(approved["expiresAt"]) <= issued + timedelta(milliseconds=SHORTEST_TTL_MS)
        await wait_until_past(approved["expiresAt"])
        expired = await error_of(
            server, "spawn", {**request, "preflightId": approved["preflightId"]}
        )
        assert rejection_codes(expired) == ["preflight-expired"]
        # Saving a newer approval prunes expired ones: the old id stays refused (now unknown).
        assert (await result_of(server, "preflight", request))["accepted"]
        pruned = await error_of(
            server, "spawn", {**request, "preflightId": approved["preflightId"]}
        )
        assert rejection_codes(pruned)[0] in ("preflight-expired", "unknown-preflight"), pruned
        assert await run_list(server) == []
        await server.finish()


async def test_a_preflight_id_of_another_session_is_unknown(tmp_path: Path) -> None:
    state = tmp_path / "state"
    request = {"command": ["true"]}
    async with running_server(*state_args(state, "s1")) as first:
        approved = await result_of(first, "preflight", request)
        assert approved["accepted"], approved
        async with running_server(*state_args(state, "s2")) as second:
            foreign = await error_of(
                second, "spawn", {**request, "preflightId": approved["preflightId"]}
            )
            assert rejection_codes(foreign) == ["unknown-preflight"]
            made_up = await error_of(second, "spawn", {**request, "preflightId": "pf-made-up"})
            assert rejection_codes(made_up) == ["unknown-preflight"]
            assert await run_list(second) == []
            await second.finish()
        # The foreign attempt did not use the approval up: its own session still can.
        run = await result_of(
            first, "spawn", {**request, "preflightId": approved["preflightId"], "mode": "task"}
        )
        assert run["status"] == "completed" and run["fingerprint"] == approved["fingerprint"]
        await first.finish()
