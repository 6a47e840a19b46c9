"""The handshake and the wire's edges: `initialize` (an LSP client's own too),
LSP's `shutdown` and `exit`, `_meta` and did-you-mean, a background reply before
its run's events, cancellable `$/progress`, `--max-queue` and -32005, and no
`null` in any reply."""

from __future__ import annotations

from typing import Any

from ..mismatch import Mismatch, short
from ..registry import case, error_of, expect, expect_equal, result_of
from ..trial import Trial
from .steps import child_running, expect_name_version, find_nulls, sh, spawn_background, spawn_task

NEW_LIMITS = {"maxQueue", "workflowParallelism", "maxDepth"}
ACCEPTED = {
    "$/cancelRequest",
    "run/detach",
    "window/workDoneProgress/cancel",
    "initialized",
    "exit",
}
# What vscode-languageclient sends in `initialize` (its capabilities cut short).
LSP_INITIALIZE: dict[str, Any] = {
    "processId": 1234,
    "clientInfo": {"name": "Visual Studio Code", "version": "1.95.0"},
    "locale": "en",
    "rootPath": "/tmp/x",
    "rootUri": "file:///tmp/x",
    "capabilities": {"window": {"workDoneProgress": True}, "general": {"markdown": {}}},
    "trace": "off",
    "workspaceFolders": [{"uri": "file:///tmp/x", "name": "x"}],
}


@case("initialize.result-shape", "§5.1")
async def initialize(t: Trial) -> None:
    conn = await t.start("--session", "init-1")
    result = result_of(
        await conn.request(
            "initialize",
            {"protocolVersion": "1", "clientInfo": {"name": "conformance"}, "capabilities": {}},
        )
    )
    expect_equal(result.get("protocolVersion"), "1", "protocolVersion")
    info = result.get("serverInfo", {})
    expect_name_version(info, "serverInfo")
    expect_equal(result.get("sessionId"), "init-1", "sessionId")
    capabilities = result.get("capabilities", {})
    missing = {"methods", "notifications", "backends", "limits", "features"} - capabilities.keys()
    expect(not missing, "capabilities {methods, notifications, backends, limits, features}", result)
    expect(
        {"ping", "spawn", "initialize", "shutdown"} <= set(capabilities["methods"]),
        "methods listing initialize, ping, shutdown and spawn",
        capabilities["methods"],
    )
    notifications = capabilities["notifications"]
    sent = set(notifications.get("sent", [])) if isinstance(notifications, dict) else set()
    accepted = set(notifications.get("accepted", [])) if isinstance(notifications, dict) else set()
    expect(
        {"run/event", "$/progress"} <= sent and ACCEPTED <= accepted,
        f"notifications {{sent: [$/progress, run/event], accepted: {sorted(ACCEPTED)}}}",
        notifications,
    )
    features = capabilities["features"]
    expect(
        isinstance(features, dict)
        and {"preflight", "resume", "workflows", "agents"} <= features.keys(),
        "features {preflight, resume, workflows, agents, ...}",
        features,
    )
    expect(
        NEW_LIMITS <= capabilities["limits"].keys(),
        f"limits with {sorted(NEW_LIMITS)}",
        capabilities["limits"],
    )


@case("initialize.lsp-client-handshake", "§5.1")
async def lsp_handshake(t: Trial) -> None:
    conn = await t.start()
    result = result_of(await conn.request("initialize", LSP_INITIALIZE), "an LSP initialize")
    expect_equal(result.get("protocolVersion"), "1", "protocolVersion")
    await conn.notify("initialized", {})
    pong = result_of(await conn.request("ping"), "ping after initialized")
    expect_equal(pong.get("pong"), True, "pong")


@case("lifecycle.shutdown-then-exit-status-0", "§6")
async def shutdown_exit(t: Trial) -> None:
    conn = await t.start()
    answer = await conn.request("shutdown")
    expect(
        isinstance(answer, dict) and "result" in answer and answer["result"] is None,
        "shutdown answered with a null result",
        short(answer),
    )
    error_of(await conn.request("ping"), -32600, "for a request after shutdown")
    error_of(await conn.request("shutdown"), -32600, "for a second shutdown")
    await conn.notify("exit")  # stdin stays open: exit alone ends the server
    expect_equal(await conn.wait_exit(t.reply_timeout), 0, "the exit status after shutdown")


@case("lifecycle.exit-without-shutdown-status-1", "§6")
async def exit_alone(t: Trial) -> None:
    conn = await t.start()
    result_of(await conn.request("ping"), "ping")
    await conn.notify("exit")
    expect_equal(await conn.wait_exit(t.reply_timeout), 1, "the exit status without shutdown")


@case("initialize.other-version-not-refused", "§3.7")
async def other_version(t: Trial) -> None:
    conn = await t.start()
    result = result_of(await conn.request("initialize", {"protocolVersion": "999"}))
    expect_equal(result.get("protocolVersion"), "1", "the version the server speaks")


@case("initialize.ping-shows-new-limits", "§5")
async def ping_limits(t: Trial) -> None:
    conn = await t.start()
    limits = result_of(await conn.request("ping")).get("limits", {})
    expect(NEW_LIMITS <= limits.keys(), f"ping's limits with {sorted(NEW_LIMITS)}", limits)


