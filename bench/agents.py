"""Benchmark of the server's overhead on a real pi run, against the same pi run directly.

What is measured
----------------
The pinned pi CLI (scripts/install-agents) answers a scripted tool-call turn
from the loopback mock LLM (tests/mock_llm): one `bash` tool call, then a final
answer. Each repetition runs it two ways, alternating:

- direct: `pi --mode json ...` started by this process with the prompt on stdin,
  in the environment the server would give it (including `PI_AGENT_LEAF=1`);
  timed to its first `tool_execution_start` event and to its exit.
- through the server: `spawn {"backend": "pi", "stream": true, "mode": "task"}`
  on an already running server; timed from the request's write to the first
  `activity` event and to the reply.

Medians of N (default 5) after one untimed warm-up each. Targets: server /
direct <= 1.1 and server - direct <= 50 ms, for both the first activity and
completion.

How to run
----------
    .venv/bin/python bench/agents.py [--repeat N]

Exits 0 whether or not the targets are met; 1 on a protocol error, a missing CLI
or a timeout.
"""

from __future__ import annotations

import sys  # noqa: I001 -- the path is set before any other import
from pathlib import Path

# Run as `python bench/NAME.py`, imports start at the repository's root, not in
# bench/: `bench.common` is found, and bench/ray.py does not stand in for Ray.
sys.path[0] = str(Path(__file__).resolve().parent.parent)

import argparse
import asyncio
import json
import os
import tempfile
import time
from typing import Any, Final

from bench.common import BenchError, bounded
from bench.runs import (
    Row,
    Server,
    close_server,
    default_server,
    format_table,
    median,
    request,
    start_server,
    wait_ready,
)

ROOT: Final = Path(__file__).resolve().parent.parent

from tests.backends.fixtures.record_pi import models  # noqa: E402
from tests.mock_llm import MockLLM  # noqa: E402

AGENT_BIN: Final = ROOT / "agents" / "node_modules" / ".bin"
PROMPT: Final = "list the files please"
TARGET_RATIO: Final = 1.1
TARGET_EXTRA_MS: Final = 50.0


def pi_env(base_url: str, home: Path) -> dict[str, str]:
    agent_dir = home / "pi-agent"
    agent_dir.mkdir(parents=True, exist_ok=True)
    (agent_dir / "models.json").write_text(json.dumps(models(base_url)))
    return {
        "PATH": f"{AGENT_BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "HOME": str(home),
        "PI_CODING_AGENT_DIR": str(agent_dir),
        "PI_OFFLINE": "1",
        "PI_SKIP_VERSION_CHECK": "1",
        "PI_TELEMETRY": "0",
    }


async def direct_run(env: dict[str, str], sessions: str) -> tuple[float, float]:
    """Seconds to the first tool event and to exit, pi started by us."""
    start = time.perf_counter()
    # The environment the server gives its children, so both sides run the same pi
    # (PI_AGENT_LEAF changes what pi loads at start).
    env = {**env, "PI_AGENT_LEAF": "1", "SUBAGENT_HOST_DEPTH": "1"}
    proc = await asyncio.create_subprocess_exec(
        str(AGENT_BIN / "pi"), "--mode", "json", "--session-dir", sessions,
        "--provider", "mock", "--model", "mock-model", "--tools", "bash,read",
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL, env=env,
    )  # fmt: skip
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(PROMPT.encode())
    proc.stdin.close()
    first: float | None = None
    async for line in proc.stdout:
        if first is None and b'"tool_execution_start"' in line:
            first = time.perf_counter() - start
    await proc.wait()
    if first is None or proc.returncode != 0:
        raise BenchError(f"direct pi run: no tool event or exit {proc.returncode}")
    return first, time.perf_counter() - start


async def served_run(server: Server) -> tuple[float, float]:
    """Seconds to the first `activity` event and to the reply, through the server."""
    params: dict[str, Any] = {
        "backend": "pi", "model": "mock/mock-model", "tools": ["bash", "read"],
        "prompt": PROMPT, "mode": "task", "stream": True,
    }  # fmt: skip
    start = time.perf_counter()
    result = await request(server, "spawn", params)
    done = time.perf_counter() - start
    if result.get("status") != "completed":
        raise BenchError(f"served pi run ended {result.get('status')}: {result!r:.300}")
    events = server.events.get(result["runId"], [])
    firsts = [e["_received"] for e in events if e.get("type") == "activity"]
    if not firsts:
        raise BenchError("served pi run sent no activity event")
    return firsts[0] - start, done


async def run(opts: argparse.Namespace) -> int:
    if not (AGENT_BIN / "pi").exists():
        print("pi is not installed: run scripts/install-agents", file=sys.stderr)
        return 1
    rows: list[Row] = []
    with MockLLM() as mock, tempfile.TemporaryDirectory(prefix="agents-bench-") as tmp:
        env = pi_env(mock.openai_base_url, Path(tmp))
        server = await start_server([opts.server, "--state-dir", str(Path(tmp) / "state")], env=env)
        try:
            await wait_ready(server)
            sessions = tempfile.mkdtemp(dir=tmp)
            await bounded(direct_run(env, sessions), "a warm-up pi run")
            await bounded(served_run(server), "a warm-up served run")
            direct: list[tuple[float, float]] = []
            served: list[tuple[float, float]] = []
            for _ in range(opts.repeat):
                direct.append(await bounded(direct_run(env, sessions), "a direct pi run"))
                served.append(await bounded(served_run(server), "a served pi run"))
        finally:
            problem = await close_server(server)
        if problem:
            raise BenchError(problem)
    for i, what in enumerate(("first activity", "completion")):
        d = median([x[i] for x in direct]) * 1000
        s = median([x[i] for x in served]) * 1000
        met = s / d <= TARGET_RATIO and s - d <= TARGET_EXTRA_MS
        print(f"  {what}: server {s:.0f} ms, direct {d:.0f} ms, +{s - d:.0f} ms")
        rows.append(Row(f"pi {what}, median", "ms", s, "<= 1.1x, +50 ms", met, d))
    print()
    print("\n".join(format_table(rows)))
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=5, metavar="N")
    parser.add_argument("--server", default=default_server(), metavar="CMD")
    try:
        return asyncio.run(run(parser.parse_args()))
    except BenchError as exc:
        print(f"agents bench failed: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
