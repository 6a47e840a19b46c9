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
from .steps import expect_status, only_child, still_serving, wait_terminal

ACP: Final = "acp"
AGENT_MODULE: Final = "subagent_host.conformance.acp_agent"
# Backend name -> the agent's scenario (its docstring lists them).
BACKENDS: Final = {
    "acp-test": "normal",
    "acp-wrong-version": "wrong-version",
    "acp-silent": "silent",
}
TEST: Final = "acp-test"
# The wait for an agent's first turn or a run's end, and for the answer to a launch
# (checked against the agent's probe, §24.6, which a launch waits for, up to 15 s): an
# ACP agent is a Python process that loads pydantic before it answers, seconds on a
# loaded machine. Its case may take twice that (a server and an agent start).
RUN_WAIT_S: Final = 30.0
CASE_TIMEOUT_S: Final = 2 * RUN_WAIT_S


def acp_case(case_id: str, section: str) -> Callable[[CaseBody], CaseBody]:
    """Register an ACP case: it runs with `--with-agents` (and `-k acp`), given the time
    an agent takes to start."""
    return case(case_id, section, keywords=(AGENTS, ACP), timeout_s=CASE_TIMEOUT_S)


def config(t: Trial, backends: tuple[str, ...]) -> dict[str, Any]:
    """The `backends` of the `--config` file: the agent on our Python, under each of
    `backends` (a name of BACKENDS) playing its scenario, its sessions' histories kept
    in the case's directory (not the child's cwd). Only those the case uses: the server
    probes each configured agent when it starts."""
    state = str(t.dir / "acp-agent-state")
    return {
        "backends": {
            name: {
                "protocol": "acp",
                "executable": sys.executable,
                "args": ["-m", AGENT_MODULE, scenario, "--state", state],
            }
            for name, scenario in BACKENDS.items()
            if name in backends
        }
    }


async def start(t: Trial, *backends: str) -> Connection:
    """The server under test, configured with the ACP test agent as `backends` (default:
    the agent playing `normal`)."""
    if importlib.util.find_spec("acp") is None:
        raise Mismatch(
            f"the ACP SDK importable by {sys.executable}, which runs the test agent",
            "no module named acp (install subagent-host[conformance])",
        )
    path = t.dir / "acp-backends.json"
    path.write_text(json.dumps(config(t, backends or (TEST,))))
    return await t.start("--config", str(path))


async def ask(conn: Connection, method: str, params: dict[str, Any]) -> Any:
    """The reply to a launch (`spawn`, `preflight`), which may wait for the agent's probe."""
    return await conn.request(method, params, within=RUN_WAIT_S)


async def spawn_background(conn: Connection, params: dict[str, Any]) -> dict[str, Any]:
    """A background spawn's first snapshot."""
    snapshot: dict[str, Any] = result_of(
        await ask(conn, "spawn", {**params, "mode": "background"}), "spawn"
    )
    return snapshot


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


def permissions(conn: Connection, run_id: str) -> list[tuple[Any, ...]]:
    return [
        (e.get("stage"), e.get("kind"), e.get("optionId"), e.get("answeredBy"))
        for e in of_type(conn, run_id, "permission")
    ]


@acp_case("acp.policy-allows-within-access", "§24.4")
async def policy_allows(t: Trial) -> None:
    params = {"prompt": "write: approved.txt=hi", "approvals": "policy"}
    conn, run_id, _ = await completed_turn(t, params)
    expect_equal(
        permissions(conn, run_id),
        [("asked", "edit", None, None), ("answered", "edit", "allow", "policy")],
        "the permission events (stage, kind, optionId, answeredBy) under full access",
    )
    written = t.project / "approved.txt"
    expect(
        written.is_file() and written.read_text() == "hi",
        "the allowed edit's file, approved.txt = 'hi'",
        sorted(p.name for p in t.project.iterdir()),
    )


# A narrower access under `policy`: the agent's edits and commands are asked, so the
# server rejects each one beyond access; its reads (and `other`) run unasked.
READ_ONLY: Final = {"approvals": "policy", "access": {"filesystem": "read"}}
KINDS: Final = ("read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other")


@acp_case("acp.policy-rejects-beyond-access", "§24.4")
async def policy_rejects(t: Trial) -> None:
    conn = await start(t)
    params = {"backend": TEST, "prompt": "write: denied.txt=no", **READ_ONLY}
    offered = result_of(await ask(conn, "preflight", params), "preflight")
    expect_equal(offered.get("accepted"), True, "a read-only access under policy, accepted")
    expect_read_only_receipt(offered)
    run = await spawn_background(conn, {**params, "stream": True})
    run_id = run["runId"]
    ended = await wait_terminal(conn, run_id, RUN_WAIT_S)
    expect_status(ended, "completed")
    expect_equal(
        permissions(conn, run_id),
        [("asked", "edit", None, None), ("answered", "edit", "reject", "policy")],
        "the permission events (stage, kind, optionId, answeredBy) under read access",
    )
    expect(
        not (t.project / "denied.txt").exists(),
        "no denied.txt: the rejected edit is not made",
        sorted(p.name for p in t.project.iterdir()),
    )
    # The test agent ends a rejected tool `failed`, says nothing of it, and ends its turn.
    expect_equal(
        tools(conn, run_id),
        [("start", "tool-1", "edit", None), ("end", "tool-1", "edit", True)],
        "the tool events' (phase, toolId, kind, isError)",
    )
    expect_equal(texts(conn, run_id), "echo: write: denied.txt=no", "the message events' text")


