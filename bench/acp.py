"""Benchmark of the server's overhead on a real ACP agent's turn, against driving the same
agent with the official ACP SDK directly.

What is measured
----------------
The pinned Qwen Code (scripts/install-agents), started in its ACP mode (`qwen --acp`)
against the loopback mock LLM (tests/mock_llm, chat completions), answers a scripted
tool-call turn: one shell command, then a final answer. Each repetition runs it two
ways, alternating:

- direct: this process starts qwen with the SDK (`acp.spawn_agent_process`, in the
  environment the server would give it: the same PATH and HOME), `initialize`,
  `session/new`, one `session/prompt`, answering the permission qwen asks before its
  shell command with `allow_once` (as the server does under full access), then closes
  qwen's stdin and waits for its exit; timed to the first `tool_call` update and to
  that exit.
- through the server: `spawn {"backend": "qwen", "stream": true, "mode": "task"}` on an
  already running server whose `--config` names qwen as an ACP backend (protocol.md
  §24.1), the same program, arguments and environment; timed from the request's write
  to the first `tool` event and to the reply (sent once qwen has exited).

Medians of N (default 5) after one untimed warm-up each. Targets: server / direct <=
1.1 and server - direct <= 50 ms, for both the first tool and completion.

How to run
----------
    .venv/bin/python bench/acp.py [--repeat N]

Needs the `acp` extra (part of `test`). Exits 0 whether or not the targets are met; 1
on a protocol error, a missing CLI or a timeout.
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

import acp
from acp import schema

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

from tests.backends.fixtures.record_acp import qwen_args  # noqa: E402
from tests.mock_llm import MockLLM  # noqa: E402

AGENT_BIN: Final = ROOT / "agents" / "node_modules" / ".bin"
PROMPT: Final = "list the files please"
TOOL_COMMAND: Final = "printf x > written.txt"
TARGET_RATIO: Final = 1.1
TARGET_EXTRA_MS: Final = 50.0
EXIT_WAIT_S: Final = 30.0


class BenchClient:
    """The SDK's client side, as little as a turn needs: a permission allowed once,
    the first tool call's time noted."""

    def __init__(self, start: float) -> None:
        self.start = start
        self.first_tool: float | None = None

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if self.first_tool is None and isinstance(update, schema.ToolCallStart):
            self.first_tool = time.perf_counter() - self.start

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[schema.PermissionOption], **_: Any
    ) -> schema.RequestPermissionResponse:
        allow = next(option for option in options if option.kind == "allow_once")
        outcome = schema.AllowedOutcome(outcome="selected", option_id=allow.option_id)
        return schema.RequestPermissionResponse(outcome=outcome)

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise acp.RequestError.method_not_found(method)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    def on_connect(self, conn: Any) -> None:
        return None


async def direct_run(args: tuple[str, ...], env: dict[str, str], cwd: str) -> tuple[float, float]:
    """Seconds to the first tool call and to qwen's exit, qwen driven by the SDK."""
    start = time.perf_counter()
    client = BenchClient(start)
    qwen = str(AGENT_BIN / "qwen")
    async with acp.spawn_agent_process(client, qwen, *args, env=env, cwd=cwd) as (conn, proc):  # type: ignore[arg-type]
        capabilities = schema.ClientCapabilities(
            fs=schema.FileSystemCapabilities(read_text_file=False, write_text_file=False),
            terminal=False,
        )
        await conn.initialize(protocol_version=1, client_capabilities=capabilities)
        session = await conn.new_session(cwd=cwd, mcp_servers=[])
        answer = await conn.prompt(
            session_id=session.session_id,
            prompt=[schema.TextContentBlock(type="text", text=PROMPT)],
        )
        if proc.stdin is not None:
            proc.stdin.close()
        await asyncio.wait_for(proc.wait(), EXIT_WAIT_S)
    done = time.perf_counter() - start
    if client.first_tool is None or answer.stop_reason != "end_turn":
        raise BenchError(f"direct qwen turn: no tool call, or it ended {answer.stop_reason}")
    return client.first_tool, done


async def served_run(server: Server, cwd: str) -> tuple[float, float]:
    """Seconds to the first `tool` event and to the reply, through the server."""
    params = {"backend": "qwen", "prompt": PROMPT, "mode": "task", "stream": True, "cwd": cwd}
    start = time.perf_counter()
    result = await request(server, "spawn", params)
    done = time.perf_counter() - start
    if result.get("status") != "completed":
        raise BenchError(f"served qwen turn ended {result.get('status')}: {result!r:.300}")
    events = server.events.get(result["runId"], [])
    firsts = [e["_received"] for e in events if e.get("type") == "tool"]
    if not firsts:
        raise BenchError("served qwen turn sent no tool event")
    return firsts[0] - start, done


async def run(opts: argparse.Namespace) -> int:
    if not (AGENT_BIN / "qwen").exists():
        print("qwen is not installed: run scripts/install-agents", file=sys.stderr)
        return 1
    rows: list[Row] = []
    with (
        MockLLM(tool_command=TOOL_COMMAND) as mock,
        tempfile.TemporaryDirectory(prefix="acp-bench-") as tmp,
    ):
        home, work = Path(tmp) / "home", Path(tmp) / "work"
        home.mkdir()
        work.mkdir()
        env = {"PATH": f"{AGENT_BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}", "HOME": str(home)}
        args = qwen_args(mock.openai_base_url)
        config = Path(tmp) / "subagents.json"
        qwen = {"protocol": "acp", "executable": "qwen", "args": list(args)}
        config.write_text(json.dumps({"backends": {"qwen": qwen}}))
        argv = [opts.server, "--state-dir", str(Path(tmp) / "state"), "--config", str(config)]
        server = await start_server(argv, env=env)
        try:
            await wait_ready(server)
            # What the server's children get beside PATH and HOME (its run marker, its
            # depth) does not change what qwen does.
            await bounded(direct_run(args, env, str(work)), "a warm-up direct qwen turn")
            await bounded(served_run(server, str(work)), "a warm-up served qwen turn")
            direct: list[tuple[float, float]] = []
            served: list[tuple[float, float]] = []
            for _ in range(opts.repeat):
                direct.append(await bounded(direct_run(args, env, str(work)), "a direct turn"))
                served.append(await bounded(served_run(server, str(work)), "a served turn"))
        finally:
            problem = await close_server(server)
        if problem:
            raise BenchError(problem)
    for i, what in enumerate(("first tool", "completion")):
        d = median([x[i] for x in direct]) * 1000
        s = median([x[i] for x in served]) * 1000
        met = s / d <= TARGET_RATIO and s - d <= TARGET_EXTRA_MS
        print(f"  {what}: server {s:.0f} ms, direct {d:.0f} ms, +{s - d:.0f} ms")
        rows.append(Row(f"qwen (ACP) {what}, median", "ms", s, "<= 1.1x, +50 ms", met, d))
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
        print(f"acp bench failed: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
