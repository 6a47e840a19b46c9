"""What the launch-check tests share: the backends, and the server-wide limits."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from subagent_host.backends.base import Backend
from subagent_host.backends.claude import ClaudeBackend
from subagent_host.backends.command import CommandBackend
from subagent_host.backends.pi import PiBackend
from subagent_host.runs.plans import ServerLimits

LIMITS: Final = ServerLimits(
    output_cap_bytes=49152, output_cap_lines=600, previous_cap_bytes=65536,
    max_concurrency=4, max_depth=1,
)  # fmt: skip


@pytest.fixture
def backends(tmp_path: Path) -> dict[str, Backend]:
    """pi and claude as programs that exist in `bin/` (the children's PATH below)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("pi", "claude"):
        (bin_dir / name).write_text("#!/bin/sh\n")
        (bin_dir / name).chmod(0o755)
    return {
        "command": CommandBackend(),
        "pi": PiBackend(session_dir=tmp_path),
        "claude": ClaudeBackend(),
    }
