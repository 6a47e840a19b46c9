"""An agent CLI that printed its final event but does not exit is ended, and its run is
still reported by that event (a stand-in for pi, named in a `--config` file)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.e2e.harness import running_server
from tests.e2e.test_runs import call
from tests.test_settings import EVENTS


async def test_an_agent_lingering_after_its_final_event_is_ended_and_completed(
    tmp_path: Path,
) -> None:
    script = tmp_path / "lingering-pi"
    lines = "".join(f"echo '{json.dumps(event)}'\n" for event in EVENTS)
    # Prints its whole answer, then keeps running (and keeps a child) as a hung CLI would.
    # Answers `--version` as a CLI does (a spawn records the version of its program).
    script.write_text(
        '#!/bin/sh\n[ "$1" = --version ] && { echo 1.0.0; exit 0; }\n'
        f"cat > /dev/null\n{lines}sleep 300 &\nsleep 300\n"
    )
    script.chmod(0o755)
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"backends": {"pi": {"executable": str(script)}}}))
    args = ("--state-dir", str(tmp_path / "state"), "--config", str(config))
    async with running_server(*args) as server:
        reply, _ = await call(server, "spawn", {"backend": "pi", "prompt": "hi", "mode": "task"})
        run = reply["result"]
        assert run["status"] == "completed", run
        assert run["children"][0]["output"]["text"] == "from the configured pi"
        await server.finish()
    # running_server proved that neither sleep survived.
