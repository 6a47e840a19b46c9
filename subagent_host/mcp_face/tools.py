"""The eight tools, each a protocol method seen through MCP: its arguments, schemas and call.

| tool | arguments | the protocol's method | structured content |
|---|---|---|---|
| `spawn` | `SpawnArguments` | `spawn`, `mode: "background"`, then `wait` | RunSnapshot |
| `wait` | `WaitArguments` | `status {runId}`, following its `run/event`s | RunSnapshot |
| `status` | `StatusParams` but `since` | `status` | RunSnapshot, or RunList |
| `stop` | `StopParams` | `stop` | RunSnapshot |
| `send` | `SendParams` | `run/send` | SendResult |
| `interrupt` | `InterruptParams` | `run/interrupt` | InterruptResult |
| `close` | `CloseParams` | `run/close` | RunSnapshot |
| `agents_list` | `AgentsListParams` | `agents/list` | AgentsListResult |

Schemas are generated from these types (`openrpc.schemas.standalone_schema`), so a
tool takes and answers exactly what the protocol's types say. Each holds the types it
refers to once, under `$defs` (MCP shares no definitions between tools, and a client
loads every tool's schemas when it starts); a RunSnapshot's `status {since}` fields
are left out of the output schemas, since the face never asks with `since`.
Arguments are read with the wire's own converter: an argument the server would
refuse is refused here with the server's words (`invalid params: ...`), before
anything is sent.

The permissions of the runs `spawn` starts are asked of the human through the MCP
client when it can elicit, and sent as `approvals: "policy"` when it cannot
(`permissions.py`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import attrs
import cattrs

from subagent_host.client import AgentsListResult, Host, HostError, RunList, RunSnapshot
from subagent_host.mcp_face.arguments import (
    DEFAULT_WAIT_SECONDS,
    MAX_WAIT_SECONDS,
    SpawnArguments,
    WaitArguments,
)
from subagent_host.mcp_face.permissions import Elicit, PermissionAsker, by_policy
from subagent_host.mcp_face.render import (
    BY_POLICY,
    REFUSED_AS_POLICY,
    agents_text,
    interrupt_text,
    run_text,
    runs_text,
    send_text,
)
from subagent_host.mcp_face.waiting import Report, wait_for_run
from subagent_host.openrpc.schemas import Direction, Schema, standalone_schema
from subagent_host.planning.request import LaunchRequest
from subagent_host.rpc.param_problems import ParamProblem, param_problems, summary
from subagent_host.rpc.wire import (
    AgentsListParams,
    CloseParams,
    InterruptParams,
    InterruptResult,
    SendParams,
    SendResult,
    SpawnParams,
    StatusParams,
    StopParams,
    make_converter,
)

# What only `status {since}` answers (events replayed): never in the face's results.
REPLAY_ONLY: Final = ("events", "firstRetainedSeq")

Answer = tuple[object, str]
"""A tool's result: the protocol's result (a wire type: the structured content) and its text."""


@attrs.frozen
class Caller:
    """What one tool call has of the MCP client that made it."""

    report: Report
    """Sends a line of progress (nothing when the call gave no progress token)."""
    elicit: Elicit | None
    """Asks the human a question through the client; None when the client cannot."""
    asker: PermissionAsker
    """Asks the permissions of the runs this face started (with `elicit`)."""


Run = Callable[[Host, Any, Caller], Awaitable[Answer]]


@attrs.frozen
class Tool:
    """One tool: what it is called, what it does, what it takes and answers, and its call."""

    name: str
    description: str
    arguments: type[Any]
    """The attrs type its arguments are read as; its schema is the tool's `inputSchema`."""
    results: tuple[type[Any], ...]
    """The types its structured content may be; their schema is its `outputSchema`."""
    run: Run
    leave_out: tuple[str, ...] = ()
    """Wire keys of `arguments` the tool does not offer: not in its schema, refused."""
    read_only: bool = False

    def input_schema(self) -> Schema:
        schema = standalone_schema([self.arguments], Direction.PARAMS, leave_out=self.leave_out)
        if "waitSeconds" in schema["properties"]:  # the face's own bound (`_seconds`)
            schema["properties"]["waitSeconds"].update(minimum=0, maximum=MAX_WAIT_SECONDS)
        return schema

    def output_schema(self) -> Schema:
        return standalone_schema(self.results, Direction.RESULT, leave_out=REPLAY_ONLY)


async def spawn(host: Host, arguments: SpawnArguments, caller: Caller) -> Answer:
    """Start the run in the background (shielded: a cancelled call leaves it running), ask
    its permissions of the human if the client can elicit, then wait for it as asked."""
    seconds = _seconds(arguments.wait_seconds, default=0)
    # Nobody here could answer a permission for a client that cannot elicit: the server does.
    asked = arguments if caller.elicit is not None else by_policy(arguments)
    launch = {field.name: getattr(asked, field.name) for field in attrs.fields(LaunchRequest)}
    params = SpawnParams(**{**launch, "mode": "background"})
    started = asyncio.ensure_future(host.call("spawn", params, RunSnapshot))
    started.add_done_callback(_retrieved)  # a cancelled caller no longer reads its outcome
    try:
        run = await asyncio.shield(started)
    except HostError as exc:
        if asked is not arguments:  # its words name `policy`: say where that came from
            exc.add_note(REFUSED_AS_POLICY)
        raise
    if caller.elicit is not None:
        caller.asker.follow(run, caller.elicit)
    run = await wait_for_run(host, run, seconds, caller.report)
    return run, run_text(run) + (f"\n{BY_POLICY}" if asked is not arguments else "")


