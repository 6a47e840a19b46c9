"""The edges of the wire a client builds on: what it is told first, and LSP's cancel.

A `background` spawn or resume is answered before any notification of the run it
starts, so a client never meets a run id it has not been given; a `task`-mode
spawn streams its events before its final reply. `$/progress` `begin` says
`cancellable: true`, and `window/workDoneProgress/cancel {token}` stops the run
behind the token as `stop` does, leaving no process behind; a token no live run
of the session reports under is ignored, and nothing is ever answered.
"""

from __future__ import annotations

import asyncio
import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import pytest

from tests.e2e.harness import (
    EXIT_TIMEOUT_S,
    TERMINAL,
    FramingName,
    ServerProcess,
    error_of,
    marked_processes,
    result_of,
    running_server,
    state_args,
)

FRAMINGS: Final[list[FramingName]] = ["ndjson", "lsp"]
FAKES: Final = Path(__file__).resolve().parent.parent / "fakes"
TREE: Final = [sys.executable, str(FAKES / "tree.py"), "6"]
RUN_MARKER: Final = "SUBAGENT_HOST_RUN_ID"
CANCEL: Final = "window/workDoneProgress/cancel"
# Enough fast children for their events to race their replies on every run.
FAST_SPAWNS: Final = 40
WORKFLOW: Final = {
    "name": "order",
    "task": "t",
    "chain": [
        {"command": ["echo", "a"]},
        {"parallel": [{"command": ["true"]}, {"command": ["echo", "c"]}]},
    ],
}


def run_of(message: dict[str, Any], token_runs: dict[Any, str]) -> str | None:
    """The run a notification is about: `run/event`'s runId, `$/progress`'s token's run."""
    params = message.get("params", {})
    if message.get("method") == "run/event":
        run_id: str = params["runId"]
        return run_id
    if message.get("method") == "$/progress":
        return token_runs.get(params["token"], f"token {params['token']!r}")
    return None


async def read_until(
    server: ServerProcess, seen: list[dict[str, Any]], done: Callable[[], bool]
) -> None:
    """Read messages into `seen` until `done()` (bounded)."""
    async with asyncio.timeout(EXIT_TIMEOUT_S):
        while not done():
            seen.append(await server.receive())


def ended_runs(seen: list[dict[str, Any]]) -> set[str]:
    return {
        m["params"]["runId"]
        for m in seen
        if m.get("method") == "run/event"
        and m["params"]["type"] == "status"
        and m["params"]["status"] in TERMINAL
    }


def has_ended(seen: list[dict[str, Any]], run_id: str) -> bool:
    return run_id in ended_runs(seen)


# --- replies first -----------------------------------------------------------------------


