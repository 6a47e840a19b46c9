"""Params: by name, checked and never coerced (protocol.md §3.3)."""

from __future__ import annotations

from typing import Any

from ..mismatch import Mismatch, short
from ..registry import case, error_of, expect, expect_equal, result_of
from ..trial import Trial


def problems(error: dict[str, Any]) -> list[dict[str, Any]]:
    data = error.get("data")
    errors = data.get("errors") if isinstance(data, dict) else None
    if not isinstance(errors, list) or not all(isinstance(e, dict) for e in errors):
        raise Mismatch("data.errors, a list of {path, message}", short(error))
    return errors


def paths(error: dict[str, Any]) -> list[str]:
    return sorted(str(e.get("path")) for e in problems(error))


@case("params.positional-refused", "§3.3")
async def positional(t: Trial) -> None:
    conn = await t.start()
    arrays: list[list[Any]] = [[None], [{}], ["s-1"]]
    for params in arrays:
        error = error_of(
            await conn.request("ping", params), -32602, f"for positional params {params!r}"
        )
        message = str(error.get("message", ""))
        expect(message.count("params") == 1, "a message that says params once", message)


@case("params.empty-array-is-none", "§3.3")
async def empty_array(t: Trial) -> None:
    conn = await t.start()
    pong = result_of(await conn.request("ping", []), "ping with params []")
    expect_equal(pong.get("pong"), True, "pong")
    result_of(await conn.request("status", []), "status with params []")


@case("params.unknown-field", "§3.3")
async def unknown(t: Trial) -> None:
    conn = await t.start()
    error = error_of(await conn.request("ping", {"colour": "red"}), -32602)
    expect_equal(paths(error), ["colour"], "the problems' paths")


@case("params.every-problem-listed", "§3.3")
async def every(t: Trial) -> None:
    conn = await t.start()
    error = error_of(await conn.request("ping", {"sessionId": 5, "colour": "red"}), -32602)
    expect_equal(paths(error), ["colour", "sessionId"], "the problems' paths")
    expect(all(isinstance(e.get("message"), str) for e in problems(error)), "messages", error)


@case("params.never-coerced", "§3.3")
async def coerced(t: Trial) -> None:
    conn = await t.start()
    for value in ("12", 3.7, True):
        error = error_of(
            await conn.request("spawn", {"command": ["true"], "timeoutMs": value}),
            -32602,
            f"for timeoutMs {value!r}",
        )
        expect_equal(paths(error), ["timeoutMs"], f"the paths for timeoutMs {value!r}")
    for value in (1, "yes"):  # a boolean, or the one string "raw"
        error = error_of(
            await conn.request("spawn", {"command": ["true"], "stream": value}), -32602
        )
        expect_equal(paths(error), ["stream"], f"the paths for stream {value!r}")


@case("params.nested-paths", "§3.3")
async def nested(t: Trial) -> None:
    conn = await t.start()
    params = {"tasks": [{"command": ["true"]}, {"command": ["true"], "timeoutMs": "x"}]}
    error = error_of(await conn.request("spawn", params), -32602)
    expect_equal(paths(error), ["tasks[1].timeoutMs"], "the problems' paths")


@case("params.null-means-omitted", "§3.3")
async def null_omitted(t: Trial) -> None:
    conn = await t.start()
    result_of(await conn.request("ping", {"sessionId": None}), "ping with sessionId null")
    result_of(await conn.request("ping", {}), "ping with {}")
    result_of(await conn.request("ping"), "ping without params")


@case("params.nul-refused-before-anything-runs", "§3.3")
async def nul(t: Trial) -> None:
    conn = await t.start()
    params = {"command": ["touch", str(t.dir / "ran")], "label": "a\u0000b", "mode": "task"}
    error = error_of(await conn.request("spawn", params), -32602)
    expect_equal(paths(error), ["label"], "the problems' paths")
    runs = result_of(await conn.request("status", {}))["runs"]
    expect(runs == [] and not (t.dir / "ran").exists(), "nothing started or recorded", runs)


@case("params.lone-surrogate-refused", "§3.3")
async def surrogate(t: Trial) -> None:
    conn = await t.start()
    body = (
        b'{"jsonrpc":"2.0","id":1,"method":"spawn",'
        b'"params":{"command":["true"],"env":{"A\\ud800":"x"}}}'
    )
    from ..connection import frame

    conn.methods[("int", 1)] = "spawn"
    await conn.send_raw(frame(body, t.framing))
    error = error_of(await conn.reply(1), -32602)
    expect_equal(paths(error), ["env.A\\ud800"], "the path, the key's bad character escaped")
