"""`preflight` of a launch and its `preflightId` (protocol.md §14)."""

from __future__ import annotations

import re

from ..registry import case, diagnostic_codes, error_of, expect, expect_equal, result_of
from ..trial import Trial
from .steps import spawn_task

LAUNCH = {"command": ["sh", "-c", "cat"], "prompt": "hi", "timeoutMs": 60000}


@case("preflight.accepted-shape", "§14")
async def accepted(t: Trial) -> None:
    conn = await t.start()
    result = result_of(await conn.request("preflight", LAUNCH))
    expect_equal(result.get("accepted"), True, "accepted")
    expect(
        re.fullmatch(r"sha256:v1:[0-9a-f]{64}", str(result.get("fingerprint"))) is not None,
        "a fingerprint",
        result.get("fingerprint"),
    )
    child = result.get("plan", {}).get("children", [{}])[0]
    expect_equal(child.get("argv"), ["sh", "-c", "cat"], "the plan's argv")
    expect_equal(child.get("limits", {}).get("timeoutMs"), 60000, "the plan's timeoutMs")
    expect(str(child.get("promptDigest", "")).startswith("sha256:v1:"), "a promptDigest", child)
    expect_equal(
        result.get("receipts", {}).get("access", {}).get("executionBoundary"),
        "shared-user",
        "receipts.access.executionBoundary",
    )
    expect(
        str(result.get("preflightId", "")) != "" and "expiresAt" in result,
        "a preflightId and expiresAt",
        result,
    )


@case("preflight.starts-nothing", "§14")
async def starts_nothing(t: Trial) -> None:
    conn = await t.start()
    marker = t.dir / "ran"
    result_of(await conn.request("preflight", {"command": ["touch", str(marker)]}))
    runs = result_of(await conn.request("status", {})).get("runs")
    expect(runs == [] and not marker.exists(), "no run and no process", runs)
    expect(not conn.notifications("run/event"), "no run/event", conn.notifications("run/event"))


@case("preflight.rejected-launch-is-a-result", "§14")
async def rejected(t: Trial) -> None:
    conn = await t.start()
    result = result_of(await conn.request("preflight", {"command": ["true"], "cwd": "/nowhere"}))
    expect_equal(result.get("accepted"), False, "accepted")
    expect("invalid-cwd" in diagnostic_codes(result), "diagnostic invalid-cwd", result)
    expect("preflightId" not in result, "no preflightId", result)


@case("preflight.executable-not-found", "§14")
async def not_found(t: Trial) -> None:
    conn = await t.start()
    result = result_of(await conn.request("preflight", {"command": ["no-such-program-xyz"]}))
    expect_equal(result.get("accepted"), False, "accepted")
    expect("executable-not-found" in diagnostic_codes(result), "executable-not-found", result)


@case("preflight.fingerprint-matches-spawn", "§14.1")
async def fingerprint(t: Trial) -> None:
    conn = await t.start()
    planned = result_of(await conn.request("preflight", LAUNCH))["fingerprint"]
    relabelled = result_of(
        await conn.request(
            "preflight", {**LAUNCH, "label": "other", "mode": "task", "stream": True}
        )
    )["fingerprint"]
    expect_equal(relabelled, planned, "the fingerprint with another label, mode and stream")
    changed = result_of(await conn.request("preflight", {**LAUNCH, "timeoutMs": 60001}))
    expect(changed["fingerprint"] != planned, "another fingerprint for another limit", changed)
    ran = await spawn_task(conn, LAUNCH)
    expect_equal(ran.get("fingerprint"), planned, "the run's fingerprint")


@case("preflight.id-admits-one-spawn", "§14.3")
async def admits_once(t: Trial) -> None:
    conn = await t.start()
    preflight_id = result_of(await conn.request("preflight", LAUNCH))["preflightId"]
    ran = await spawn_task(conn, {**LAUNCH, "preflightId": preflight_id})
    expect_equal(ran.get("admittedBy"), "preflight", "admittedBy")
    error = error_of(
        await conn.request("spawn", {**LAUNCH, "preflightId": preflight_id}), -32003, "reused"
    )
    expect_equal(diagnostic_codes(error), ["preflight-consumed"], "the diagnostics")


@case("preflight.id-mismatch", "§14.3")
async def mismatch(t: Trial) -> None:
    conn = await t.start()
    preflight_id = result_of(await conn.request("preflight", LAUNCH))["preflightId"]
    error = error_of(
        await conn.request("spawn", {**LAUNCH, "timeoutMs": 1000, "preflightId": preflight_id}),
        -32003,
    )
    expect_equal(diagnostic_codes(error), ["preflight-mismatch"], "the diagnostics")
    expect(
        str(error.get("data", {}).get("fingerprint", "")).startswith("sha256:v1:"),
        "data.fingerprint, the spawn's",
        error,
    )


@case("preflight.unknown-id", "§14.3")
async def unknown_id(t: Trial) -> None:
    conn = await t.start()
    error = error_of(
        await conn.request("spawn", {**LAUNCH, "preflightId": "pf-not-issued"}), -32003
    )
    expect_equal(diagnostic_codes(error), ["unknown-preflight"], "the diagnostics")


@case("preflight.required-by-admission-policy", "§14.3")
async def required(t: Trial) -> None:
    conn = await t.start("--require-preflight")
    error = error_of(await conn.request("spawn", LAUNCH), -32003, "for a spawn without an id")
    found = [
        d
        for d in error.get("data", {}).get("diagnostics", [])
        if d.get("code") == "preflight-required"
    ]
    expect(
        len(found) == 1 and found[0].get("path") == "preflightId",
        "diagnostic preflight-required at path preflightId",
        error,
    )
    preflight_id = result_of(await conn.request("preflight", LAUNCH))["preflightId"]
    ran = await spawn_task(conn, {**LAUNCH, "preflightId": preflight_id})
    expect_equal(ran.get("admittedBy"), "preflight", "admittedBy")


@case("preflight.required-limits", "§14.2")
async def required_limits(t: Trial) -> None:
    conn = await t.start()
    offered = result_of(
        await conn.request("preflight", {**LAUNCH, "requiredLimits": ["timeoutMs"]})
    )
    expect_equal(offered.get("accepted"), True, "accepted with timeoutMs required")
    limit = [lim for lim in offered["receipts"]["limits"] if lim.get("name") == "timeoutMs"]
    expect_equal(limit[0].get("enforcement") if limit else None, "host-hard", "its enforcement")
    refused = result_of(await conn.request("preflight", {**LAUNCH, "requiredLimits": ["maxTurns"]}))
    expect_equal(refused.get("accepted"), False, "accepted with maxTurns required")
    expect("limit-not-offered" in diagnostic_codes(refused), "limit-not-offered", refused)


@case("preflight.access-not-enforceable-for-command", "§14.2")
async def access(t: Trial) -> None:
    conn = await t.start()
    result = result_of(await conn.request("preflight", {**LAUNCH, "access": {"network": False}}))
    expect_equal(result.get("accepted"), False, "accepted")
    expect("access-not-enforceable" in diagnostic_codes(result), "access-not-enforceable", result)
