"""`--config` files: which program each agent backend runs, and warnings, never a stop."""

from __future__ import annotations

import json
from pathlib import Path

from subagent_host.settings import backend_executables
from tests.e2e.harness import running_server
from tests.e2e.test_runs import call

FINAL = {
    "type": "message_end",
    "message": {
        "role": "assistant",
        "content": [{"type": "text", "text": "from the configured pi"}],
        "stopReason": "stop",
        "usage": {"input": 3, "output": 4},
    },
}
EVENTS = ({"type": "session", "id": "fake-session"}, {"type": "agent_start"}, FINAL,
          {"type": "agent_end"})  # fmt: skip
# A stand-in for pi: reads its prompt, prints pi's events.
FAKE_PI = "#!/bin/sh\ncat > /dev/null\n" + "".join(
    f"echo '{json.dumps(event)}'\n" for event in EVENTS
)


def write(path: Path, value: object) -> Path:
    path.write_text(json.dumps(value) if not isinstance(value, str) else value)
    return path


def test_executables_are_read_per_backend(tmp_path: Path) -> None:
    config = write(tmp_path / "c.json", {"backends": {"pi": {"executable": "/opt/pi"}}})
    assert backend_executables(config) == ({"pi": "/opt/pi"}, [])
    assert backend_executables(None) == ({}, [])
    assert backend_executables(write(tmp_path / "e.json", {})) == ({}, [])


def test_each_problem_is_a_warning_naming_file_and_field(tmp_path: Path) -> None:
    config = write(
        tmp_path / "c.json",
        {"backends": {"pi": {"executable": ""}, "nope": {}, "codex": {"executable": "codex2"}}},
    )
    found, warnings = backend_executables(config)
    assert found == {"codex": "codex2"}
    assert len(warnings) == 2 and all(str(config) in w for w in warnings)
    assert any("backends.pi.executable" in w for w in warnings)
    assert any("backends.nope" in w for w in warnings)
    for bad in ("{not json", "[1]", json.dumps({"backends": 3})):
        assert backend_executables(write(tmp_path / "b.json", bad))[1]


async def test_a_configured_executable_is_what_the_backend_runs(tmp_path: Path) -> None:
    fake = write(tmp_path / "my-pi", FAKE_PI)
    fake.chmod(0o755)
    config = write(tmp_path / "c.json", {"backends": {"pi": {"executable": str(fake)}}})
    args = ("--state-dir", str(tmp_path / "state"), "--config", str(config))
    async with running_server(*args) as server:
        reply, _ = await call(server, "spawn", {"backend": "pi", "prompt": "hi", "mode": "task"})
        child = reply["result"]["children"][0]
        assert reply["result"]["status"] == "completed", reply
        assert child["output"]["text"] == "from the configured pi"
        assert child["backendSessionId"] == "fake-session"
        await server.finish()
