"""Benchmark of the server's overhead on an ACP agent's turn, against driving the same
agent with the official ACP SDK directly.

What is measured
----------------
Two agents answer one scripted turn, a shell command that writes a file then an
answer, each two ways, alternating (which way goes first alternates too):

- `acp-test-agent`: the project's own ACP agent on the SDK
  (`python -m subagent_host.conformance.acp_agent`, prompt `run: printf x >
  written.txt`): a few milliseconds of its own, so what a client adds shows whole.
- `qwen`: the pinned Qwen Code (scripts/install-agents) in its ACP mode
  (`qwen --acp`) against the loopback mock LLM (tests/mock_llm, chat completions),
  which scripts the same command. A Qwen turn takes seconds and varies by hundreds of
  milliseconds from one run to the next on its own.

The two ways:

- direct: this process starts the agent with the SDK (`acp.spawn_agent_process`, in
  the environment the server would give it: the same PATH and HOME), `initialize`,
  `session/new`, one `session/prompt`, answering the permission the agent asks before
  its shell command with `allow_once` (as the server does under full access), then
  closes the agent's stdin and waits for its exit; timed to the first `tool_call`
  update and to that exit.
- through the server: `spawn {"backend": NAME, "stream": true, "mode": "task"}` on an
  already running server whose `--config` names both agents as ACP backends
  (protocol.md §24.1), the same program, arguments and environment; timed from the
  request's write to the first `tool` event and to the reply (sent once the agent has
  exited).

On both ways the agent is started through bench/acp_relay.py, which copies the lines
both ways and notes, on the monotonic clock both processes read, when it started the
agent, when the agent wrote its first `tool_call` and when the agent exited. So each
run gives two figures for each moment: end to end (what the client saw), and the
client's own share (end to end less the agent's own time from its start to that
moment: the launch before it, and the delivery after it). The agent's own time varies
alike on both ways; the client's share is what the server adds or the SDK does.

Medians of N (default 5) after one untimed warm-up of each. Targets, for the first
tool and for completion: end to end server / direct <= 1.1, and the server's share
less the SDK's <= 50 ms.

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
from collections.abc import Sequence
from dataclasses import dataclass
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
RELAY: Final = str(ROOT / "bench" / "acp_relay.py")
TOOL_COMMAND: Final = "printf x > written.txt"
TARGET_RATIO: Final = 1.1
TARGET_EXTRA_MS: Final = 50.0
EXIT_WAIT_S: Final = 30.0


@dataclass(frozen=True)
class Agent:
    """One agent the bench runs: its backend name, its launch, and the turn's prompt."""

    name: str
    argv: tuple[str, ...]
    prompt: str


@dataclass(frozen=True)
class Timing:
    """One run, in seconds from its start: end to end and the agent's own times."""

    first_tool: float
    done: float
    agent_first_tool: float
    agent_done: float

    def share(self) -> tuple[float, float]:
        """The client's share of the first tool and of completion."""
        return self.first_tool - self.agent_first_tool, self.done - self.agent_done


class Relayed:
    """The relay's log: what the agent of the run just ended noted."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.touch()
        self._seen = 0

    def argv(self, agent: Agent) -> tuple[str, ...]:
        return (sys.executable, RELAY, str(self.path), *agent.argv)

    def last(self, what: str) -> tuple[float, float]:
        """The newest agent's first tool and exit, from when the relay started it."""
        lines = self.path.read_text(encoding="utf-8").splitlines()
        new, self._seen = lines[self._seen :], len(lines)
        if not new:
            raise BenchError(f"{what}: the relay noted no agent")
        noted = json.loads(new[-1])
        if noted["firstTool"] is None:
            raise BenchError(f"{what}: the agent wrote no tool_call")
        return noted["firstTool"] - noted["started"], noted["exited"] - noted["started"]


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


async def direct_run(
    agent: Agent, relayed: Relayed, env: dict[str, str], cwd: str
) -> tuple[float, float]:
    """Seconds to the first tool call and to the agent's exit, driven by the SDK."""
    start = time.perf_counter()
    client = BenchClient(start)
    program, *args = relayed.argv(agent)
    async with acp.spawn_agent_process(client, program, *args, env=env, cwd=cwd) as (conn, proc):  # type: ignore[arg-type]
        capabilities = schema.ClientCapabilities(
            fs=schema.FileSystemCapabilities(read_text_file=False, write_text_file=False),
            terminal=False,
        )
        await conn.initialize(protocol_version=1, client_capabilities=capabilities)
        session = await conn.new_session(cwd=cwd, mcp_servers=[])
        answer = await conn.prompt(
            session_id=session.session_id,
            prompt=[schema.TextContentBlock(type="text", text=agent.prompt)],
        )
        if proc.stdin is not None:
            proc.stdin.close()
        await asyncio.wait_for(proc.wait(), EXIT_WAIT_S)
    done = time.perf_counter() - start
    if client.first_tool is None or answer.stop_reason != "end_turn":
        raise BenchError(
            f"direct {agent.name} turn: no tool call, or it ended {answer.stop_reason}"
        )
    return client.first_tool, done


