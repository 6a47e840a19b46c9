"""A resume may narrow a child's access, never widen it, with the real pinned pi and the mock LLM.

`overrides.access` is intersected with what the launch approved (the stored
projection's `access`): the new attempt keeps only the tools the narrower access
permits, as a spawn with that access would (protocol.md §14.2, §15), and the
contract shows it (its projection's `access` and `tools`, `removedTools`, and so
its digest). An override that widens any member is refused, even beside one that
narrows, and then nothing starts.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Final

import pytest

from tests.e2e.agents import PI_SPAWN
from tests.e2e.harness import result_of
from tests.e2e.resuming import PiServers, first_attempt, needs, resume_with
from tests.e2e.test_resume import (
    assert_nothing_started,
    denied,
    execute,
    observe,
    refused,
)
from tests.mock_llm import MockLLM
from tests.mock_llm.server import RecordedRequest

pytestmark = [pytest.mark.e2e, needs("pi")]
# pi's bash can do everything; its read only reads.
ALL_EFFECTS: Final = ["filesystem-read", "filesystem-write", "network", "process"]


def tool_names(request: RecordedRequest) -> set[str]:
    """The tools pi offered the model in one request."""
    body: Any = request.body_object()
    return {tool["function"]["name"] for tool in body["tools"]}


async def test_a_narrowed_resume_runs_without_the_tools_its_access_removes(
    tmp_path: Path, mock: MockLLM
) -> None:
    async with PiServers(tmp_path, mock).start() as server:
        run = await first_attempt(server, PI_SPAWN)
        assert tool_names(mock.requests[-1]) == {"bash", "read"}
        resume = resume_with(run["runId"], access={"network": False})
        plain = await result_of(server, "preflight", {"resume": resume_with(run["runId"])})
        result = await result_of(server, "preflight", {"resume": resume})
        assert result["accepted"] is True, result
        contract = result["contract"]
        projection = contract["projection"]
        assert projection["access"] == {"filesystem": "write", "process": True, "network": False}
        assert projection["tools"] == [{"name": "read", "effects": ["filesystem-read"]}]
        assert contract["removedTools"] == [
            {"name": "bash", "effects": ALL_EFFECTS, "exceeds": ["network"]}
        ], contract
        assert result["contractDigest"] != plain["contractDigest"]
        resumed = await result_of(server, "resume", {"token": result["token"], "mode": "task"})
        assert (resumed["status"], resumed["children"][0]["attempt"]) == ("completed", 2), resumed
        await server.finish()
    assert tool_names(mock.requests[-1]) == {"read"}  # the narrowed attempt had no shell


async def test_an_access_override_that_widens_anything_is_refused_and_starts_nothing(
    tmp_path: Path, mock: MockLLM
) -> None:
    state = tmp_path / "state"
    async with PiServers(tmp_path, mock).start() as server:
        run = await first_attempt(server, {**PI_SPAWN, "access": {"network": False}})
        run_id = run["runId"]
        widening: list[dict[str, Any]] = [
            {"network": True},
            {"network": True, "filesystem": "read"},  # one member narrows, another widens
            {"process": False, "network": True},
            {"filesystem": "everything"},
            {"shell": False},
            {},
        ]
        for access in widening:
            result = await refused(
                server, resume_with(run_id, access=access), "override-not-allowed"
            )
            assert result["diagnostics"][0]["path"] == "resume.overrides", (access, result)
        # Narrowing what is left still works: read keeps reading.
        narrower = await result_of(
            server, "preflight", {"resume": resume_with(run_id, access={"filesystem": "read"})}
        )
        assert narrower["accepted"] is True, narrower
        # A token whose stored override was widened after it was issued is refused.
        before = await observe(server, run_id)
        mixed = json.dumps({"access": {"filesystem": "read", "network": True}})
        changed = await asyncio.to_thread(
            execute, state, "UPDATE resume_tokens SET overrides = ? WHERE consumed = 0", mixed
        )
        assert changed == 1
        error = await denied(server, narrower["token"])
        assert error["data"]["reason"] == "override-not-allowed", error
        await assert_nothing_started(server, run_id, before)
        await server.finish()