@pytest.mark.parametrize("framing", FRAMINGS)
async def test_every_background_spawn_is_answered_before_any_notification_of_its_run(
    tmp_path: Path, framing: FramingName
) -> None:
    spawns: dict[int, dict[str, Any]] = {}
    for i in range(FAST_SPAWNS):
        command = ["true"] if i % 2 else ["echo", f"run {i}"]
        spawns[i] = {"command": command, "mode": "background", "stream": i % 3 == 0}
        if i % 4 == 0:
            spawns[i]["workDoneToken"] = f"t{i}"
    spawns[FAST_SPAWNS] = {"workflow": WORKFLOW, "mode": "background", "workDoneToken": 7}
    task_id = FAST_SPAWNS + 1
    spawns[task_id] = {"command": ["echo", "task"], "mode": "task", "workDoneToken": "task"}
    token_of = {i: p["workDoneToken"] for i, p in spawns.items() if "workDoneToken" in p}

    async with running_server(*state_args(tmp_path / "state"), framing=framing) as server:
        for msg_id, params in spawns.items():  # pipelined: no reply awaited in between
            await server.send({"jsonrpc": "2.0", "id": msg_id, "method": "spawn", "params": params})
        seen: list[dict[str, Any]] = []

        def all_ended() -> bool:
            replies = [m for m in seen if "id" in m]
            return len(replies) == len(spawns) and ended_runs(seen) >= {
                r["result"]["runId"] for r in replies
            }

        await read_until(server, seen, all_ended)
        replies = {m["id"]: m for m in seen if "id" in m}
        run_ids = {i: reply["result"]["runId"] for i, reply in replies.items()}
        token_runs = {token: run_ids[i] for i, token in token_of.items()}

        told: set[str] = set()
        first_note_of: dict[str, int] = {}
        reply_at: dict[str, int] = {}
        for position, message in enumerate(seen):
            if "id" in message:
                told.add(message["result"]["runId"])
                reply_at[message["result"]["runId"]] = position
            elif (run_id := run_of(message, token_runs)) is not None:
                first_note_of.setdefault(run_id, position)
                if run_id != run_ids[task_id]:
                    assert run_id in told, f"{message} came before the reply naming its run"
        # The task-mode spawn streamed its whole run before its final reply.
        task_run = run_ids[task_id]
        assert first_note_of[task_run] < reply_at[task_run]
        task_notes = [m for m in seen[: reply_at[task_run]] if run_of(m, token_runs) == task_run]
        assert (
            task_notes[-1]["method"] == "$/progress"
            and task_notes[-1]["params"]["value"]["kind"] == "end"
        )
        # Held, never lost: every run's events arrived, each run's in seq order from 1.
        for run_id in run_ids.values():
            seqs = [
                m["params"]["seq"]
                for m in seen
                if m.get("method") == "run/event" and m["params"]["runId"] == run_id
            ]
            assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) >= 3, (run_id, seqs)
        assert (await server.finish())[0] == 0


@pytest.mark.parametrize("framing", FRAMINGS)
async def test_a_background_resume_is_answered_before_the_new_attempts_events(
    tmp_path: Path, framing: FramingName
) -> None:
    async with running_server(*state_args(tmp_path / "state"), framing=framing) as server:
        failed = await result_of(
            server,
            "spawn",
            {"command": ["sh", "-c", "cat; exit 3"], "prompt": "hi", "mode": "task"},
        )
        assert failed["status"] == "failed", failed
        run_id, last_seq = failed["runId"], failed["lastSeq"]
        for attempt in range(2, 5):  # several times: the race it replaces was usually won
            approval = await result_of(
                server, "preflight", {"resume": {"runId": run_id, "message": f"try {attempt}"}}
            )
            await server.send(
                {
                    "jsonrpc": "2.0",
                    "id": attempt,
                    "method": "resume",
                    "params": {"token": approval["token"], "mode": "background"},
                }
            )
            seen: list[dict[str, Any]] = []
            await read_until(server, seen, functools.partial(has_ended, seen, run_id))
            [reply_at] = [i for i, m in enumerate(seen) if m.get("id") == attempt]
            events = [i for i, m in enumerate(seen) if m.get("method") == "run/event"]
            assert events and reply_at < min(events), seen
            assert seen[reply_at]["result"]["children"][0]["attempt"] == attempt
            assert seen[min(events)]["params"]["seq"] == last_seq + 1
            last_seq = max(seen[i]["params"]["seq"] for i in events)
        assert (await server.finish())[0] == 0


# --- window/workDoneProgress/cancel -------------------------------------------------------


async def spawn_tree(server: ServerProcess, token: Any) -> tuple[str, list[dict[str, Any]]]:
    """A background tree reporting progress under `token`, once all its processes exist."""
    run = await result_of(
        server,
        "spawn",
        {"command": TREE, "stream": True, "mode": "background", "workDoneToken": token},
    )
    seen: list[dict[str, Any]] = []

    def ready() -> bool:
        return any(
            m.get("method") == "run/event"
            and m["params"]["runId"] == run["runId"]
            and "ready" in m["params"].get("text", "")
            for m in seen
        )

    await read_until(server, seen, ready)
    return run["runId"], seen


