"""Every string field of every method, sent hostile values over real stdio, and what came back.

Shared by tests/e2e/test_hostile_strings.py (which asserts) and
bench/hostile_strings.py (which prints the figures the README records).

For each field (`FIELDS`) and each value of `HOSTILE` one request is sent; the
small ones go in batches and every frame is pipelined, so the whole attack
takes seconds. What the server must do (protocol.md §3.3): answer each request
exactly once, never `-32603`; a NUL or a lone surrogate is `-32602` naming the
field's path; anything else is `-32602`, the field's documented refusal, or a
success — and a run a success names is still listed by a later server.
"""

from __future__ import annotations

import asyncio
import collections
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

import attrs

from tests.e2e.harness import ServerProcess, result_of, running_server, state_args

SESSION: Final = "hostile"
MIB: Final = 1024 * 1024
HOSTILE: Final[dict[str, str]] = {
    "lone-surrogate": "\ud800",
    "nul": "\x00",
    "control": "\x01\x1b[31m\x7f\t\r",
    "1-mib": "x" * MIB,
}
UNSAFE: Final = frozenset({"lone-surrogate", "nul"})
# The refusals a field may have today besides -32602 (protocol.md §4): not found,
# backend unavailable, launch rejected (diagnostics), resume denied, ambiguous id.
REFUSALS: Final = frozenset({-32001, -32002, -32003, -32004, -32006})
INTERNAL_ERROR: Final = -32603
BATCH_SIZE: Final = 40
ANSWERS_TIMEOUT_S: Final = 60.0
TRUE: Final = ["true"]

Params = dict[str, Any]


@attrs.frozen
class Case:
    method: str
    params: Params
    path: str
    """Where the hostile value is, as a -32602 path names it."""
    value: str
    """Which value of HOSTILE."""


def _key_path(text: str) -> str:
    """An object key as -32602 paths show it (NUL and lone surrogates as \\u escapes)."""
    return "".join(
        f"\\u{ord(c):04x}" if c == "\x00" or 0xD800 <= ord(c) <= 0xDFFF else c for c in text
    )


def _item_fields(value: str, with_as: bool) -> Iterator[tuple[str, Params]]:
    """(path, item) for each string field of an item, the others plain."""
    for name in ("prompt", "agent", "label", "backend", "model", "thinking", "cwd"):
        yield name, {"command": TRUE, name: value}
    if with_as:
        yield "as", {"command": TRUE, "as": value}
    yield "command[0]", {"command": [value]}
    yield "command[1]", {"command": [*TRUE, value]}
    yield "tools[0]", {"command": TRUE, "tools": [value]}
    yield f"env.{_key_path(value)}", {"command": TRUE, "env": {value: "x"}}
    yield "env.HOSTILE", {"command": TRUE, "env": {"HOSTILE": value}}


def _workflow(chain: list[Params], **fields: str) -> Params:
    return {"workflow": {"name": "w", "task": "t", "chain": chain, **fields}}


def _launch_fields(value: str) -> Iterator[tuple[str, Params]]:
    """(path, params) for every string field a launch (spawn, preflight) takes."""
    yield from _item_fields(value, with_as=False)
    for name in ("preflightId", "workDoneToken", "mode"):
        yield name, {"command": TRUE, name: value}
    yield "access.filesystem", {"command": TRUE, "access": {"filesystem": value}}
    yield "requiredLimits[0]", {"command": TRUE, "requiredLimits": [value]}
    for shape in ("tasks", "chain"):
        for path, item in _item_fields(value, with_as=True):
            yield f"{shape}[0].{path}", {shape: [item]}
    for name in ("name", "task", "snapshotPath"):
        yield f"workflow.{name}", _workflow([{"command": TRUE}], **{name: value})
    for path, item in _item_fields(value, with_as=True):
        yield f"workflow.chain[0].{path}", _workflow([item])
        yield f"workflow.chain[0].parallel[0].{path}", _workflow([{"parallel": [item]}])
        yield f"workflow.chain[0].item.{path}", _workflow([{"forEach": "[1]", "item": item}])
    for name in ("as", "label"):
        yield (
            f"workflow.chain[0].{name}",
            _workflow([{"parallel": [{"command": TRUE}], name: value}]),
        )
        yield (
            f"workflow.chain[0].{name}",
            _workflow([{"forEach": "[1]", "item": {"command": TRUE}, name: value}]),
        )
    yield "workflow.chain[0].forEach", _workflow([{"forEach": value, "item": {"command": TRUE}}])


