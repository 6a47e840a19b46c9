"""The MCP server over stdio: the SDK's low-level `Server`, its two handlers, and the
`subagent-host serve` child every tool call goes through.

Lifecycle (protocol.md §22): the serve child is started first (`command.py`, before
the SDK is imported, which takes about as long as the child's start), in a session of
its own, so that a client ending this process's group (the SDK's stdio client sends
SIGTERM, then SIGKILL, to the group after 2 s) cannot cut the child's stop sequence
short. When the MCP client closes our stdin, the SDK's loop
ends, and the child's stdin is closed: it stops every run still going, as `serve`
does at the end of its input (§6), and exits. If this process is killed instead, the
kernel closes that pipe for it: the child sees the same end of input.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import sys
from typing import Any, Final, cast

import anyio
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from subagent_host import SERVER_NAME, __version__
from subagent_host.client import Host, HostConnectionError, HostError
from subagent_host.mcp_face.permissions import PermissionAsker, can_elicit
from subagent_host.mcp_face.render import diagnostics_lines
from subagent_host.mcp_face.stdin import HeldArguments
from subagent_host.mcp_face.tools import (
    CONVERTER,
    TOOLS,
    BadArguments,
    Caller,
    Tool,
    read_arguments,
)
from subagent_host.rpc.wire import make_converter
from subagent_host.values.facts import Diagnostic

INSTRUCTIONS: Final = (
    "Runs coding-agent CLIs (pi, claude, codex) and commands as supervised subagents. "
    "spawn starts a run and answers its runId at once (or waits up to waitSeconds); wait, "
    "status and stop follow it. Long work: spawn, then call wait until the status is "
    "terminal (completed, failed, cancelled, timed-out, limit-reached, interrupted). "
    "A child spawned with interactive: true lives on after each turn: send it messages, "
    "interrupt its turn, close it."
)
# Error data comes from the server: read as the client reads results, a key that a newer
# server adds is ignored.
_READER: Final = make_converter(forbid_extra_keys=False)
PROG: Final = f"{SERVER_NAME} mcp"
EXIT_NOT_STARTED: Final = 1
# A server whose output ended before its first answer is exiting: how long to wait to
# read its exit status.
SERVER_EXIT_S: Final = 5.0


class Progress:
    """One tool call's progress: numbered lines, sent only if the caller gave a token."""

    def __init__(self, ctx: ServerRequestContext[Any]) -> None:
        self._ctx = ctx
        self._sent = 0

    async def __call__(self, message: str) -> None:
        self._sent += 1
        await self._ctx.session.report_progress(self._sent, None, message)


