"""Workflows of `command` steps: fan out, gather, templates (protocol.md §17)."""

from __future__ import annotations

import json

from ..registry import case, diagnostic_codes, error_of, expect, expect_equal
from ..trial import Trial
from .steps import expect_status, spawn_task


@case("workflow.fan-out-and-gather", "§17")
async def fan_out(t: Trial) -> None:
    conn = await t.start()
    workflow = {
        "name": "fan",
        "task": "t",
        "chain": [
            {"command": ["printf", '["a","b"]'], "as": "files"},
            {"forEach": "{outputs.files}", "item": {"command": ["echo", "{item}-{index}"]}},
            {"command": ["echo", "{task}:{previous}"]},
        ],
    }
    snapshot = await spawn_task(conn, {"workflow": workflow})
    expect_status(snapshot, "completed")
    expect_equal(snapshot.get("kind"), "workflow", "kind")
    steps = [c.get("step") for c in snapshot.get("children", [])]
    expect_equal(steps, [0, 1, 1, 2], "the children's steps (one per forEach element)")
    text = str(snapshot.get("output", {}).get("text", ""))
    head, _, gathered = text.partition(":")
    try:
        values = json.loads(gathered)
    except ValueError:
        values = None
    expect(
        head == "t" and values == ["a-0", "b-1"],
        'the last step\'s text "t:" and the forEach texts as a JSON array ["a-0", "b-1"]',
        text,
    )


@case("workflow.unfillable-template-refused", "§17")
async def unfillable(t: Trial) -> None:
    conn = await t.start()
    workflow = {"name": "w", "task": "t", "chain": [{"command": ["echo", "{previous}"]}]}
    error = error_of(await conn.request("spawn", {"workflow": workflow}), -32003)
    found = [
        d
        for d in error.get("data", {}).get("diagnostics", [])
        if d.get("code") == "invalid-template"
    ]
    expect(
        bool(found) and found[0].get("path") == "workflow.chain[0].command[1]",
        "invalid-template at workflow.chain[0].command[1]",
        diagnostic_codes(error),
    )