def cases(real_run_id: str) -> list[Case]:
    """One request per string field of every method and hostile value."""
    found: list[Case] = []
    for value_name, value in HOSTILE.items():

        def add(method: str, path: str, params: Params, value_name: str = value_name) -> None:
            found.append(Case(method, params, path, value_name))

        add("ping", "sessionId", {"sessionId": value})
        for path, params in _launch_fields(value):
            add("spawn", path, params)
            add("preflight", path, params)
        add("preflight", "resume.runId", {"resume": {"runId": value, "message": "m"}})
        add("preflight", "resume.message", {"resume": {"runId": real_run_id, "message": value}})
        for name in ("model", "prompt"):
            overrides = {"runId": real_run_id, "message": "m", "overrides": {name: value}}
            add("preflight", f"resume.overrides.{name}", {"resume": overrides})
        add(
            "preflight",
            f"resume.overrides.{_key_path(value)}",
            {"resume": {"runId": real_run_id, "message": "m", "overrides": {value: "x"}}},
        )
        add("status", "runId", {"runId": value})
        add("stop", "runId", {"runId": value})
        add("stop", "reason", {"runId": real_run_id, "reason": value})
        add("resume", "token", {"token": value})
        add("resume", "mode", {"token": "t" * 43, "mode": value})
    return found


@attrs.define
class Report:
    requests: int = 0
    """Requests sent (one per case, plus the run to stop and the final ping)."""
    messages: int = 0
    """JSON texts written: batches count once."""
    wire_bytes: int = 0
    codes: collections.Counter[str] = attrs.Factory(collections.Counter)
    """Answers by outcome: `result` or the error code."""
    internal_errors: int = 0
    problems: list[str] = attrs.Factory(list)
    """Every broken promise, described; empty when all held."""
    runs_named: set[str] = attrs.Factory(set)
    elapsed_s: float = 0.0


def judge(case: Case, reply: dict[str, Any], report: Report) -> None:
    """Check one answer against the promise for its field and value."""
    where = f"{case.method} {case.path} <- {case.value}"
    if "result" in reply:
        report.codes["result"] += 1
        if case.value in UNSAFE:
            report.problems.append(f"{where}: accepted")
        run_id = reply["result"].get("runId") if isinstance(reply["result"], dict) else None
        if case.method == "spawn" and isinstance(run_id, str):
            report.runs_named.add(run_id)
        return
    error = reply["error"]
    code = error["code"]
    report.codes[str(code)] += 1
    if code == INTERNAL_ERROR:
        report.internal_errors += 1
        report.problems.append(f"{where}: -32603 {error['message'][:200]}")
        return
    paths = [entry["path"] for entry in (error.get("data") or {}).get("errors", [])]
    if case.value in UNSAFE:
        if code != -32602 or case.path not in paths:
            report.problems.append(f"{where}: {code} {paths[:3]} {error['message'][:200]}")
    elif code == -32602:
        if not any(_related(path, case.path) for path in paths):
            report.problems.append(f"{where}: -32602 names {paths[:3]}")
    elif code not in REFUSALS:
        report.problems.append(f"{where}: unexpected code {code}")


def _related(path: str, field: str) -> bool:
    """A -32602 path names the field: it is the field, or contains it, or lies inside it."""
    return (
        path == field
        or field.startswith(path + ".")
        or field.startswith(path + "[")
        or (path.startswith(field) and path != "")
    )


