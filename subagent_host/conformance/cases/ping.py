"""`ping` (protocol.md §5) and the command-line options it reports (§7)."""

from __future__ import annotations

import re

from ..registry import case, error_of, expect, expect_equal, result_of
from ..trial import Trial
from .steps import expect_name_version

METHODS = {"ping", "spawn", "status", "stop", "preflight", "resume", "agents/list"}
LIMITS = {
    "maxConcurrency",
    "maxParallel",
    "graceMs",
    "defaultTimeoutMs",
    "defaultStallTimeoutMs",
    "outputCapBytes",
    "outputCapLines",
    "previousCapBytes",
    "maxMessageBytes",
}


@case("ping.result-shape", "§5")
async def shape(t: Trial) -> None:
    conn = await t.start()
    pong = result_of(await conn.request("ping"))
    expect_equal(pong.get("pong"), True, "pong")
    server = pong.get("server", {})
    expect_name_version(server, "server")
    expect_equal(pong.get("protocolVersion"), "1", "protocolVersion")
    methods = pong.get("methods")
    expect(
        isinstance(methods, list) and methods == sorted(methods) and METHODS <= set(methods),
        f"methods sorted, holding {sorted(METHODS)}",
        methods,
    )
    backends = {b.get("id"): b for b in pong.get("backends", [])}
    expect(backends.get("command", {}).get("available") is True, "command available", backends)
    limits = pong.get("limits", {})
    expect(
        LIMITS <= limits.keys() and all(type(v) is int for v in limits.values()),
        f"integer limits {sorted(LIMITS)}",
        limits,
    )
    expect(pong.get("processTracking") in ("cgroup", "subreaper", "marker"), "a tracking", pong)
    expect(pong.get("persistence") in ("sqlite", "memory"), "persistence", pong)
    expect(
        isinstance(pong.get("admission", {}).get("requirePreflight"), bool),
        "admission {requirePreflight}",
        pong.get("admission"),
    )


@case("ping.default-session-is-fresh-and-kept", "§5")
async def default_session(t: Trial) -> None:
    conn = await t.start()
    first = result_of(await conn.request("ping"))["sessionId"]
    second = result_of(await conn.request("ping"))["sessionId"]
    expect(
        re.fullmatch(r"session-[0-9a-f]{32}", str(first)) is not None,
        "a fresh id 'session-' and 32 hex digits",
        first,
    )
    expect_equal(second, first, "the session of a second ping")


@case("ping.session-binding", "§5")
async def binding(t: Trial) -> None:
    conn = await t.start()
    bound = result_of(await conn.request("ping", {"sessionId": "editor-1"}))
    expect_equal(bound.get("sessionId"), "editor-1", "the session bound")
    expect_equal(result_of(await conn.request("ping")).get("sessionId"), "editor-1", "kept")


@case("ping.invalid-session-id", "§5")
async def bad_session(t: Trial) -> None:
    conn = await t.start()
    for bad in ("", "-leading-dash", "has space", "x" * 129):
        error_of(await conn.request("ping", {"sessionId": bad}), -32602, f"for {bad[:20]!r}")


@case("ping.session-option", "§7")
async def session_option(t: Trial) -> None:
    conn = await t.start("--session", "from-the-command-line")
    pong = result_of(await conn.request("ping"))
    expect_equal(pong.get("sessionId"), "from-the-command-line", "the session of --session")


@case("ping.limits-follow-options", "§7")
async def limits(t: Trial) -> None:
    conn = await t.start(
        "--max-concurrency", "3", "--grace-ms", "1234", "--max-message-bytes", "65536"
    )
    got = result_of(await conn.request("ping")).get("limits", {})
    wanted = {"maxConcurrency": 3, "graceMs": 1234, "maxMessageBytes": 65536}
    expect_equal({k: got.get(k) for k in wanted}, wanted, "limits set on the command line")


@case("ping.require-preflight-reported", "§7")
async def admission(t: Trial) -> None:
    conn = await t.start("--require-preflight")
    pong = result_of(await conn.request("ping"))
    policy = pong.get("admission", {})
    expect_equal(policy.get("requirePreflight"), True, "admission.requirePreflight")


@case("lifecycle.end-of-input-exits-zero", "§6")
async def end_of_input(t: Trial) -> None:
    conn = await t.start()
    await conn.call("ping", None, 1)
    await conn.call("spawn", {"command": ["sleep", "0.2"], "mode": "task"}, 2)
    await conn.close_stdin()
    result_of(await conn.reply(1))
    expect_equal(
        result_of(await conn.reply(2)).get("status"), "completed", "the task read before EOF"
    )
    expect_equal(await conn.wait_exit(t.reply_timeout), 0, "the exit status")


@case("lifecycle.sigterm-cancels-and-exits-zero", "§6")
async def sigterm(t: Trial) -> None:
    import signal

    conn = await t.start()
    await conn.call("spawn", {"command": ["sleep", "30"], "mode": "task"}, 1)
    await conn.first_run_id()
    conn.proc.send_signal(signal.SIGTERM)  # the server this case started
    error = error_of(await conn.reply(1), -32800, "for the task running at SIGTERM")
    expect_equal(error.get("data", {}).get("status"), "cancelled", "the run's status")
    expect_equal(await conn.wait_exit(t.reply_timeout), 0, "the exit status")
