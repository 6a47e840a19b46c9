"""Benchmark of hostile strings: every string field of every method, four bad values each.

What is measured
----------------
One real server receives, pipelined (small requests in batches of 40, each
1 MiB one alone), one request per string field of every method (ping, spawn,
preflight, status, stop, resume; every item field of `tasks`, `chain` and each
workflow step kind) and per value: a lone surrogate, a NUL, control characters
and a 1 MiB string. Reported: requests and messages sent, their size, the time
taken, the answers by code, and how many were `-32603` (the promise: 0). Every
run a success named must still be listed by a second server on the same state
directory after the first one exited. The same generator is the end-to-end
test tests/e2e/test_hostile_strings.py.

How to run
----------
    .venv/bin/python bench/hostile_strings.py

Exits 0 when every promise held, 1 otherwise (each broken one is printed).
"""

from __future__ import annotations

import sys  # noqa: I001 -- the path is set before any other import
from pathlib import Path

# Run as `python bench/NAME.py`, imports start at the repository's root, not in
# bench/: `bench.common` is found, and bench/ray.py does not stand in for Ray.
sys.path[0] = str(Path(__file__).resolve().parent.parent)

import asyncio
import tempfile
import time
from typing import Final

ROOT: Final = Path(__file__).resolve().parent.parent

from tests.e2e.hostile import attack, summary  # noqa: E402


async def main() -> int:
    with tempfile.TemporaryDirectory(prefix="hostile-strings-") as tmp:
        report = await attack(Path(tmp), time.monotonic)
    print(summary(report))
    for problem in report.problems:
        print(f"  broken: {problem}")
    return 1 if report.problems else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
