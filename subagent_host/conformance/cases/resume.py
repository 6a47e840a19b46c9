"""Protected resume: `preflight {resume}` then `resume {token}` (protocol.md §15)."""

from __future__ import annotations

from typing import Any

from ..connection import Connection
from ..registry import case, diagnostic_codes, error_of, expect, expect_equal, result_of
from ..trial import Trial
from .steps import expect_status, only_child, sh, spawn_background, spawn_task

FAILING = {"command": sh("cat; exit 3"), "prompt": "first try"}


async def failed_run(conn: Connection) -> dict[str, Any]:
    snapshot = await spawn_task(conn, FAILING)
    expect_status(snapshot, "failed")
    return snapshot


async def token_for(conn: Connection, run_id: str, **extra: Any) -> dict[str, Any]:
    result = result_of(
        await conn.request(
            "preflight", {"resume": {"runId": run_id, "message": "again, please", **extra}}
        )
    )
    expect_equal(result.get("accepted"), True, "the resume preflight accepted")
    approved: dict[str, Any] = result
    return approved


@case("resume.runs-the-next-attempt", "§15")
async def full_cycle(t: Trial) -> None:
    conn = await t.start()
    run = await failed_run(conn)
    approved = await token_for(conn, run["runId"][:8])
    contract = approved.get("contract", {})
    expect_equal((contract.get("index"), contract.get("attempt")), (0, 2), "the contract's target")
    for key in ("contractDigest", "followUpDigest"):
        expect(str(approved.get(key, "")).startswith("sha256:v1:"), key, approved)
    resumed = result_of(await conn.request("resume", {"token": approved["token"], "mode": "task"}))
    child = only_child(resumed)
    expect_equal(child.get("attempt"), 2, "the child's attempt")
    expect_equal(child.get("output", {}).get("text"), "first try\nagain, please", "the output")


@case("resume.token-single-use", "§15")
async def single_use(t: Trial) -> None:
    conn = await t.start()
    run = await failed_run(conn)
    token = (await token_for(conn, run["runId"]))["token"]
    result_of(await conn.request("resume", {"token": token, "mode": "task"}))
    error = error_of(await conn.request("resume", {"token": token}), -32004, "reused")
    expect_equal(error.get("data", {}).get("reason"), "consumed", "data.reason")


@case("resume.unknown-token", "§15")
async def unknown(t: Trial) -> None:
    conn = await t.start()
    error = error_of(await conn.request("resume", {"token": "rt-never-issued"}), -32004)
    expect_equal(error.get("data", {}).get("reason"), "unknown-token", "data.reason")


@case("resume.wrong-session", "§15")
async def wrong_session(t: Trial) -> None:
    conn = await t.start("--session", "one")
    run = await failed_run(conn)
    token = (await token_for(conn, run["runId"]))["token"]
    result_of(await conn.request("ping", {"sessionId": "two"}))
    error = error_of(await conn.request("resume", {"token": token}), -32004)
    expect_equal(error.get("data", {}).get("reason"), "wrong-session", "data.reason")


@case("resume.refused-while-running", "§15")
async def still_running(t: Trial) -> None:
    conn = await t.start()
    run = await spawn_background(conn, {"command": ["sleep", "300"]})
    result = result_of(
        await conn.request("preflight", {"resume": {"runId": run["runId"], "message": "x"}})
    )
    expect_equal(result.get("accepted"), False, "accepted")
    expect("still-running" in diagnostic_codes(result), "still-running", result)
    expect("token" not in result, "no token", result)
    await conn.request("stop", {"runId": run["runId"], "graceMs": 0})


@case("resume.raising-a-limit-refused", "§15")
async def raise_limit(t: Trial) -> None:
    conn = await t.start()
    run = await spawn_task(conn, {**FAILING, "timeoutMs": 60000})
    result = result_of(
        await conn.request(
            "preflight",
            {"resume": {"runId": run["runId"], "message": "x", "overrides": {"timeoutMs": 120000}}},
        )
    )
    expect_equal(result.get("accepted"), False, "accepted")
    expect("override-not-allowed" in diagnostic_codes(result), "override-not-allowed", result)
    lowered = await token_for(conn, run["runId"], overrides={"timeoutMs": 30000})
    expect_equal(
        lowered.get("contract", {}).get("projection", {}).get("limits", {}).get("timeoutMs"),
        30000,
        "the lowered limit in the contract",
    )


@case("resume.invalid-index", "§15")
async def invalid_index(t: Trial) -> None:
    conn = await t.start()
    run = await failed_run(conn)
    result = result_of(
        await conn.request(
            "preflight", {"resume": {"runId": run["runId"], "message": "x", "index": 5}}
        )
    )
    expect_equal(result.get("accepted"), False, "accepted")
    expect("invalid-index" in diagnostic_codes(result), "invalid-index", result)


@case("resume.unknown-run", "§15")
async def unknown_run(t: Trial) -> None:
    conn = await t.start()
    error_of(
        await conn.request("preflight", {"resume": {"runId": "0123456789abcdef", "message": "x"}}),
        -32001,
    )
