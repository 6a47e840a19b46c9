"""Runs of the `command` backend: shapes, every terminal status, output caps, the
child's environment, rejections and scheduling (protocol.md §7, §8, §11, §12)."""

from __future__ import annotations

import re
from datetime import datetime

from .. import processes
from ..registry import case, diagnostic_codes, error_of, expect, expect_equal, result_of
from ..trial import PROBE_VALUE, Trial
from .steps import child_running, expect_status, only_child, sh, spawn_background, spawn_task


def millis(stamp: str) -> int:
    expect(
        re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", stamp) is not None,
        "an ISO 8601 UTC timestamp with milliseconds",
        stamp,
    )
    return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() * 1000)


@case("run.task-completed", "§12")
async def completed(t: Trial) -> None:
    conn = await t.start()
    snapshot = await spawn_task(conn, {"command": ["echo", "hello"]})
    expect_status(snapshot, "completed")
    expect_equal(snapshot.get("kind"), "single", "kind")
    child = only_child(snapshot)
    expect_equal(
        {k: child.get(k) for k in ("status", "exitCode", "stoppedBy", "attempt", "backend")},
        {
            "status": "completed",
            "exitCode": 0,
            "stoppedBy": "exit",
            "attempt": 1,
            "backend": "command",
        },
        "the child",
    )
    expect_equal(
        snapshot.get("output"),
        {"text": "hello\n", "truncated": False, "bytes": 6, "lines": 1, "partial": False},
        "the output",
    )
    for item in (snapshot, child):
        expect_equal(
            item.get("durationMs"),
            millis(item["endedAt"]) - millis(item["startedAt"]),
            "durationMs, endedAt - startedAt",
        )
    expect(
        re.fullmatch(r"sha256:v1:[0-9a-f]{64}", str(snapshot.get("fingerprint"))) is not None,
        "a fingerprint 'sha256:v1:' and 64 hex digits",
        snapshot.get("fingerprint"),
    )
    expect_equal(snapshot.get("admittedBy"), "direct", "admittedBy")


@case("run.background-answers-at-once", "§8.1")
async def background(t: Trial) -> None:
    conn = await t.start()
    snapshot = await spawn_background(conn, {"command": ["sleep", "30"]})
    expect(
        snapshot.get("status") in ("queued", "running"),
        "a queued or running snapshot",
        snapshot.get("status"),
    )
    stopped = result_of(await conn.request("stop", {"runId": snapshot["runId"], "graceMs": 0}))
    expect_status(stopped, "cancelled")


@case("run.terminal-event-carries-output", "§11")
async def terminal_event_output(t: Trial) -> None:
    conn = await t.start()
    snapshot = await spawn_background(conn, {"command": sh("echo done; exit 3")})
    ended = await conn.terminal_event(snapshot["runId"])
    final = result_of(await conn.request("status", {"runId": snapshot["runId"]}))
    expect_status(final, "failed")
    expected = {"text": "done\n", "truncated": False, "bytes": 5, "lines": 1, "partial": True}
    expect_equal(final.get("output"), expected, "the snapshot's output")
    expect_equal(ended.get("output"), final.get("output"), "the terminal status event's output")


@case("run.failed-exit-status", "§12")
async def failed(t: Trial) -> None:
    conn = await t.start()
    snapshot = await spawn_task(conn, {"command": sh("echo partial; echo oops >&2; exit 3")})
    expect_status(snapshot, "failed")
    child = only_child(snapshot)
    error = child.get("error", {})
    expect_equal(error.get("code"), "exit-status", "the child's error code")
    expect_equal(error.get("data", {}).get("exitCode"), 3, "error.data.exitCode")
    expect("oops" in error.get("data", {}).get("stderrTail", ""), "stderrTail with 'oops'", error)
    expect_equal(child.get("output", {}).get("partial"), True, "output.partial of a failed child")
    expect(snapshot.get("error", {}).get("code") == "exit-status", "the run's error", snapshot)


@case("run.spawn-failed", "§12")
async def spawn_failed(t: Trial) -> None:
    conn = await t.start()
    snapshot = await spawn_task(conn, {"command": ["/nonexistent/program"]})
    expect_status(snapshot, "failed")
    child = only_child(snapshot)
    expect_equal(child.get("error", {}).get("code"), "spawn-failed", "the child's error code")
    expect("pid" not in child, "no pid for a child that never started", child)


