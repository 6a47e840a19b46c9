"""The five tools, each a protocol method seen through MCP: its arguments, schemas and call.

| tool | arguments | the protocol's method | structured content |
|---|---|---|---|
| `spawn` | `SpawnArguments` | `spawn`, `mode: "background"`, then `wait` | RunSnapshot |
| `wait` | `WaitArguments` | `status {runId}`, following its `run/event`s | RunSnapshot |
| `status` | `StatusParams` but `since` | `status` | RunSnapshot, or RunList |
| `stop` | `StopParams` | `stop` | RunSnapshot |
| `agents_list` | `AgentsListParams` | `agents/list` | AgentsListResult |

Schemas are generated from these types (`openrpc.schemas.standalone_schema`), so a
tool takes and answers exactly what the protocol's types say. Each holds the types it
refers to once, under `$defs` (MCP shares no definitions between tools, and a client
loads every tool's schemas when it starts); a RunSnapshot's `status {since}` fields
are left out of the output schemas, since the face never asks with `since`.
Arguments are read with the wire's own converter: an argument the server would
refuse is refused here with the server's words (`invalid params: ...`), before
anything is sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

import attrs
import cattrs

from subagent_host.client import AgentsListResult, Host, RunList, RunSnapshot
from subagent_host.mcp_face.arguments import (
    DEFAULT_WAIT_SECONDS,
    MAX_WAIT_SECONDS,
    SpawnArguments,
    WaitArguments,
)
from subagent_host.mcp_face.render import agents_text, run_text, runs_text
from subagent_host.mcp_face.waiting import Report, wait_for_run
from subagent_host.openrpc.schemas import Direction, Schema, standalone_schema
from subagent_host.planning.request import LaunchRequest
from subagent_host.rpc.param_problems import ParamProblem, param_problems, summary
from subagent_host.rpc.wire import (
    AgentsListParams,
    SpawnParams,
    StatusParams,
    StopParams,
    make_converter,
)

# What only `status {since}` answers (events replayed): never in the face's results.
REPLAY_ONLY: Final = ("events", "firstRetainedSeq")

Answer = tuple[object, str]
"""A tool's result: the protocol's result (a wire type: the structured content) and its text."""
Run = Callable[[Host, Any, Report], Awaitable[Answer]]


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


async def spawn(host: Host, arguments: SpawnArguments, report: Report) -> Answer:
    """Start the run in the background (shielded: a cancelled call leaves it running), then
    wait for it as asked."""
    seconds = _seconds(arguments.wait_seconds, default=0)
    launch = {field.name: getattr(arguments, field.name) for field in attrs.fields(LaunchRequest)}
    params = SpawnParams(**{**launch, "mode": "background"})
    started = asyncio.ensure_future(host.call("spawn", params, RunSnapshot))
    started.add_done_callback(_retrieved)  # a cancelled caller no longer reads its outcome
    run = await asyncio.shield(started)
    run = await wait_for_run(host, run, seconds, report)
    return run, run_text(run)


async def wait(host: Host, arguments: WaitArguments, report: Report) -> Answer:
    seconds = _seconds(arguments.wait_seconds, default=DEFAULT_WAIT_SECONDS)
    run = await wait_for_run(host, await host.status(arguments.run_id), seconds, report)
    return run, run_text(run)


async def status(host: Host, arguments: StatusParams, report: Report) -> Answer:
    if arguments.run_id is None:
        listing = await host.status()
        return listing, runs_text(listing)
    run = await host.status(arguments.run_id)
    return run, run_text(run)


async def stop(host: Host, arguments: StopParams, report: Report) -> Answer:
    run = await host.call("stop", arguments, RunSnapshot)
    return run, run_text(run)


async def agents_list(host: Host, arguments: AgentsListParams, report: Report) -> Answer:
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
