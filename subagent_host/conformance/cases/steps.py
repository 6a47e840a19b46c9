"""Small steps many cases share."""

from __future__ import annotations

from typing import Any

from ..connection import Connection
from ..mismatch import Mismatch, short
from ..registry import case, error_of, expect
from ..trial import Trial

PING = {"jsonrpc": "2.0", "id": "probe", "method": "ping"}


async def still_serving(conn: Connection, msg_id: Any = "still-serving") -> None:
    """The server answers a ping after whatever came before (it kept reading)."""
    reply = await conn.request("ping", None, msg_id)
    expect("result" in reply, "the server to go on answering (a ping)", reply)


async def spawn_task(conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
    """A `task`-mode spawn's final snapshot."""
    snapshot: dict[str, Any] = await conn.result("spawn", {**params, "mode": "task"})
    return snapshot


async def spawn_background(conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
    snapshot: dict[str, Any] = await conn.result("spawn", {**params, "mode": "background"})
    return snapshot


async def wait_terminal(conn: Connection, run_id: str, within: float = 20.0) -> dict[str, Any]:
    """The run's snapshot once its terminal event has arrived."""
    await conn.terminal_event(run_id, within)
    snapshot: dict[str, Any] = await conn.result("status", {"runId": run_id})
    return snapshot


def only_child(snapshot: dict[str, Any]) -> dict[str, Any]:
    children = snapshot.get("children")
    if not isinstance(children, list) or len(children) != 1:
        raise Mismatch("a snapshot with one child", short(snapshot))
    child: dict[str, Any] = children[0]
    return child


def expect_status(snapshot: dict[str, Any], status: str) -> None:
    expect(
        snapshot.get("status") == status,
        f"status {status!r}",
        f"{snapshot.get('status')!r} in {short(snapshot, 400)}",
    )


async def child_running(conn: Connection, run_id: str, what: str) -> None:
    """Wait for the `run/event` that says the run's child is running."""
    await conn.wait_for(
        lambda m: (
            isinstance(m, dict)
            and m.get("method") == "run/event"
            and m["params"].get("runId") == run_id
            and m["params"].get("type") == "child"
            and m["params"].get("status") == "running"
        ),
        what,
    )


def expect_name_version(info: Any, what: str) -> None:
    """`serverInfo` and `ping`'s `server`: a name and a version, both strings."""
    expect(
        isinstance(info, dict)
        and isinstance(info.get("name"), str)
        and isinstance(info.get("version"), str),
        f"{what} {{name, version}}",
        info,
    )


def unknown_run_case(method: str, section: str) -> None:
    """Register `METHOD.unknown-run`: `method` names a run this session does not have, and
    is answered -32001."""

    async def unknown_run(t: Trial) -> None:
        conn = await t.start()
        error_of(await conn.request(method, {"runId": "0123456789abcdef"}), -32001)

    case(f"{method}.unknown-run", section)(unknown_run)


def sh(script: str) -> list[str]:
    return ["sh", "-c", script]


def find_nulls(value: Any, path: str = "") -> list[str]:
    """Where `null` appears in a value (§12: absent fields are omitted, never null)."""
    if value is None:
        return [path or "(root)"]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in find_nulls(v, f"{path}.{k}" if path else k)]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in find_nulls(v, f"{path}[{i}]")]
    return []