async def served_run(server: Server, agent: Agent, cwd: str) -> tuple[float, float]:
    """Seconds to the first `tool` event and to the reply, through the server."""
    params = {"backend": agent.name, "prompt": agent.prompt, "mode": "task", "stream": True}
    start = time.perf_counter()
    result = await request(server, "spawn", {**params, "cwd": cwd})
    done = time.perf_counter() - start
    if result.get("status") != "completed":
        raise BenchError(f"served {agent.name} turn ended {result.get('status')}: {result!r:.300}")
    events = server.events.get(result["runId"], [])
    firsts = [e["_received"] for e in events if e.get("type") == "tool"]
    if not firsts:
        raise BenchError(f"served {agent.name} turn sent no tool event")
    return firsts[0] - start, done


async def timed(run: Any, relayed: Relayed, what: str) -> Timing:
    first_tool, done = await bounded(run, what)
    return Timing(first_tool, done, *relayed.last(what))


def agents(tmp: Path, mock: MockLLM) -> tuple[Agent, ...]:
    test_agent = (
        sys.executable,
        "-m",
        "subagent_host.conformance.acp_agent",
        "--state",
        str(tmp / "agent-state"),
    )
    return (
        Agent("acp-test-agent", test_agent, f"run: {TOOL_COMMAND}"),
        Agent(
            "qwen", (str(AGENT_BIN / "qwen"), *qwen_args(mock.openai_base_url)), "list the files"
        ),
    )


def rows_of(agent: Agent, direct: Sequence[Timing], served: Sequence[Timing]) -> list[Row]:
    rows: list[Row] = []
    for i, what in enumerate(("first tool", "completion")):
        d = median([(t.first_tool, t.done)[i] for t in direct]) * 1000
        s = median([(t.first_tool, t.done)[i] for t in served]) * 1000
        d_share = median([t.share()[i] for t in direct]) * 1000
        s_share = median([t.share()[i] for t in served]) * 1000
        print(
            f"  {agent.name} {what}: server {s:.0f} ms, direct {d:.0f} ms (+{s - d:.0f} ms);"
            f" client's share: server {s_share:.0f} ms, direct {d_share:.0f} ms"
            f" (+{s_share - d_share:.0f} ms)"
        )
        rows.append(Row(f"{agent.name} {what}", "ms", s, "<= 1.1x", s / d <= TARGET_RATIO, d))
        rows.append(
            Row(
                f"  client's share (+{s_share - d_share:.0f} ms)",
                "ms",
                s_share,
                "<= +50 ms",
                s_share - d_share <= TARGET_EXTRA_MS,
                d_share,
            )
        )
    return rows


async def run(opts: argparse.Namespace) -> int:
    if not (AGENT_BIN / "qwen").exists():
        print("qwen is not installed: run scripts/install-agents", file=sys.stderr)
        return 1
    rows: list[Row] = []
    with (
        MockLLM(tool_command=TOOL_COMMAND) as mock,
        tempfile.TemporaryDirectory(prefix="acp-bench-") as tmp_name,
    ):
        tmp = Path(tmp_name)
        home, work = tmp / "home", tmp / "work"
        home.mkdir()
        work.mkdir()
        relayed = Relayed(tmp / "relay.jsonl")
        env = {"PATH": f"{AGENT_BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}", "HOME": str(home)}
        config = tmp / "subagents.json"
        backends = {}
        for agent in agents(tmp, mock):
            program, *args = relayed.argv(agent)
            backends[agent.name] = {"protocol": "acp", "executable": program, "args": args}
        config.write_text(json.dumps({"backends": backends}))
        argv = [opts.server, "--state-dir", str(tmp / "state"), "--config", str(config)]
        server = await start_server(argv, env=env)
        try:
            await wait_ready(server)
            # What the server's children get beside PATH and HOME (its run marker, its
            # depth) does not change what an agent does.
            for agent in agents(tmp, mock):
                direct_turn = direct_run(agent, relayed, env, str(work))
                await timed(direct_turn, relayed, f"a warm-up direct {agent.name} turn")
                served_turn = served_run(server, agent, str(work))
                await timed(served_turn, relayed, f"a warm-up served {agent.name} turn")
                direct: list[Timing] = []
                served: list[Timing] = []
                for i in range(opts.repeat):
                    # Which goes first alternates: neither way always follows the other.
                    for way in ("direct", "served") if i % 2 == 0 else ("served", "direct"):
                        if way == "direct":
                            direct_turn = direct_run(agent, relayed, env, str(work))
                            direct.append(await timed(direct_turn, relayed, "a direct turn"))
                        else:
                            served_turn = served_run(server, agent, str(work))
                            served.append(await timed(served_turn, relayed, "a served turn"))
                rows += rows_of(agent, direct, served)
        finally:
            problem = await close_server(server)
        if problem:
            raise BenchError(problem)
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