@case("meta.accepted-on-every-method", "§3.7")
async def meta(t: Trial) -> None:
    conn = await t.start()
    run = await spawn_task(conn, {"command": ["true"]})
    meta = {"_meta": {"traceId": "abc"}}
    calls: list[tuple[str, dict[str, Any]]] = [
        ("initialize", {}),
        ("ping", {}),
        ("spawn", {"command": ["true"], "mode": "task"}),
        ("status", {}),
        ("status", {"runId": run["runId"], "since": 0}),
        ("stop", {"runId": run["runId"]}),
        ("preflight", {"command": ["true"]}),
        ("preflight", {"resume": {"runId": run["runId"], "message": "x"}}),
        ("resume", {"token": "rt-never-issued"}),
        ("agents/list", {}),
    ]
    for method, params in calls:
        reply = await conn.request(method, {**params, **meta})
        code = reply.get("error", {}).get("code")
        expect(
            code not in (-32602, -32601),
            f"{method} to accept _meta",
            short(reply),
        )


@case("meta.unknown-field-did-you-mean", "§3.3")
async def did_you_mean(t: Trial) -> None:
    conn = await t.start()
    error = error_of(await conn.request("ping", {"sesionId": "x"}), -32602)
    expect(
        "did you mean" in short(error) and "sessionId" in short(error),
        "a did-you-mean naming sessionId",
        error,
    )


@case("edges.background-reply-before-its-events", "§8.5")
async def reply_first(t: Trial) -> None:
    conn = await t.start()
    msg_id = await conn.call("spawn", {"command": ["true"], "mode": "background"})
    message = await conn.reply(msg_id)
    run_id = result_of(message)["runId"]
    await conn.terminal_event(run_id)
    position = next(i for i, m in enumerate(conn.log) if m is message)
    first_event = next(
        i
        for i, m in enumerate(conn.log)
        if isinstance(m, dict)
        and m.get("method") == "run/event"
        and m.get("params", {}).get("runId") == run_id
    )
    expect(
        position < first_event,
        "the spawn's reply before any run/event of its run",
        f"the reply at position {position}, the first event at {first_event}",
    )


@case("edges.progress-begin-cancellable", "§11")
async def cancellable(t: Trial) -> None:
    conn = await t.start()
    await spawn_task(conn, {"command": ["true"], "workDoneToken": "tok"})
    begins = [
        p.get("value", {})
        for p in conn.notifications("$/progress")
        if p.get("value", {}).get("kind") == "begin"
    ]
    expect(
        len(begins) == 1 and begins[0].get("cancellable") is True,
        "one begin with cancellable: true",
        begins,
    )


@case("edges.work-done-progress-cancel-stops-run", "§11")
async def work_done_cancel(t: Trial) -> None:
    conn = await t.start()
    run = await spawn_background(conn, {"command": sh("exec sleep 60"), "workDoneToken": 7})
    await conn.wait_for(
        lambda m: (
            isinstance(m, dict)
            and m.get("method") == "$/progress"
            and m.get("params", {}).get("value", {}).get("kind") == "begin"
        ),
        "$/progress begin",
    )
    await conn.notify("window/workDoneProgress/cancel", {"token": 7})
    event = await conn.terminal_event(run["runId"])
    expect_equal(event.get("status"), "cancelled", "the run's terminal status")


@case("queue.max-queue-refuses-with-32005", "§8.4")
async def max_queue(t: Trial) -> None:
    conn = await t.start("--max-concurrency", "1", "--max-queue", "1")
    running = await spawn_background(conn, {"command": ["sleep", "60"]})
    await child_running(
        conn, running["runId"], "the first run's child running (the one slot taken)"
    )
    waiting = await spawn_background(conn, {"command": ["sleep", "60"]})
    error = error_of(await conn.request("spawn", {"command": ["true"]}), -32005)
    data = error.get("data", {})
    expect(
        data.get("limit") == 1 and isinstance(data.get("queued"), int) and data["queued"] >= 1,
        "data {queued, limit: 1}",
        error,
    )
    for run in (waiting, running):
        await conn.request("stop", {"runId": run["runId"], "graceMs": 0})


@case("nulls.none-in-any-reply", "§12")
async def no_nulls(t: Trial) -> None:
    conn = await t.start()
    failed = await spawn_task(conn, {"command": sh("exit 3")})
    await conn.request("initialize", {})
    await conn.request("ping")
    await conn.request("status", {})
    await conn.request("status", {"runId": failed["runId"], "since": 0})
    await conn.request("preflight", {"command": ["true"]})
    await conn.request("preflight", {"resume": {"runId": failed["runId"], "message": "again"}})
    await conn.request("stop", {"runId": failed["runId"]})
    await conn.request("agents/list", {})
    for reply in conn.responses():
        body = {k: v for k, v in reply.items() if k != "id"}
        where = find_nulls(body)
        if where:
            raise Mismatch("no null anywhere in a reply", f"null at {', '.join(where[:5])}")
