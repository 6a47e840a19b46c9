"""The orchestrator's harness as a fixture, for every test here that starts runs."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.backends.conftest import processes_with_marker
from tests.runs.test_orchestrator import Harness


@pytest.fixture
async def runs() -> AsyncIterator[Harness]:
    """An orchestrator with real processes; afterwards none of its runs' processes is left."""
    harness = Harness()
    yield harness
    await shut_down(harness)


async def shut_down(harness: Harness) -> None:
    """Shut the harness's orchestrator down; none of its runs' processes may be left."""
    await harness.orchestrator.shutdown("test over")
    left = [p.pid for run in harness.runs for p in processes_with_marker(run.run_id)
            if p.status() != "zombie"]  # fmt: skip
    assert left == [], f"processes left behind: {left}"
