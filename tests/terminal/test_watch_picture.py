"""`scripts/watch-picture` draws the README's picture of `watch` from a real session, and
leaves nothing running."""

from __future__ import annotations

import asyncio
import html
import os
import sys
from pathlib import Path

import psutil
import pytest

from subagent_host.terminal.views import short_id
from tests.e2e.harness import assert_no_run_survives

pytestmark = pytest.mark.e2e

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "watch-picture"


async def test_the_picture_script_draws_every_run_row_and_ends_everything(tmp_path: Path) -> None:
    out = tmp_path / "pictures" / "watch.svg"
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(SCRIPT),
        str(out),
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "TMPDIR": str(tmp_path)},
    )
    async with asyncio.timeout(60):
        stdout, _ = await process.communicate()
    assert process.returncode == 0
    said = stdout.decode().strip()
    assert said.startswith(f"wrote {out} (runs: ")
    run_ids = said.removesuffix(")").split("(runs: ")[1].split()
    assert len(run_ids) == 3

    text = html.unescape(out.read_text()).replace("\xa0", " ")
    assert text.startswith("<svg")
    build, tests, review = (short_id(run_id) for run_id in run_ids)
    for row in (
        f"› {review}",
        "review",
        "3 running",
        "checking db/models.py",
        "fetched 12 of 40 pages",
        f"{tests}",
        "unit tests",
        "command exited with status 1: 2 failed, 118 passed",
        f"{build}",
        "built dist/app in 1.8s",
        "3 runs,",
        "1 running",
    ):
        assert row in text, row
    for status in ("running", "failed", "completed"):
        assert f">{status}" in text, status

    assert_no_run_survives(set(run_ids))
    left = [
        p.pid
        for p in psutil.process_iter(["cmdline"])
        if str(tmp_path) in " ".join(p.info["cmdline"] or [])
    ]
    assert left == [], f"processes of the picture's session left behind: {left}"