@case("run.timed-out", "§12")
async def timed_out(t: Trial) -> None:
    conn = await t.start()
    snapshot = await spawn_task(conn, {"command": ["sleep", "30"], "timeoutMs": 300})
    expect_status(snapshot, "timed-out")
    expect_equal(snapshot.get("reason"), "timeout", "reason")
    expect_equal(snapshot.get("enforcedTimeoutMs"), 300, "enforcedTimeoutMs")


@case("run.timed-out-by-stall", "§12")
async def stalled(t: Trial) -> None:
    conn = await t.start()
    snapshot = await spawn_task(
        conn, {"command": sh("echo started; exec sleep 30"), "stallTimeoutMs": 300}
    )
    expect_status(snapshot, "timed-out")
    expect_equal(snapshot.get("reason"), "stall", "reason")
    expect_equal(only_child(snapshot).get("output", {}).get("partial"), True, "output.partial")


@case("run.output-capped-by-bytes", "§12")
async def cap_bytes(t: Trial) -> None:
    conn = await t.start()
    # One line of words: a run of one letter would be taken for base64 and redacted (§12.1).
    words = "yes 'lorem ipsum ' | tr -d '\\n' | head -c 100000"
    snapshot = await spawn_task(conn, {"command": sh(words)})
    output = snapshot.get("output", {})
    expect_equal(output.get("bytes"), 100000, "output.bytes (all of it counted)")
    expect_equal(output.get("truncated"), True, "output.truncated")
    text = output.get("text", "")
    expect(
        text.endswith("[output truncated]") and len(text.encode()) <= 49152 + 64,
        "text capped at 48 KiB ending with '[output truncated]'",
        f"{len(text.encode())} bytes ending {text[-40:]!r}",
    )


@case("run.output-capped-by-lines", "§12")
async def cap_lines(t: Trial) -> None:
    conn = await t.start()
    snapshot = await spawn_task(conn, {"command": ["seq", "1000"]})
    output = snapshot.get("output", {})
    expect_equal(output.get("lines"), 1000, "output.lines (all of them counted)")
    expect_equal(output.get("truncated"), True, "output.truncated")
    expect(
        output.get("text", "").count("\n") <= 601,
        "at most 600 lines kept",
        output.get("text", "").count("\n"),
    )


@case("run.prompt-written-to-stdin", "§8.1")
async def prompt(t: Trial) -> None:
    conn = await t.start()
    snapshot = await spawn_task(conn, {"command": ["cat"], "prompt": "hello from stdin"})
    expect_equal(snapshot.get("output", {}).get("text"), "hello from stdin", "the output")


@case("run.stdin-always-closed", "§8.3")
async def stdin_closed(t: Trial) -> None:
    conn = await t.start()
    snapshot = await spawn_task(conn, {"command": ["cat"], "timeoutMs": 10000})
    expect_status(snapshot, "completed")


@case("run.environment-allowlist", "§8.3")
async def environment(t: Trial) -> None:
    conn = await t.start()
    snapshot = await spawn_task(conn, {"command": ["env"], "env": {"GIVEN": "by-the-spawn"}})
    lines = set(snapshot.get("output", {}).get("text", "").splitlines())
    wanted = {
        "GIVEN=by-the-spawn",
        f"SUBAGENT_HOST_RUN_ID={snapshot['runId']}",
        "SUBAGENT_HOST_DEPTH=1",
        "PI_AGENT_LEAF=1",
    }
    expect(wanted <= lines, f"the child's environment to hold {sorted(wanted)}", sorted(lines))
    leaked = [line for line in lines if PROBE_VALUE in line]
    expect(not leaked, "no variable of the server's own beyond the allowlist", leaked)


@case("run.cwd", "§8.1")
async def cwd(t: Trial) -> None:
    conn = await t.start()
    snapshot = await spawn_task(conn, {"command": ["pwd"], "cwd": str(t.dir)})
    expect_equal(
        snapshot.get("output", {}).get("text", "").strip(), str(t.dir.resolve()), "pwd's output"
    )


