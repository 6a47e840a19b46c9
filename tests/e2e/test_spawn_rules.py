"""Rules of `spawn` over real stdio that held without a test of their own: an item's
fields override the call's, `tasks` takes at most 8 items, a child's share of a parallel
summary is capped at 12 KiB, numbers in a plan are integers, and `durationMs` is
`endedAt - startedAt`."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Final

from tests.e2e.harness import (
    error_of,
    reply_to,
    result_of,
    running_server,
    state_args,
)

LAUNCH_REJECTED: Final = -32003
INVALID_PARAMS: Final = -32602
# Prints its FOO and its working directory.
SHOW: Final = ["sh", "-c", 'printf "%s %s" "$FOO" "$PWD"']


def directories(tmp_path: Path) -> tuple[Path, Path]:
    call, item = tmp_path / "call", tmp_path / "item"
    call.mkdir()
    item.mkdir()
    return call.resolve(), item.resolve()


def limits_of(checked: dict[str, Any]) -> list[dict[str, int]]:
    return [child["limits"] for child in checked["plan"]["children"]]


async def test_an_items_fields_override_the_calls_in_tasks_and_chain(tmp_path: Path) -> None:
    call_dir, item_dir = directories(tmp_path)
    call = {
        "cwd": str(call_dir), "env": {"FOO": "call", "BAR": "b"},
        "timeoutMs": 60_000, "stallTimeoutMs": 50_000, "mode": "task",
    }  # fmt: skip
    items = [
        {"command": SHOW},
        {"command": SHOW, "cwd": str(item_dir), "env": {"FOO": "item"}, "timeoutMs": 30_000},
    ]
    async with running_server(*state_args(tmp_path / "state")) as server:
        for shape in ("tasks", "chain"):
            checked = await result_of(server, "preflight", {**call, shape: items})
            assert limits_of(checked) == [
                {"timeoutMs": 60_000, "stallTimeoutMs": 50_000},
                {"timeoutMs": 30_000, "stallTimeoutMs": 50_000},
            ], shape
            # env maps are merged, the item's value winning: both children have BAR.
            assert [c["envKeys"] for c in checked["plan"]["children"]] == [["BAR", "FOO"]] * 2
            run = await result_of(server, "spawn", {**call, shape: items})
            assert [c["output"]["text"] for c in run["children"]] == [
                f"call {call_dir}",
                f"item {item_dir}",
            ], shape
        await server.finish()


async def test_tasks_take_at_most_eight_items(tmp_path: Path) -> None:
    item = {"command": ["true"]}
    async with running_server(*state_args(tmp_path / "state")) as server:
        eight = await result_of(server, "spawn", {"tasks": [item] * 8, "mode": "task"})
        assert eight["status"] == "completed" and len(eight["children"]) == 8
        nine = await error_of(server, "spawn", {"tasks": [item] * 9})
        assert nine["code"] == LAUNCH_REJECTED
        [diagnostic] = nine["data"]["diagnostics"]
        assert (diagnostic["code"], diagnostic["path"]) == ("item-count", "tasks")
        assert diagnostic["message"] == "tasks takes 1 to 8 items, not 9"
        checked = await result_of(server, "preflight", {"tasks": [item] * 9})
        assert checked["accepted"] is False
        await server.finish()


async def test_a_childs_part_of_a_parallel_summary_is_capped_at_12_kib(tmp_path: Path) -> None:
    loud = {"command": ["python3", "-c", "print('x' * 20480)"], "label": "loud"}
    quiet = {"command": ["echo", "quiet"]}
    async with running_server(*state_args(tmp_path / "state")) as server:
        # `redact: false`: a line of 20480 `x`s would be redacted (protocol.md §12.1).
        spawn = {"tasks": [loud, quiet], "mode": "task", "redact": False}
        run = await result_of(server, "spawn", spawn)
        first = run["children"][0]["output"]
        assert (first["bytes"], first["lines"], first["truncated"]) == (20481, 1, True)
        assert first["text"] == "x" * 12 * 1024 + "\n[output truncated]"
        assert run["output"]["text"] == (
            "[0] loud completed\n" + "x" * 12 * 1024 + "\n[output truncated]\n\n"
            "[1] completed\nquiet\n"
        )
        assert run["output"]["truncated"] is True
        await server.finish()


async def test_a_plan_holds_integers_only(tmp_path: Path) -> None:
    launch = {"command": ["true"]}
    async with running_server(*state_args(tmp_path / "state")) as server:
        for number in (60000.0, -0.0, 1.5):
            error = await error_of(server, "preflight", {**launch, "timeoutMs": number})
            assert error["code"] == INVALID_PARAMS, (number, error)
        # -0 is the integer 0, refused as a duration like 0 itself.
        reply = await reply_to(server, "preflight", {**launch, "stallTimeoutMs": -0})
        assert [(d["code"], d["path"]) for d in reply["result"]["diagnostics"]] == [
            ("invalid-duration", "stallTimeoutMs")
        ]
        await server.finish()


def parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def elapsed_ms(item: dict[str, Any]) -> int:
    return (parse(item["endedAt"]) - parse(item["startedAt"])) // timedelta(milliseconds=1)


async def test_duration_ms_is_ended_at_minus_started_at_once_ended(tmp_path: Path) -> None:
    waits = {"command": ["sleep", "300"]}
    tasks = [waits, {"command": ["sleep", "0.2"]}]
    async with running_server(*state_args(tmp_path / "state")) as server:
        # Both start at once (slots are free): the first runs until it is stopped.
        run = await result_of(server, "spawn", {"tasks": tasks})
        going = await result_of(server, "status", {"runId": run["runId"]})
        assert going["status"] == "running" and "durationMs" not in going
        assert going["children"][0]["status"] == "running"
        assert "durationMs" not in going["children"][0]
        ended = await result_of(server, "stop", {"runId": run["runId"], "graceMs": 1000})
        assert ended["status"] == "cancelled"
        for item in (ended, *ended["children"]):
            assert item["durationMs"] == elapsed_ms(item), item
        await server.finish()
