"""A request goes down the layers and its answer comes back without climbing up again.

The server runs under a profiler (tests/fakes/traced_server.py) that looks at
the call stack on every call of a function of the package: a module that
appears twice on one stack was entered again from below — the path from stdin
to a child's argv and back climbed up a layer and came down once more. Every
method that launches, describes or changes a run is driven here, with every
shape of launch, alone, in a batch and cancelled; not one stack may re-enter a
module (each module counts as itself: none stands for another), pygls and
lsprotocol never call into the package (they are leaves it calls), and every
module that ARCHITECTURE.md's path of a request starts with is one the
request went through.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any, Final

from tests.e2e.harness import result_of, running_server, state_args

TESTS: Final = Path(__file__).resolve().parent.parent
TRACED_SERVER: Final = str(TESTS / "fakes" / "traced_server.py")
ARCHITECTURE: Final = TESTS.parent / "ARCHITECTURE.md"

ECHO: Final = {"command": ["echo", "hi"]}
LAUNCHES: Final[dict[str, dict[str, Any]]] = {
    "single": ECHO,
    "tasks": {"tasks": [ECHO, {"command": ["echo", "there"]}]},
    "chain": {"chain": [ECHO, {"command": ["cat"], "prompt": "{previous}"}]},
    "workflow": {
        "workflow": {
            "name": "path",
            "task": "t",
            "chain": [
                {"command": ["echo", "a"], "as": "first"},
                {"parallel": [{"command": ["echo", "{outputs.first}"]}, ECHO]},
                {"forEach": '["x", "y"]', "item": {"command": ["echo", "{item}"]}},
            ],
        }
    },
}


async def test_no_request_climbs_back_into_a_module_it_came_through(tmp_path: Path) -> None:
    report = tmp_path / "reentries.json"
    program = (sys.executable, TRACED_SERVER, str(report))
    async with running_server(*state_args(tmp_path / "state"), program=program) as server:
        for name, launch in LAUNCHES.items():
            checked = await result_of(server, "preflight", launch)
            assert checked["accepted"] is True, (name, checked)
            admitted = {**launch, "mode": "task", "preflightId": checked["preflightId"]}
            run = await result_of(server, "spawn", admitted)
            assert run["status"] == "completed", (name, run)
            await result_of(server, "status", {"runId": run["runId"], "since": 0})
        failed = await result_of(server, "spawn", {"command": ["false"], "mode": "task"})
        approval = await result_of(
            server, "preflight", {"resume": {"runId": failed["runId"], "message": "again"}}
        )
        assert approval["accepted"] is True, approval
        resumed = await result_of(server, "resume", {"token": approval["token"], "mode": "task"})
        assert resumed["children"][0]["attempt"] == 2, resumed
        waiting = await result_of(server, "spawn", {"command": ["sleep", "30"]})
        await result_of(server, "stop", {"runId": waiting["runId"]})
        await result_of(server, "status", {})
        await result_of(server, "agents/list", {})
        await server.send([request(1, "status", {}), request(2, "ping", {})])
        assert sorted(reply["id"] for reply in await server.receive()) == [1, 2]
        await server.send(request("long", "spawn", {"command": ["sleep", "30"], "mode": "task"}))
        await server.send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": "long"}})
        while (cancelled := await server.receive()).get("id") != "long":
            pass
        assert cancelled["error"]["code"] == -32800, cancelled
        assert (await server.finish())[0] == 0
    found = json.loads(report.read_text())
    assert found["reentries"] == [], "\n".join(" > ".join(s) for s in found["reentries"])
    assert found["calledByLibraries"] == [], found["calledByLibraries"]
    assert set(request_path_in_architecture()) - set(found["entered"]) == set()


def request(msg_id: str | int, method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}


def request_path_in_architecture() -> list[str]:
    """The modules step 1 of ARCHITECTURE.md's path of a `spawn` names (stdin to handler)."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    step = text.partition("## The path of a `spawn`")[2].partition("\n2. ")[0]
    names = re.findall(r"\*\*([a-z_/]+)\.py\*\*", step)
    assert names, "ARCHITECTURE.md names no module on the path of a request"
    return ["subagent_host." + name.replace("/", ".") for name in names]