def expect_read_only_receipt(offered: dict[str, Any]) -> None:
    """§24.4's receipt for a read-only access under policy: no kind is removed (an ACP
    agent's tools cannot be), and every effect is `best-effort`, since `other` (and
    `read`, `search`, `fetch`) may use it unasked; writing is used unasked through
    `other` only, every kind that writes being asked."""
    children = offered.get("receipts", {}).get("access", {}).get("children", [])
    expect(len(children) == 1, "one child in the receipts", offered.get("receipts"))
    child = children[0]
    expect_equal(
        (child.get("restrictable"), child.get("removedTools", [])),
        (False, []),
        "(restrictable, removedTools)",
    )
    expect_equal(
        sorted(tool.get("name") for tool in child.get("tools", [])),
        sorted(KINDS),
        "the child's tools: every ACP tool kind, none removed",
    )
    approvals = child.get("approvals", {})
    expect_equal(approvals.get("approvals"), "policy", "the receipt's approvals")
    effects = {e.get("effect"): e for e in approvals.get("effects", [])}
    expect_equal(
        {name: e.get("enforcement") for name, e in effects.items()},
        {
            "filesystem-read": "best-effort",
            "filesystem-write": "best-effort",
            "network": "best-effort",
            "process": "best-effort",
        },
        "each effect's enforcement",
    )
    how = str(effects["filesystem-write"].get("how"))
    expect(
        "other" in how and not any(kind in how for kind in ("edit", "delete", "move", "execute")),
        "filesystem-write used unasked through other only",
        how,
    )


@acp_case("acp.narrowed-access-needs-policy", "§24.4")
async def narrowed_access(t: Trial) -> None:
    conn = await start(t)
    launch = {"backend": TEST, "prompt": "hello", "access": {"filesystem": "read"}}
    error = error_of(
        await ask(conn, "spawn", launch), -32003, "for a narrowed access with cli approvals"
    )
    expect("access-not-enforceable" in diagnostic_codes(error), "access-not-enforceable", error)
    for approvals in ("cli", "client"):
        offered = result_of(
            await ask(conn, "preflight", {**launch, "approvals": approvals}), "preflight"
        )
        expect_equal(offered.get("accepted"), False, f"accepted with approvals {approvals}")
        expect(
            "access-not-enforceable" in diagnostic_codes(offered),
            f"access-not-enforceable with approvals {approvals}",
            offered,
        )
    # Under policy too, when a kind the agent runs unasked needs what access denies.
    offline = {**launch, "approvals": "policy", "access": {"network": False}}
    offered = result_of(await ask(conn, "preflight", offline), "preflight")
    expect_equal(offered.get("accepted"), False, "accepted with policy and no network")
    expect(
        "access-not-enforceable" in diagnostic_codes(offered),
        "access-not-enforceable with policy and no network (fetch runs unasked)",
        offered,
    )
    expect_equal(result_of(await conn.request("status", {}))["runs"], [], "runs")


async def expect_cannot_run(t: Trial, backend: str, reason: str) -> None:
    """A launch of an agent that its probe found cannot run is refused
    `backend-unavailable` with the probe's reason (waiting for the probe if it still
    runs); ping then lists the agent unavailable with that reason; the server goes on
    serving."""
    conn = await start(t, backend)
    reply = await ask(conn, "spawn", {"backend": backend, "prompt": "hello"})
    error = error_of(reply, -32002, f"for a spawn of {backend}")
    expect("backend-unavailable" in diagnostic_codes(error), "backend-unavailable", error)
    expect(reason in str(error.get("message")), f"the probe's reason ({reason}) said", error)
    listed = [
        b
        for b in result_of(await conn.request("ping", {}), "ping").get("backends", [])
        if b.get("id") == backend
    ]
    expect(
        len(listed) == 1
        and listed[0].get("available") is False
        and reason in str(listed[0].get("reason")),
        f"{backend} listed by ping, available: false, with the probe's reason",
        listed,
    )
    expect_equal(result_of(await conn.request("status", {}))["runs"], [], "runs")
    await still_serving(conn)


@acp_case("acp.wrong-version-backend-unavailable", "§24.6")
async def wrong_version(t: Trial) -> None:
    await expect_cannot_run(t, "acp-wrong-version", "speaks ACP version 2, not 1")


@acp_case("acp.silent-agent-backend-unavailable", "§24.6")
async def silent(t: Trial) -> None:
    await expect_cannot_run(t, "acp-silent", "no answer to initialize")


@acp_case("acp.model-not-honoured", "§24.1")
async def model(t: Trial) -> None:
    conn = await start(t)
    error = error_of(
        await ask(conn, "spawn", {"backend": TEST, "prompt": "hello", "model": "a/b"}),
        -32003,
        "for a model asked of an ACP agent",
    )
    expect("not-honoured" in diagnostic_codes(error), "diagnostic not-honoured", error)
    paths = [d.get("path") for d in error.get("data", {}).get("diagnostics", [])]
    expect("model" in paths, "the diagnostic's path model", error)
    expect_equal(result_of(await conn.request("status", {}))["runs"], [], "runs")