def build_server(host: Host, held: HeldArguments, asker: PermissionAsker) -> Server[Any]:
    """The MCP server whose tools call `host`; a call whose arguments the SDK could not
    read takes them from `held` (stdin.py); the permissions of the runs it starts are
    asked through `asker` when the client can elicit (permissions.py)."""

    backends: list[tuple[str, ...]] = []  # the server's, once asked: they never change

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        if not backends:
            backends.append(await backend_names(host))
        return types.ListToolsResult(tools=[describe(tool, backends[0]) for tool in TOOLS.values()])

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        tool = TOOLS.get(params.name)
        if tool is None:
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {params.name!r}")
        arguments = held.take_arguments(params.meta, params.arguments or {})
        session = ctx.session
        # Not related to this call: a permission is asked whenever the child asks, long
        # after the spawn that started it was answered (the connection's own channel).
        elicit = (
            session.elicit_form
            if can_elicit(session.client_capabilities, session.protocol_version)
            else None
        )
        return await call(tool, host, arguments, Caller(Progress(ctx), elicit, asker))

    return Server(
        SERVER_NAME,
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def backend_names(host: Host) -> tuple[str, ...]:
    """The backends the server has (`ping`): the built-in ones and every configured ACP
    agent; none when it cannot say (the schemas then name none)."""
    try:
        answer = await host.ping()
    except (HostError, HostConnectionError):
        return ()
    return tuple(backend.id for backend in answer.backends)


@functools.cache  # the schemas never change while a server runs
def describe(tool: Tool, backends: tuple[str, ...] = ()) -> types.Tool:
    """`tool` as MCP lists it; a `backend` argument names `backends`, the server's own
    (a configured ACP agent's name is no word a model could guess)."""
    schema = tool.input_schema()
    chosen = schema["properties"].get("backend")
    if chosen is not None and backends:
        chosen["examples"] = list(backends)
        names = ", ".join(f"`{name}`" for name in backends)
        chosen["description"] = f"one of this server's backends: {names}; absent: chosen "
        chosen["description"] += "as protocol.md §8.1 says."
    return types.Tool(
        name=tool.name,
        description=tool.description,
        input_schema=schema,
        output_schema=tool.output_schema(),
        annotations=types.ToolAnnotations(
            read_only_hint=tool.read_only,
            destructive_hint=tool.name in ("stop", "close"),
            idempotent_hint=tool.read_only,
            open_world_hint=tool.name in ("spawn", "send"),
        ),
    )


async def call(
    tool: Tool, host: Host, arguments: dict[str, Any], caller: Caller
) -> types.CallToolResult:
    """Run one tool call. What the protocol refuses (bad arguments, an unknown run, a launch
    rejected, a message to a child that is not interactive or no longer running) is a tool
    error the model can read and correct, in the protocol's words; a serve child that is
    gone is an MCP error."""
    try:
        result, text = await tool.run(host, read_arguments(tool, arguments), caller)
    except BadArguments as exc:
        return refused(f"{exc.message}")
    except HostError as exc:
        return refused(error_text(exc))
    except HostConnectionError as exc:
        raise MCPError(types.INTERNAL_ERROR, f"the subagent-host server is gone: {exc}") from exc
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=CONVERTER.unstructure(result),
    )


def refused(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def error_text(exc: HostError) -> str:
    """The server's error as a model reads it: code and message, then each diagnostic, then
    what the face added to it (its notes: the `policy` it sent for `client`)."""
    lines = [f"error {exc.code}: {exc.message}"]
    data = exc.data if isinstance(exc.data, dict) else {}
    diagnostics = data.get("diagnostics")
    if isinstance(diagnostics, list):
        lines += diagnostics_lines(
            [_READER.structure(item, Diagnostic) for item in diagnostics if isinstance(item, dict)]
        )
    return "\n".join(lines + getattr(exc, "__notes__", []))


async def serve(process: asyncio.subprocess.Process) -> int:
    """Serve MCP on stdin/stdout until the client closes stdin, through the serve child
    `process` (started by command.py, NDJSON, in a session of its own), which is ended
    on the way out; 0 then, 1 when it could not start (its own line on stderr says why)."""
    async with Host.adopt(process) as host:
        try:
            await host.ping()  # a server that cannot start is told before any client waits
        except HostConnectionError:
            assert host.process is not None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(host.process.wait(), SERVER_EXIT_S)
            status = host.process.returncode  # None: still exiting; `Host` ends it
            print(f"{PROG}: the server could not start (exit status {status})", file=sys.stderr)
            return EXIT_NOT_STARTED
        held = HeldArguments()
        asker = PermissionAsker(host)
        server = build_server(host, held, asker)
        # Our own reader of stdin (a copy of fd 0, UTF-8 as the SDK reads it), through
        # `held`: the SDK would drop a call it cannot parse, unanswered.
        stdin = anyio.wrap_file(open(os.dup(0), encoding="utf-8", errors="replace"))  # noqa: SIM115, ASYNC230 - read in a worker thread by anyio
        lines = cast(anyio.AsyncFile[str], held.lines(stdin))
        try:
            async with stdin, stdio_server(stdin=lines) as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())
        finally:
            await asker.aclose()  # nobody is left to ask: the runs end with the serve child
    return 0
