"""`placement` over real stdio: the local executor runs every child here, so it refuses one.

A spawn (or a preflight, or one item of `tasks`) that asks where on a cluster a child
must run is refused before anything starts, with a diagnostic naming the field and
the option that would honour it (protocol.md §8.8).
"""

from __future__ import annotations

from tests.e2e.harness import error_of, result_of, running_server
from tests.e2e.test_preflight import error_codes, rejection_codes

PLACED = {"resources": {"gpu": 1}, "nodeId": "abc123", "labels": {"zone": "a"}}


async def test_placement_is_refused_at_preflight_and_spawn_when_children_run_locally() -> None:
    async with running_server() as server:
        launch = {"command": ["true"], "placement": PLACED}
        result = await result_of(server, "preflight", launch)
        assert result["accepted"] is False, result
        assert error_codes(result) == ["placement-not-supported"], result
        assert result["diagnostics"][0]["path"] == "placement"
        assert "--executor ray" in result["diagnostics"][0]["message"]

        error = await error_of(server, "spawn", launch)
        assert rejection_codes(error) == ["placement-not-supported"]

        items = {"tasks": [{"command": ["true"]}, {"command": ["true"], "placement": PLACED}]}
        error = await error_of(server, "spawn", items)
        assert [(d["code"], d["path"]) for d in error["data"]["diagnostics"]] == [
            ("placement-not-supported", "tasks[1].placement")
        ]
        await server.finish()


async def test_a_malformed_placement_is_invalid_params_naming_each_member() -> None:
    async with running_server() as server:
        placement = {"node": "abc123", "resources": {"gpu": "1"}}
        error = await error_of(server, "spawn", {"command": ["true"], "placement": placement})
        assert error["code"] == -32602, error
        assert error["data"]["errors"] == [
            {"path": "placement.resources[gpu]", "message": "expected a number, got a string"},
            {"path": "placement.node", "message": "unknown field (did you mean nodeId?)"},
        ]
        await server.finish()
