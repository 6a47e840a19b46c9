"""ACP agents as backends (protocol.md §24), with `--with-agents`: the server under test
is started with a `--config` file (§19, §24.1) that names the harness's own ACP agent
(subagent_host/conformance/acp_agent.py) as backends, one per behaviour it plays.

The agent is the harness's, not the server's: it runs on the Python running the harness
(`sys.executable`), which must be able to import the official ACP SDK (`acp`, in the
`conformance` extra). It answers at once, with no model: a turn echoes the prompt
(`echo: ` then the prompt's text) and plays the prompt's directives (`plan`, `run:
COMMAND`, `write: PATH=TEXT`).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable
from typing import Any, Final

from .. import processes
from ..connection import Connection
from ..mismatch import Mismatch
from ..registry import (
    AGENTS,
    CaseBody,
    case,
    diagnostic_codes,
    error_of,
    expect,
    expect_equal,
    result_of,
)
from ..trial import Trial
from .interactive import close, of_type, output_text, send, turns_ended
from .steps import expect_status, only_child, spawn_background, still_serving, wait_terminal

ACP: Final = "acp"
AGENT_MODULE: Final = "subagent_host.conformance.acp_agent"
# Backend name -> the agent's scenario (its docstring lists them).
BACKENDS: Final = {
    "acp-test": "normal",
    "acp-wrong-version": "wrong-version",
    "acp-silent": "silent",
}
TEST: Final = "acp-test"
# The wait for an agent's first turn or a run's end: an ACP agent is a Python process
# that loads pydantic before it answers, seconds on a loaded machine. Its case may take
# twice that (a server and an agent start).
RUN_WAIT_S: Final = 30.0
CASE_TIMEOUT_S: Final = 2 * RUN_WAIT_S
# How long the silent agent may stay silent before its child is ended (§24.7).
SILENT_STALL_MS: Final = 2000


def acp_case(case_id: str, section: str) -> Callable[[CaseBody], CaseBody]:
    """Register an ACP case: it runs with `--with-agents` (and `-k acp`), given the time
    an agent takes to start."""
    return case(case_id, section, keywords=(AGENTS, ACP), timeout_s=CASE_TIMEOUT_S)


def config(t: Trial) -> dict[str, Any]:
    """The `backends` of the `--config` file: each scenario of the agent, on our Python,
    its sessions' histories kept in the case's directory (not the child's cwd)."""
    state = str(t.dir / "acp-agent-state")
    return {
        "backends": {
            name: {
                "protocol": "acp",
                "executable": sys.executable,
                "args": ["-m", AGENT_MODULE, scenario, "--state", state],
            }
            for name, scenario in BACKENDS.items()
        }
    }


async def start(t: Trial) -> Connection:
    """The server under test, configured with the ACP test agent's backends."""
    if importlib.util.find_spec("acp") is None:
        raise Mismatch(
            f"the ACP SDK importable by {sys.executable}, which runs the test agent",
            "no module named acp (install subagent-host[conformance])",
        )
    path = t.dir / "acp-backends.json"
    path.write_text(json.dumps(config(t)))
    return await t.start("--config", str(path))


async def completed_turn(
    t: Trial, params: dict[str, Any]
) -> tuple[Connection, str, dict[str, Any]]:
    """A server, and a streamed one-shot child of the test agent that completed: the
    connection, the run id, and the run's final snapshot."""
    conn = await start(t)
    run = await spawn_background(conn, {"backend": TEST, "stream": True, **params})
    ended = await wait_terminal(conn, run["runId"], RUN_WAIT_S)
    expect_status(ended, "completed")
    return conn, run["runId"], ended


async def spawn_interactive(conn: Connection, prompt: str) -> str:
    """Spawn an interactive child of the test agent; its run id once its first turn began."""
    run = await spawn_background(
        conn, {"backend": TEST, "prompt": prompt, "interactive": True, "stream": True}
    )
    run_id: str = run["runId"]
    await conn.wait_for(
        lambda _: of_type(conn, run_id, "turn") != [], "the first turn's start", RUN_WAIT_S
    )
    return run_id


def texts(conn: Connection, run_id: str) -> str:
    return "".join(str(e.get("text")) for e in of_type(conn, run_id, "message"))


def tools(conn: Connection, run_id: str) -> list[tuple[Any, ...]]:
    return [
        (e.get("phase"), e.get("toolId"), e.get("kind"), e.get("isError"))
        for e in of_type(conn, run_id, "tool")
    ]


@acp_case("acp.one-shot-turn", "§24.3")
async def one_shot(t: Trial) -> None:
    conn, run_id, ended = await completed_turn(t, {"prompt": "hello"})
    child = only_child(ended)
    expect_equal(
        (child.get("status"), child.get("backend")), ("completed", TEST), "(status, backend)"
    )
    expect_equal(output_text(ended), "echo: hello", "the output")
    usage = child.get("usage", {})
    expect_equal(
        (usage.get("inputTokens"), usage.get("outputTokens")),
        (1, 2),
        "the usage the agent reported (prompt words in, words said out)",
    )
    expect_equal(texts(conn, run_id), "echo: hello", "the message events' text")
    finals = [e for e in of_type(conn, run_id, "message") if e.get("final") is True]
    expect(len(finals) == 1, "one message event that is final", of_type(conn, run_id, "message"))
    expect(of_type(conn, run_id, "usage") != [], "a usage event", conn.events(run_id))


@acp_case("acp.tool-turn", "§24.3")
async def tool_turn(t: Trial) -> None:
    conn, run_id, _ = await completed_turn(t, {"prompt": "run: touch made-by-the-agent"})
    expect_equal(
        tools(conn, run_id),
        [("start", "tool-1", "execute", None), ("end", "tool-1", "execute", False)],
        "the tool events' (phase, toolId, kind, isError)",
    )
    start_event = of_type(conn, run_id, "tool")[0]
    expect_equal(start_event.get("summary"), "touch made-by-the-agent", "the tool's summary")
    expect(
        (t.project / "made-by-the-agent").is_file(),
        "the command's file in the child's cwd",
        sorted(p.name for p in t.project.iterdir()),
    )


@acp_case("acp.plan-event", "§24.3")
async def plan(t: Trial) -> None:
    conn, run_id, _ = await completed_turn(t, {"prompt": "plan"})
    plans = of_type(conn, run_id, "plan")
    steps = ("read the task", "do the work", "report")
    expect_equal(
        [(p.get("index"), p.get("entries")) for p in plans],
        [
            (0, [{"content": s, "priority": "high", "status": "pending"} for s in steps]),
            (
                0,
                [
                    {
                        "content": s,
                        "priority": "high",
                        "status": "completed" if i == 0 else "pending",
                    }
                    for i, s in enumerate(steps)
                ],
            ),
        ],
        "the plan events (index, entries): the whole plan each time",
    )


@acp_case("acp.second-message-and-close", "§24.2")
async def second_message(t: Trial) -> None:
    conn = await start(t)
    run_id = await spawn_interactive(conn, "hello")
    await turns_ended(conn, run_id, 1)
    sent = await send(conn, run_id, "again")
    expect_equal(sent.get("state"), "delivered", "a message to a waiting ACP child")
    ends = await turns_ended(conn, run_id, 2)
    expect_equal(
        [e.get("stopReason") for e in ends], ["end_turn", "end_turn"], "the turns' stopReason"
    )
    expect_equal(texts(conn, run_id), "echo: helloecho: again", "the message events' text")
    closed = await close(conn, run_id)
    expect_status(closed, "completed")
    expect_equal(
        only_child(closed).get("turn"), {"count": 2, "state": "waiting"}, "the closed turn"
    )


@acp_case("acp.interrupt-mid-tool", "§24.2")
async def interrupt(t: Trial) -> None:
    conn = await start(t)
    pidfile = t.project / "sleep.pid"
    run_id = await spawn_interactive(conn, f"run: echo $$ > {pidfile}; exec sleep 30")
    [sleeper] = await t.learn_pids(pidfile, 1)
    busy = result_of(await conn.request("run/interrupt", {"runId": run_id}), "run/interrupt")
    expect_equal(busy, {"interrupted": True, "turn": {"count": 1, "state": "running"}}, "it")
    ends = await turns_ended(conn, run_id, 1)
    expect_equal(ends[0].get("stopReason"), "interrupted", "the interrupted turn's stopReason")
    expect_equal(
        tools(conn, run_id)[-1][::3], ("end", True), "the tool's end, an error (cancelled)"
    )
    expect(not processes.alive(sleeper), "the tool's command ended with its turn", sleeper)
    closed = await close(conn, run_id)
    expect_status(closed, "completed")


@acp_case("acp.policy-approvals-answer-permissions", "§24.4")
async def policy(t: Trial) -> None:
    # Full access: an `access` narrower than full is refused for an ACP backend today
    # (`access-not-enforceable`), so the policy allows the edit it is asked about.
    params = {"prompt": "write: approved.txt=hi", "approvals": "policy"}
    conn, run_id, _ = await completed_turn(t, params)
    stages = [
        (e.get("stage"), e.get("kind"), e.get("optionId"), e.get("answeredBy"))
        for e in of_type(conn, run_id, "permission")
    ]
    expect_equal(
        stages,
        [("asked", "edit", None, None), ("answered", "edit", "allow", "policy")],
        "the permission events (stage, kind, optionId, answeredBy)",
    )
    written = t.project / "approved.txt"
    expect(
        written.is_file() and written.read_text() == "hi",
        "the allowed edit's file, approved.txt = 'hi'",
        sorted(p.name for p in t.project.iterdir()),
    )


async def expect_child_failed(t: Trial, params: dict[str, Any], code: str) -> None:
    """A misbehaving agent's child fails with `code`; the server goes on serving."""
    conn = await start(t)
    run = await spawn_background(conn, {"prompt": "hello", **params})
    ended = await wait_terminal(conn, run["runId"], RUN_WAIT_S)
    expect_status(ended, "failed")
    child = only_child(ended)
    expect_equal(
        (child.get("status"), child.get("error", {}).get("code")),
        ("failed", code),
        "the child's (status, error code)",
    )
    await still_serving(conn)


@acp_case("acp.wrong-version-protocol-error", "§24.7")
async def wrong_version(t: Trial) -> None:
    await expect_child_failed(t, {"backend": "acp-wrong-version"}, "protocol-error")


@acp_case("acp.silent-agent-spawn-failed", "§24.7")
async def silent(t: Trial) -> None:
    params = {"backend": "acp-silent", "stallTimeoutMs": SILENT_STALL_MS}
    await expect_child_failed(t, params, "spawn-failed")


@acp_case("acp.model-not-honoured", "§24.1")
async def model(t: Trial) -> None:
    conn = await start(t)
    error = error_of(
        await conn.request("spawn", {"backend": TEST, "prompt": "hello", "model": "a/b"}),
        -32003,
        "for a model asked of an ACP agent",
    )
    expect("not-honoured" in diagnostic_codes(error), "diagnostic not-honoured", error)
    paths = [d.get("path") for d in error.get("data", {}).get("diagnostics", [])]
    expect("model" in paths, "the diagnostic's path model", error)
    expect_equal(result_of(await conn.request("status", {}))["runs"], [], "runs")