@case("run.rejected-with-diagnostics", "§8.2")
async def rejected(t: Trial) -> None:
    conn = await t.start()
    error = error_of(
        await conn.request("spawn", {"command": ["true"], "cwd": "/nowhere/at/all"}), -32003
    )
    diagnostics = error.get("data", {}).get("diagnostics", [])
    expect(
        any(
            d.get("code") == "invalid-cwd"
            and d.get("path") == "cwd"
            and d.get("severity") == "error"
            for d in diagnostics
        ),
        "an error diagnostic invalid-cwd at path cwd",
        diagnostics,
    )
    runs = result_of(await conn.request("status", {}))["runs"]
    expect_equal(runs, [], "runs after a rejected spawn")


@case("run.field-not-honoured-rejected", "§8.2")
async def not_honoured(t: Trial) -> None:
    conn = await t.start()
    error = error_of(
        await conn.request("spawn", {"command": ["true"], "model": "some/model"}), -32003
    )
    expect("not-honoured" in diagnostic_codes(error), "diagnostic not-honoured", error)


@case("run.too-many-tasks-rejected", "§8.1")
async def item_count(t: Trial) -> None:
    conn = await t.start()
    tasks = [{"command": ["true"]}] * 9
    error = error_of(await conn.request("spawn", {"tasks": tasks}), -32003)
    expect("item-count" in diagnostic_codes(error), "diagnostic item-count", error)


@case("run.parallel", "§8.1")
async def parallel(t: Trial) -> None:
    conn = await t.start()
    snapshot = await spawn_task(
        conn, {"tasks": [{"command": ["echo", "one"]}, {"command": ["echo", "two"]}]}
    )
    expect_status(snapshot, "completed")
    expect_equal(snapshot.get("kind"), "parallel", "kind")
    children = snapshot.get("children", [])
    expect_equal([c.get("index") for c in children], [0, 1], "the children's indexes")
    text = snapshot.get("output", {}).get("text", "")
    expect("one" in text and "two" in text, "a summary holding each child's text", text)


@case("run.chain-passes-previous", "§8.1")
async def chain(t: Trial) -> None:
    conn = await t.start()
    snapshot = await spawn_task(
        conn,
        {"chain": [{"command": ["echo", "first"]}, {"command": ["cat"], "prompt": "{previous}!"}]},
    )
    expect_status(snapshot, "completed")
    expect_equal(snapshot.get("kind"), "chain", "kind")
    last = snapshot["children"][1].get("output", {}).get("text")
    expect_equal(last, "first\n!", "the second child's output ({previous} filled)")


@case("run.chain-stops-at-first-failure", "§8.1")
async def chain_stops(t: Trial) -> None:
    conn = await t.start()
    marker = t.dir / "second-ran"
    snapshot = await spawn_task(
        conn, {"chain": [{"command": ["false"]}, {"command": ["touch", str(marker)]}]}
    )
    expect_status(snapshot, "failed")
    second = snapshot["children"][1]
    expect(
        second.get("status") != "completed" and "pid" not in second and not marker.exists(),
        "the second child never started",
        second,
    )
    expect_equal(snapshot.get("error", {}).get("data", {}).get("index"), 0, "error.data.index")


@case("run.stream-output-events", "§11")
async def stream(t: Trial) -> None:
    conn = await t.start()
    for value in (True, "raw"):  # a command child streams its output with either
        snapshot = await spawn_task(
            conn, {"command": ["printf", "line one\\nline two\\n"], "stream": value}
        )
        events = conn.events(snapshot["runId"])
        texts = [e.get("text") for e in events if e.get("type") == "output"]
        expect_equal(
            "".join(str(x) for x in texts),
            "line one\nline two\n",
            f"the output events' text with stream {value!r}",
        )


@case("run.stream-stderr-events", "§11")
async def stream_stderr(t: Trial) -> None:
    conn = await t.start()
    # Words, not runs of one letter: long runs are redacted (§12.1).
    script = (
        "printf 'out one\\n'; printf 'err one\\n' >&2; "
        "printf 'out two\\n'; printf 'err two, the last\\n' >&2"
    )
    for value in (True, "raw", None):  # a command child streams its stderr with either
        spawn = {"command": sh(script), **({} if value is None else {"stream": value})}
        snapshot = await spawn_task(conn, spawn)
        events = conn.events(snapshot["runId"])
        texts = {
            kind: "".join(str(e.get("text")) for e in events if e.get("type") == kind)
            for kind in ("output", "stderr")
        }
        if value is None:
            expect_equal(texts, {"output": "", "stderr": ""}, "the events of a run not streamed")
            continue
        expect_equal(
            texts,
            {"output": "out one\nout two\n", "stderr": "err one\nerr two, the last\n"},
            f"the output and stderr events' text with stream {value!r}",
        )