async def wait(host: Host, arguments: WaitArguments, caller: Caller) -> Answer:
    seconds = _seconds(arguments.wait_seconds, default=DEFAULT_WAIT_SECONDS)
    run = await host.status(arguments.run_id)
    run = await wait_for_run(host, run, seconds, caller.report)
    return run, run_text(run)


async def status(host: Host, arguments: StatusParams, caller: Caller) -> Answer:
    if arguments.run_id is None:
        listing = await host.status()
        return listing, runs_text(listing)
    run = await host.status(arguments.run_id)
    return run, run_text(run)


async def stop(host: Host, arguments: StopParams, caller: Caller) -> Answer:
    run = await host.call("stop", arguments, RunSnapshot)
    return run, run_text(run)


async def send(host: Host, arguments: SendParams, caller: Caller) -> Answer:
    result = await host.call("run/send", arguments, SendResult)
    return result, send_text(arguments.run_id, result)


async def interrupt(host: Host, arguments: InterruptParams, caller: Caller) -> Answer:
    result = await host.call("run/interrupt", arguments, InterruptResult)
    return result, interrupt_text(arguments.run_id, result)


async def close(host: Host, arguments: CloseParams, caller: Caller) -> Answer:
    run = await host.call("run/close", arguments, RunSnapshot)
    return run, run_text(run)


async def agents_list(host: Host, arguments: AgentsListParams, caller: Caller) -> Answer:
    result = await host.agents_list(all_=arguments.all_)
    return result, agents_text(result)


TOOLS: Final[Mapping[str, Tool]] = {
    tool.name: tool
    for tool in (
        Tool(
            "spawn",
            "Delegate work to a supervised subagent: a coding-agent CLI (pi, claude, codex) given "
            "a prompt, a named agent definition, or a command (argv, no shell); or several at "
            "once (tasks), in order (chain) or as a workflow. Answers at once with the run's id "
            f"and status; waitSeconds (at most {MAX_WAIT_SECONDS}) waits for the end within this "
            "call. Follow a run with wait, status and stop: it ends, whatever happens, when this "
            "server does.",
            SpawnArguments,
            (RunSnapshot,),
            spawn,
            leave_out=("mode", "stream"),
        ),
        Tool(
            "wait",
            "Wait for a run to end, up to waitSeconds (default "
            f"{DEFAULT_WAIT_SECONDS}, at most {MAX_WAIT_SECONDS}); answers its status, final "
            "output, usage and error. A run still going when the time is up goes on: wait again.",
            WaitArguments,
            (RunSnapshot,),
            wait,
            read_only=True,
        ),
        Tool(
            "status",
            "A run's status, output, usage and error now (runId), or this session's runs, "
            "newest first (no runId).",
            StatusParams,
            (RunSnapshot, RunList),
            status,
            leave_out=("since",),
            read_only=True,
        ),
        Tool(
            "stop",
            "Stop a run: every process of it is ended (SIGTERM, then SIGKILL after the grace); "
            "answers its final status.",
            StopParams,
            (RunSnapshot,),
            stop,
        ),
        Tool(
            "send",
            "Send a message to a run's interactive child (spawned with interactive: true), which "
            "lives on after each turn: delivery queue (the default) when its current turn ends, "
            "steer into the current turn where its CLI can take it. Then call wait for the "
            "reply: it answers when the child waits for input again.",
            SendParams,
            (SendResult,),
            send,
        ),
        Tool(
            "interrupt",
            "End the current turn of a run's interactive child (its model stops; the child "
            "lives on and takes the next message); nothing is done when no turn runs.",
            InterruptParams,
            (InterruptResult,),
            interrupt,
        ),
        Tool(
            "close",
            "Close a run's interactive children (or one: index): each finishes its turn and "
            "exits; answers the run's final status.",
            CloseParams,
            (RunSnapshot,),
            close,
        ),
        Tool(
            "agents_list",
            "The named agent definitions spawn's agent can run, with their descriptions; "
            "all: true also lists those the configuration disables, each saying why.",
            AgentsListParams,
            (AgentsListResult,),
            agents_list,
            read_only=True,
        ),
    )
}


class BadArguments(Exception):
    """Arguments the server would refuse as params (-32602): `message` in its words."""

    def __init__(self, problems: list[ParamProblem]) -> None:
        self.problems = problems
        self.message = summary(problems)
        super().__init__(self.message)


CONVERTER: Final = make_converter()
"""The wire's own converter: arguments are read, and results written, as the server does."""


def read_arguments(tool: Tool, arguments: Mapping[str, Any]) -> Any:
    """The arguments as `tool.arguments`; raises BadArguments naming every problem, in the
    wire's words (camelCase paths), as the server would for the same params."""
    offered = [key for key in arguments if key in tool.leave_out]
    if offered:
        raise BadArguments([ParamProblem(key, "unknown field") for key in offered])
    try:
        return CONVERTER.structure(dict(arguments), tool.arguments)
    except (cattrs.BaseValidationError, ValueError, TypeError) as exc:
        raise BadArguments(param_problems(exc)) from None


def _retrieved(future: asyncio.Future[RunSnapshot]) -> None:
    if not future.cancelled():
        future.exception()


def _seconds(given: int | None, *, default: int) -> int:
    seconds = default if given is None else given
    if not 0 <= seconds <= MAX_WAIT_SECONDS:
        raise BadArguments(
            [ParamProblem("waitSeconds", f"{seconds} is out of range (0..{MAX_WAIT_SECONDS})")]
        )
    return seconds
