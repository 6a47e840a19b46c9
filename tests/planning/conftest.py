"""What the launch-check tests share: the backends, and the server-wide limits."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import pytest

from subagent_host.backends.base import Backend
from subagent_host.backends.claude import ClaudeBackend
from subagent_host.backends.command import CommandBackend
from subagent_host.backends.pi import PiBackend
from subagent_host.planning import views
from subagent_host.planning.check import CheckedSpawn, check_spawn
from subagent_host.planning.items import AgentSources
from subagent_host.planning.plan import ServerLimits
from subagent_host.rpc.wire import SpawnParams, make_converter

LIMITS: Final = ServerLimits(
    output_cap_bytes=49152, output_cap_lines=600, previous_cap_bytes=65536,
    max_concurrency=4, max_depth=1,
)  # fmt: skip
CONVERTER: Final = make_converter()


def check_request(
    backends: dict[str, Backend],
    tmp_path: Path,
    sources: AgentSources | None = None,
    **request: Any,
) -> CheckedSpawn:
    """Check a spawn request as the server would, with `bin/` as the children's PATH."""
    params = CONVERTER.structure({"env": {"PATH": str(tmp_path / "bin")}, **request}, SpawnParams)
    return check_spawn(
        params,
        backends=backends,
        limits=LIMITS,
        depth=0,
        server_cwd=str(tmp_path),
        sources=sources,
    )


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


def to_json(view: object) -> dict[str, Any]:
    """`views.to_json`, its members read as Any: a test reaches into nested members
    without narrowing each JSON value on the way."""
    return views.to_json(view)