async def cancel(server: ServerProcess, token: Any) -> None:
    await server.send({"jsonrpc": "2.0", "method": CANCEL, "params": {"token": token}})


@pytest.mark.parametrize("framing", FRAMINGS)
async def test_cancelling_a_progress_token_stops_its_run_and_leaves_no_process(
    tmp_path: Path, framing: FramingName
) -> None:
    async with running_server(*state_args(tmp_path / "state"), framing=framing) as server:
        run_id, seen = await spawn_tree(server, "tree")
        progress = [m["params"] for m in seen if m.get("method") == "$/progress"]
        assert progress, seen  # its begin follows the reply
        begin = progress[0]
        assert begin["token"] == "tree" and begin["value"]["kind"] == "begin"
        assert begin["value"]["cancellable"] is True
        assert len(await asyncio.to_thread(marked_processes, {run_id})) == 6

        await cancel(server, "tree")
        await read_until(
            server,
            seen,
            lambda: (
                seen[-1].get("method") == "$/progress"
                and seen[-1]["params"]["value"]["kind"] == "end"
            ),
        )
        assert run_id in ended_runs(seen)
        assert seen[-1]["params"] == {
            "token": "tree",
            "value": {"kind": "end", "message": f"run {run_id} cancelled"},
        }
        snapshot = await result_of(server, "status", {"runId": run_id})
        assert snapshot["status"] == "cancelled" and "cancel" in snapshot["reason"], snapshot
        assert snapshot["children"][0]["stoppedBy"] == "sigterm", snapshot
        assert await asyncio.to_thread(marked_processes, {run_id}) == []
        assert not [m for m in seen if "id" in m]  # the notification was never answered
        code, rest = await server.finish()
        assert code == 0 and not [m for m in rest if "id" in m or "error" in m], rest


@pytest.mark.parametrize("framing", FRAMINGS)
async def test_a_cancel_for_no_live_run_of_the_session_is_ignored_and_never_answered(
    tmp_path: Path, framing: FramingName
) -> None:
    async with running_server(*state_args(tmp_path / "state"), framing=framing) as server:
        ended = await result_of(
            server, "spawn", {"command": ["true"], "mode": "task", "workDoneToken": "done"}
        )
        assert ended["status"] == "completed"
        run_id, _ = await spawn_tree(server, 5)
        other, seen = await spawn_tree(server, "other")
        for token in ("unknown", "5", "done", 6):  # "5" is not 5; "done" has ended
            await cancel(server, token)
        await server.send({"jsonrpc": "2.0", "method": CANCEL, "params": {"token": [5]}})
        await server.send({"jsonrpc": "2.0", "method": CANCEL})
        # The right token, from the connection once bound to another session: not its run.
        await result_of(server, "ping", {"sessionId": "s2"})
        await cancel(server, 5)
        await result_of(server, "ping", {"sessionId": "s1"})
        as_request = await error_of(server, CANCEL, {"token": 5})  # a notification only
        assert as_request["code"] == -32601, as_request
        # Notifications are taken in order: once this one has stopped its run, each
        # cancel before it has been dealt with (a stop's reason is set as it begins).
        await cancel(server, "other")
        await read_until(server, seen, lambda: other in ended_runs(seen))

        snapshot = await result_of(server, "status", {"runId": run_id})
        assert snapshot["status"] == "running", snapshot
        assert len(await asyncio.to_thread(marked_processes, {run_id})) == 6
        stopped = await result_of(server, "stop", {"runId": run_id})
        assert (stopped["status"], stopped["reason"]) == ("cancelled", "stopped by the client")
        assert stopped["alreadyTerminal"] is False
        assert await asyncio.to_thread(marked_processes, {run_id, other}) == []
        assert not [m for m in seen if "id" in m or "error" in m], seen
        code, rest = await server.finish()
        assert code == 0 and not [m for m in rest if "id" in m], rest
    assert "Traceback" not in server.stderr_text