async def attack(tmp_path: Path, clock: Callable[[], float]) -> Report:
    """Run the whole attack against one server, then check its runs from a second one."""
    report = Report()
    state = tmp_path / "state"
    workdir = tmp_path / "cwd"  # relative snapshot paths and cwds land here
    workdir.mkdir()
    args = (*state_args(state, SESSION), "--history-limit", "100000")
    started = clock()
    async with running_server(*args, cwd=workdir) as server:
        real = await result_of(server, "spawn", {"command": TRUE, "mode": "task"})
        report.requests += 1
        report.runs_named.add(real["runId"])
        await _send_and_judge(server, cases(real["runId"]), report)
        try:
            code, _ = await server.finish()
        except TimeoutError:
            report.problems.append("the server did not exit once its stdin closed")
        else:
            if code != 0:
                report.problems.append(f"the server exited {code}")
    async with running_server(*args, cwd=workdir) as later:
        listed = {run["runId"] for run in (await result_of(later, "status", {}))["runs"]}
        for run_id in sorted(report.runs_named - listed):
            report.problems.append(f"run {run_id} named by a success is not listed after a restart")
        await later.finish()
    report.elapsed_s = clock() - started
    return report


async def _send_and_judge(server: ServerProcess, all_cases: list[Case], report: Report) -> None:
    by_id = {f"h{index}": case for index, case in enumerate(all_cases)}
    answers: dict[str, list[dict[str, Any]]] = collections.defaultdict(list)
    all_in, done = asyncio.Event(), asyncio.Event()
    sentinel = "after-all"

    async def read() -> None:
        while not done.is_set():
            message = await server.receive()
            for reply in message if isinstance(message, list) else [message]:
                if "id" not in reply:
                    continue  # a notification: run/event, $/progress
                if reply["id"] == sentinel:
                    done.set()
                    continue
                answers[str(reply["id"])].append(reply)
                if len(answers) == len(by_id):
                    all_in.set()

    reader = asyncio.create_task(read())
    small: list[dict[str, Any]] = []
    for msg_id, case in by_id.items():
        request = {"jsonrpc": "2.0", "id": msg_id, "method": case.method, "params": case.params}
        report.requests += 1
        if case.value == "1-mib":  # one a message: a batch of them would pass the size limit
            await _write(server, request, report)
        else:
            small.append(request)
            if len(small) == BATCH_SIZE:
                await _write(server, small, report)
                small = []
    if small:
        await _write(server, small, report)
    # Every answer is in once each id has one; a ping after them catches any second one.
    waiting = asyncio.ensure_future(all_in.wait())
    await asyncio.wait({reader, waiting}, timeout=ANSWERS_TIMEOUT_S, return_when="FIRST_COMPLETED")
    if reader.done():
        waiting.cancel()
        reader.result()  # the reader failed: raise what it raised
    if all_in.is_set():
        await _write(server, {"jsonrpc": "2.0", "id": sentinel, "method": "ping"}, report)
        report.requests += 1
        await asyncio.wait_for(reader, ANSWERS_TIMEOUT_S)
    else:
        reader.cancel()
        waiting.cancel()
        report.problems.append(f"{len(by_id) - len(answers)} requests were never answered")
    for msg_id, case in by_id.items():
        replies = answers.get(msg_id, [])
        if len(replies) != 1:
            report.problems.append(f"{case.method} {case.path}: {len(replies)} answers")
            continue
        judge(case, replies[0], report)


async def _write(server: ServerProcess, message: Any, report: Report) -> None:
    body = json.dumps(message).encode()
    report.messages += 1
    report.wire_bytes += len(body) + 1
    await server.send_raw(body + b"\n")


def summary(report: Report) -> str:
    """One line of figures, for the README."""
    codes = ", ".join(f"{code}: {count}" for code, count in sorted(report.codes.items()))
    return (
        f"hostile strings: {report.requests} requests in {report.messages} messages "
        f"({report.wire_bytes / MIB:.1f} MiB) in {report.elapsed_s:.1f} s; "
        f"-32603: {report.internal_errors}; answers {{{codes}}}; "
        f"runs named by a success: {len(report.runs_named)}, all listed after a restart: "
        f"{not any('not listed' in p for p in report.problems)}"
    )
