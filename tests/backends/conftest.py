from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import psutil
import pytest

from subagent_host.backends.supervisor import RUN_MARKER


def processes_with_marker(marker: str) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter():
        try:
            if process.pid != os.getpid() and process.environ().get(RUN_MARKER) == marker:
                found.append(process)
        except psutil.Error:
            continue
    return found


@pytest.fixture
def marker() -> Iterator[str]:
    """A run marker unique to this test; fails the test if any process carrying it survives."""
    value = f"test-{uuid.uuid4().hex}"
    yield value
    left = [p for p in processes_with_marker(value) if p.status() != psutil.STATUS_ZOMBIE]
    for process in left:  # by pid, only what this test started
        process.kill()
    assert left == [], f"processes left behind: {[p.pid for p in left]}"