@case("run.events-in-order", "§11")
async def events(t: Trial) -> None:
    conn = await t.start()
    snapshot = await spawn_task(conn, {"command": ["true"]})
    seen = conn.events(snapshot["runId"])
    seqs = [e.get("seq") for e in seen]
    expect_equal(seqs, list(range(1, len(seen) + 1)), "seq from 1, one more per event")
    expect_equal(
        (seen[0].get("type"), seen[0].get("status")), ("status", "queued"), "the first event"
    )
    expect_equal(
        (seen[-1].get("type"), seen[-1].get("status")), ("status", "completed"), "the last event"
    )
    expect_equal(snapshot.get("lastSeq"), seqs[-1], "lastSeq, the newest event's seq")
    child = [e.get("status") for e in seen if e.get("type") == "child"]
    expect_equal(child, ["running", "completed"], "the child events' statuses")


@case("run.queued-behind-concurrency-limit", "§8.4")
async def queued(t: Trial) -> None:
    conn = await t.start("--max-concurrency", "1")
    first = await spawn_background(conn, {"command": ["sleep", "30"]})
    second = await spawn_background(conn, {"command": ["sleep", "30"]})
    await child_running(conn, first["runId"], "the first run's child running")
    now = result_of(await conn.request("status", {"runId": second["runId"]}))
    expect_status(now, "queued")
    expect_equal(only_child(now).get("status"), "queued", "the second run's child")
    for run in (second, first):
        await conn.request("stop", {"runId": run["runId"], "graceMs": 0})


@case("run.leftovers-ended-when-child-exits", "§8.3")
async def leftovers(t: Trial) -> None:
    conn = await t.start()
    pidfile = t.dir / "pids"
    snapshot = await spawn_task(
        conn, {"command": sh(f"sleep 300 & echo $! > {pidfile}; echo done")}
    )
    expect_status(snapshot, "completed")
    words = pidfile.read_text().split() if pidfile.exists() else []
    expect(len(words) == 1, "the child to write its background sleep's pid", words)
    survivor = processes.identify(int(words[0]))
    expect(
        survivor is None or not processes.alive(survivor) or b"sleep" not in survivor_cmd(survivor),
        "the background sleep ended before the run was reported ended",
        f"pid {words[0]} alive",
    )
    resources = only_child(snapshot).get("resources", {})
    expect(resources.get("leftoversEnded", 0) >= 1, "resources.leftoversEnded >= 1", resources)


@case("run.progress-begin-report-end", "§11")
async def progress(t: Trial) -> None:
    conn = await t.start()
    await spawn_task(conn, {"command": ["true"], "workDoneToken": "tok-1"})
    kinds = [
        p.get("value", {}).get("kind")
        for p in conn.notifications("$/progress")
        if p.get("token") == "tok-1"
    ]
    expect(
        kinds[:1] == ["begin"] and kinds[-1:] == ["end"] and set(kinds[1:-1]) <= {"report"},
        "$/progress begin, reports, end under the token",
        kinds,
    )


@case("run.depth-limit-refuses-spawns", "§7")
async def depth(t: Trial) -> None:
    conn = await t.start(env={"SUBAGENT_HOST_DEPTH": "1"})
    error = error_of(await conn.request("spawn", {"command": ["true"]}), -32003)
    expect("max-depth" in diagnostic_codes(error), "diagnostic max-depth", error)


def survivor_cmd(pid: processes.Pid) -> bytes:
    try:
        with open(f"/proc/{pid.pid}/cmdline", "rb") as file:
            return file.read()
    except OSError:
        return b""


@case("run.backend-unavailable", "§8.2")
async def backend_unavailable(t: Trial) -> None:
    # The global configuration file (§19) points pi at a program that does not exist.
    settings = t.config_home / "subagent-host" / "subagents.json"
    settings.parent.mkdir(parents=True)
    settings.write_text('{"backends": {"pi": {"executable": "/nonexistent/pi"}}}')
    conn = await t.start()
    error = error_of(await conn.request("spawn", {"prompt": "hi", "backend": "pi"}), -32002)
    expect_equal(diagnostic_codes(error), ["backend-unavailable"], "the diagnostics")
