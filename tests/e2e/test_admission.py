"""The admission policy over real stdio: with `--require-preflight` (or `require_preflight`
in a configuration file) only a spawn carrying a valid `preflightId` runs, `ping` says so,
and every run records how it was admitted (`admittedBy`), across resumes and restarts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

from tests.e2e.harness import (
    ServerProcess,
    error_of,
    result_of,
    running_server,
    state_args,
)

LAUNCH_REJECTED: Final = -32003
SPAWN: Final = {"command": ["sh", "-c", "cat; exit 3"], "prompt": "hi", "mode": "task"}


def diagnostics(error: dict[str, Any]) -> list[tuple[str, str]]:
    return [(d["code"], d["path"]) for d in error["data"]["diagnostics"]]


async def approved(server: ServerProcess, params: dict[str, Any]) -> str:
    checked = await result_of(server, "preflight", params)
    assert checked["accepted"], checked
    preflight_id: str = checked["preflightId"]
    return preflight_id


async def test_a_required_preflight_refuses_a_spawn_without_a_valid_id_and_admits_one_with(
    tmp_path: Path,
) -> None:
    async with running_server(*state_args(tmp_path / "state"), "--require-preflight") as server:
        pong = await result_of(server, "ping", {})
        assert pong["admission"] == {"requirePreflight": True, "requireEgressConsent": False}

        refused = await error_of(server, "spawn", SPAWN)
        assert refused["code"] == LAUNCH_REJECTED
        assert diagnostics(refused) == [("preflight-required", "preflightId")]
        # Other problems are listed with it, all at once.
        both = await error_of(server, "spawn", {**SPAWN, "timeoutMs": 0})
        assert sorted(diagnostics(both)) == [
            ("invalid-duration", "timeoutMs"),
            ("preflight-required", "preflightId"),
        ]

        preflight_id = await approved(server, SPAWN)
        run = await result_of(server, "spawn", {**SPAWN, "preflightId": preflight_id})
        assert (run["status"], run["admittedBy"]) == ("failed", "preflight")
        consumed = await error_of(server, "spawn", {**SPAWN, "preflightId": preflight_id})
        assert diagnostics(consumed) == [("preflight-consumed", "preflightId")]
        unknown = await error_of(server, "spawn", {**SPAWN, "preflightId": "pf-nothing"})
        assert diagnostics(unknown) == [("unknown-preflight", "preflightId")]

        # A resume needs its own single-use token, and keeps how its run was admitted.
        approval = await result_of(
            server, "preflight", {"resume": {"runId": run["runId"], "message": "again"}}
        )
        resumed = await result_of(server, "resume", {"token": approval["token"], "mode": "task"})
        assert resumed["children"][0]["attempt"] == 2
        assert resumed["admittedBy"] == "preflight"
        await server.finish()


async def test_admitted_by_is_sent_for_every_run_and_survives_a_restart(tmp_path: Path) -> None:
    state = state_args(tmp_path / "state")
    async with running_server(*state) as server:
        pong = await result_of(server, "ping", {})
        assert pong["admission"] == {"requirePreflight": False, "requireEgressConsent": False}
        direct = await result_of(server, "spawn", SPAWN)
        assert direct["admittedBy"] == "direct"
        preflight_id = await approved(server, SPAWN)
        checked = await result_of(server, "spawn", {**SPAWN, "preflightId": preflight_id})
        assert checked["admittedBy"] == "preflight"
        await server.finish()
    async with running_server(*state) as server:
        for run, admitted_by in ((direct, "direct"), (checked, "preflight")):
            again = await result_of(server, "status", {"runId": run["runId"]})
            assert again["admittedBy"] == admitted_by
        await server.finish()


async def test_require_preflight_in_a_configuration_file_is_the_policy_and_the_option_wins(
    tmp_path: Path,
) -> None:
    config = tmp_path / "subagents.json"
    config.write_text(json.dumps({"require_preflight": True}))
    state = (*state_args(tmp_path / "state"), "--config", str(config))
    async with running_server(*state) as server:
        pong = await result_of(server, "ping", {})
        assert pong["admission"] == {"requirePreflight": True, "requireEgressConsent": False}
        refused = await error_of(server, "spawn", SPAWN)
        assert diagnostics(refused) == [("preflight-required", "preflightId")]
        await server.finish()
    async with running_server(*state, "--no-require-preflight") as server:
        pong = await result_of(server, "ping", {})
        assert pong["admission"] == {"requirePreflight": False, "requireEgressConsent": False}
        run = await result_of(server, "spawn", SPAWN)
        assert run["admittedBy"] == "direct"
        await server.finish()
