"""The JavaScript readers of the schemas that some tests run: the MCP Inspector CLI and Ajv.

They are pinned in tests/inspector/package.json (with a Node 22 for the Inspector, on
Linux x64) and installed by `scripts/install-inspector` into tests/inspector/node_modules;
CI installs them. A test that needs one skips, saying so, where it is not installed.

Node: `$SUBAGENT_HOST_TEST_NODE` when set, else the pinned one, else `node` on PATH,
the first that is recent enough for the reader (the Inspector needs 22.19 or newer).
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import pytest

ROOT: Final = Path(__file__).resolve().parent.parent
PACKAGE: Final = ROOT / "tests" / "inspector"
MODULES: Final = PACKAGE / "node_modules"
INSPECTOR_CLI: Final = (
    MODULES / "@modelcontextprotocol" / "inspector" / "clients" / "cli" / "build" / "index.js"
)
AJV: Final = MODULES / "ajv" / "package.json"
AJV_STRICT: Final = PACKAGE / "ajv-strict.mjs"
NODE_ENV: Final = "SUBAGENT_HOST_TEST_NODE"
INSPECTOR_NODE: Final = (22, 19)
ANY_NODE: Final = (18, 0)
VERSION_TIMEOUT_S: Final = 30.0
INSTALL_HINT: Final = "run scripts/install-inspector"


async def node_at_least(minimum: tuple[int, int]) -> str:
    """The path of a Node at least `minimum`; skips the test when there is none."""
    seen = []
    for candidate in _candidates():
        version = await _version(candidate)
        seen.append(f"{candidate} ({'.'.join(map(str, version)) or '?'})")
        if version >= minimum:
            return candidate
    wanted = ".".join(map(str, minimum))
    pytest.skip(f"no Node {wanted} or newer (set {NODE_ENV}, or {INSTALL_HINT}): {seen}")


def _candidates() -> list[str]:
    found = [os.environ.get(NODE_ENV), str(MODULES / ".bin" / "node"), shutil.which("node")]
    return [path for path in found if path and Path(path).is_file()]


def installed(path: Path, what: str) -> Path:
    """`path`, or a skip saying what is missing."""
    if not path.exists():
        pytest.skip(f"{what} is not installed ({INSTALL_HINT})")
    return path


async def run(
    *argv: str, within_s: float, env: Mapping[str, str] | None = None
) -> tuple[int, bytes, bytes]:
    """Run `argv` to its end within `within_s` seconds (else it is killed, by pid, and
    TimeoutError is raised): its exit status, stdout and stderr."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), within_s)
    except TimeoutError:
        proc.kill()  # by pid: the one process this started
        await proc.wait()
        raise
    assert proc.returncode is not None
    return proc.returncode, out, err


async def _version(node: str) -> tuple[int, ...]:
    try:
        _, out, _ = await run(node, "--version", within_s=VERSION_TIMEOUT_S)
    except TimeoutError:
        return ()
    found = re.match(rb"v(\d+)\.(\d+)", out.strip())
    return (int(found[1]), int(found[2])) if found else ()
