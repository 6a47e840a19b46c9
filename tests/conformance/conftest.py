"""Every harness run a test starts leaves no process behind: not the harness, not the
servers it started, not their children."""

from __future__ import annotations

from collections.abc import AsyncIterator

import psutil
import pytest

from tests.waits import still_running


@pytest.fixture(autouse=True)
async def nothing_left_behind() -> AsyncIterator[None]:
    yield
    left = psutil.Process().children(recursive=True)
    survivors = await still_running(left, 10.0)
    for pid in survivors:
        psutil.Process(pid).kill()  # by pid: a descendant of this test
    assert survivors == [], f"processes left behind: {survivors}"
