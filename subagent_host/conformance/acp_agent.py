"""A small ACP agent that plays a scripted behaviour, written on the official SDK.

    python -m subagent_host.conformance.acp_agent [SCENARIO] [--count N] [--state DIR]

It speaks the Agent Client Protocol (JSON-RPC 2.0 over stdio, one message a line)
through `acp.run_agent`, so what it says is the SDK's own framing and models. It is
the ACP agent the tests and the conformance harness (`--with-agents`) configure as an
ACP backend: it lives in the package because the installed harness starts it where no
tests directory exists. It needs the `acp` extra (`agent-client-protocol`); nothing of
the server is imported, and nothing imports it (it is run as a process).

`normal` (the default):
- `initialize` answers protocol version 1, `agentInfo {name: "acp-test-agent",
  version}`, `agentCapabilities {loadSession: true}`.
- `session/new` answers a new session id and the modes `default` (asks before edits
  and commands) and `yolo` (asks nothing), starting in `default`.
- `session/prompt`: echoes the prompt (`echo: ` then the prompt's text, two chunks),
  then plays each line of the prompt that is a directive:
  `plan` (a plan of three entries, then the same plan with the first completed),
  `run: COMMAND` (an `execute` tool: `sh -c COMMAND` in the session's cwd, its
  output as the tool's content), `write: PATH=TEXT` (an `edit` tool writing the file
  under the cwd), `read: PATH` (a `read` tool). In mode `default`, `execute` and
  `edit` tools first ask `session/request_permission` (options `allow` allow_once,
  `reject` reject_once) and run only when allowed. Ends with an empty chunk whose
  `_meta.usage` counts the prompt's words in and the chunks' words out (as Qwen Code
  reports a model response's usage), then `{stopReason: "end_turn"}`.
- `session/cancel` ends the running turn `cancelled`, killing the command it runs
  (its own process group, by pid).
- `session/load` replays the session's history (`user_message_chunk`s and
  `agent_message_chunk`s), then answers. Each session's history is a JSON file in
  the state directory (`--state`, else `$ACP_TEST_AGENT_STATE`, else
  `.acp-test-agent` under the agent's cwd), so a second process can load it.

Misbehaviours (each otherwise `normal`):
- `exit`: exits 3 at once, before reading anything.
- `silent`: never answers `initialize` (ends when its stdin closes).
- `wrong-version`: answers `initialize` with protocol version 2.
- `huge-line`: its prompt's first chunk is one line of 10 MB of text.
- `flood`: its prompt sends `--count` (100000) text chunks of one word.
- `other-session`: before its own chunks, a chunk, a tool call and a permission
  request for another session id.
- `late-permission`: asks a permission right after its turn's answer.
- `not-json`: prints a line that is not JSON during its turn.
- `ask-client`: asks `fs/read_text_file`, `terminal/create` and an extension method
  (`_test/ask`), waits for each answer, and says what each answered.
- `auth`: `initialize` lists the auth method `test-key` (type `env_var`, needing
  `ACP_TEST_AGENT_KEY`); `session/new` and `session/load` are refused `auth_required`
  (-32000) until `authenticate {methodId: "test-key"}` succeeded, which it does only
  when the agent's own environment has `ACP_TEST_AGENT_KEY` set (else the error
  -32602 `ACP_TEST_AGENT_KEY is not set`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final, Literal, cast

import acp
from acp import schema

NAME: Final = "acp-test-agent"
VERSION: Final = "1.0.0"
SCENARIOS: Final = (
    "normal",
    "exit",
    "silent",
    "wrong-version",
    "huge-line",
    "flood",
    "other-session",
    "late-permission",
    "not-json",
    "ask-client",
    "auth",
)
HUGE_LINE_BYTES: Final = 10 * 1024 * 1024
FLOOD_COUNT: Final = 100_000
STATE_ENV: Final = "ACP_TEST_AGENT_STATE"
ASKING: Final = "default"
MODES: Final = (
    schema.SessionMode(id=ASKING, name="Default", description="Asks before edits and commands"),
    schema.SessionMode(id="yolo", name="YOLO", description="Runs every tool without asking"),
)
ALLOW: Final = "allow"
ASKS_FOR: Final = frozenset({"execute", "edit"})
PLAN: Final = ("read the task", "do the work", "report")
OTHER_SESSION: Final = "another-session"
AUTH_METHOD: Final = "test-key"
AUTH_KEY: Final = "ACP_TEST_AGENT_KEY"
INVALID_PARAMS: Final = -32602


class Session:
    """One session: its cwd, mode, history, and the turn it runs."""

    def __init__(self, session_id: str, cwd: str, history: list[dict[str, str]]) -> None:
        self.session_id = session_id
        self.cwd = cwd
        self.mode = ASKING
        self.history = history
        self.cancelled = asyncio.Event()
        self.command: asyncio.subprocess.Process | None = None


class TestAgent:
    """The ACP agent (`acp.Agent`), playing `scenario`."""

    def __init__(
        self, scenario: str, count: int, state: Path, writer: asyncio.StreamWriter
    ) -> None:
        self._scenario = scenario
        self._count = count
        self._state = state
        self._writer = writer  # the SDK's own stdout writer: a raw line goes in order
        self._sessions: dict[str, Session] = {}
        self._tools = 0
        self._late: set[asyncio.Task[Any]] = set()
        self._client: acp.Client | None = None
        self._authenticated = scenario != "auth"

    def on_connect(self, conn: acp.Client) -> None:
        self._client = conn

    @property
    def client(self) -> acp.Client:
        assert self._client is not None
        return self._client

    async def initialize(
        self, protocol_version: int, client_capabilities: Any = None, **kwargs: Any
    ) -> schema.InitializeResponse:
        if self._scenario == "silent":
            await asyncio.Event().wait()  # never answered; cancelled when stdin closes
        version = 2 if self._scenario == "wrong-version" else acp.PROTOCOL_VERSION
        key = schema.AuthEnvVar(name=AUTH_KEY)
        methods: list[Any] = (
            [schema.EnvVarAuthMethod(type="env_var", id=AUTH_METHOD, name="A key", vars=[key])]
            if self._scenario == "auth"
            else []
        )
        return schema.InitializeResponse(
            protocol_version=version,
            agent_info=schema.Implementation(name=NAME, version=VERSION),
            agent_capabilities=schema.AgentCapabilities(load_session=True),
            auth_methods=methods,
        )

    async def authenticate(self, method_id: str, **kwargs: Any) -> schema.AuthenticateResponse:
        if method_id != AUTH_METHOD:
            raise acp.RequestError(INVALID_PARAMS, f"no auth method {method_id}")
        if not os.environ.get(AUTH_KEY):
            raise acp.RequestError(INVALID_PARAMS, f"{AUTH_KEY} is not set")
        self._authenticated = True
        return schema.AuthenticateResponse()

    def _needs_auth(self) -> None:
        if not self._authenticated:
            raise acp.RequestError.auth_required({"authMethods": [AUTH_METHOD]})

    async def new_session(self, cwd: str, **kwargs: Any) -> schema.NewSessionResponse:
        self._needs_auth()
        session = Session(uuid.uuid4().hex, cwd, [])
        self._sessions[session.session_id] = session
        self._save(session)
        return schema.NewSessionResponse(session_id=session.session_id, modes=_modes(ASKING))

    async def load_session(
        self, cwd: str, session_id: str, **kwargs: Any
    ) -> schema.LoadSessionResponse:
        self._needs_auth()
        path = self._path(session_id)
        if not path.is_file():
            raise acp.RequestError.invalid_params({"sessionId": f"no session {session_id}"})
        session = Session(session_id, cwd, json.loads(path.read_text()))
        self._sessions[session_id] = session
        for said in session.history:
            text = acp.text_block(said["text"])
            if said["role"] == "user":
                await self.client.session_update(session_id, acp.update_user_message(text))
            else:
                await self.client.session_update(session_id, acp.update_agent_message(text))
        return schema.LoadSessionResponse(modes=_modes(session.mode))

    async def set_session_mode(
        self, session_id: str, mode_id: str, **kwargs: Any
    ) -> schema.SetSessionModeResponse:
        if mode_id not in {mode.id for mode in MODES}:
            raise acp.RequestError.invalid_params({"modeId": f"no mode {mode_id}"})
        self._sessions[session_id].mode = mode_id
        return schema.SetSessionModeResponse()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        session = self._sessions.get(session_id)
        if session is not None:
            session.cancelled.set()

    async def prompt(
        self, session_id: str, prompt: Sequence[Any], **kwargs: Any
    ) -> schema.PromptResponse:
        session = self._sessions[session_id]
        session.cancelled.clear()
        text = "".join(b.text for b in prompt if isinstance(b, schema.TextContentBlock))
        session.history.append({"role": "user", "text": text})
        said: list[str] = []
        stop = await self._play(session, text, said)
        session.history.append({"role": "agent", "text": "".join(said)})
        self._save(session)
        if self._scenario == "late-permission":
            # Written after this answer: the SDK queues the answer before the task runs.
            task = asyncio.create_task(self._ask(session, "late", "execute", "a late tool"))
            self._late.add(task)
            task.add_done_callback(self._late.discard)
        return schema.PromptResponse(stop_reason=stop)

    async def _play(self, session: Session, text: str, said: list[str]) -> Any:
        """The turn: the scenario's part, the echo, the directives, the usage."""
        await self._misbehave(session, said)
        for chunk in ("echo: ", text):
            await self._say(session, chunk, said)
        for line in text.splitlines():
            if session.cancelled.is_set():
                break
            await self._directive(session, line.strip(), said)
        if session.cancelled.is_set():
            return "cancelled"
        words = len("".join(said).split())
        usage = {"inputTokens": len(text.split()), "outputTokens": words, "totalTokens": 0}
        usage["totalTokens"] = usage["inputTokens"] + words
        last = schema.AgentMessageChunk(
            session_update="agent_message_chunk",
            content=acp.text_block(""),
            field_meta={"usage": usage},
        )
        await self.client.session_update(session.session_id, last)
        return "end_turn"

    async def _misbehave(self, session: Session, said: list[str]) -> None:
        if self._scenario == "huge-line":
            await self._say(session, "x" * HUGE_LINE_BYTES, [])
        elif self._scenario == "flood":
            for _ in range(self._count):
                await self._say(session, "w ", said)
        elif self._scenario == "other-session":
            other = OTHER_SESSION
            await self.client.session_update(other, acp.update_agent_message_text("not yours"))
            tool = acp.start_tool_call("other-tool", "not yours", kind="execute")
            await self.client.session_update(other, tool)
            await self._ask(Session(other, session.cwd, []), "other-tool", "execute", "no")
        elif self._scenario == "not-json":
            self._writer.write(b"this is not JSON\n")
            await self._writer.drain()
        elif self._scenario == "ask-client":
            await self._ask_client(session, said)

    async def _ask_client(self, session: Session, said: list[str]) -> None:
        """Each request a client may refuse, and what it answered."""
        asks = {
            "fs/read_text_file": self.client.read_text_file(
                session_id=session.session_id, path=str(Path(session.cwd, "x"))
            ),
            "terminal/create": self.client.create_terminal(
                session_id=session.session_id, command="true"
            ),
            "_test/ask": self.client.ext_method("test/ask", {}),
        }
        for method, asked in asks.items():
            try:
                await asked
                answer = "answered"
            except acp.RequestError as error:
                answer = f"error {error.code}"
            await self._say(session, f"{method}: {answer}\n", said)

    async def _directive(self, session: Session, line: str, said: list[str]) -> None:
        if line == "plan":
            entries = [acp.plan_entry(step, priority="high") for step in PLAN]
            await self.client.session_update(session.session_id, acp.update_plan(entries))
            entries[0] = acp.plan_entry(PLAN[0], priority="high", status="completed")
            await self.client.session_update(session.session_id, acp.update_plan(entries))
        elif line.startswith("run:"):
            await self._tool(session, "execute", line[4:].strip(), said)
        elif line.startswith("write:"):
            await self._tool(session, "edit", line[6:].strip(), said)
        elif line.startswith("read:"):
            await self._tool(session, "read", line[5:].strip(), said)

    async def _tool(self, session: Session, kind: Any, argument: str, said: list[str]) -> None:
        self._tools += 1
        tool_id = f"tool-{self._tools}"
        await self.client.session_update(
            session.session_id, acp.start_tool_call(tool_id, argument, kind=kind, status="pending")
        )
        if session.mode == ASKING and kind in ASKS_FOR:
            if not await self._ask(session, tool_id, kind, argument):
                update = acp.update_tool_call(tool_id, status="failed")
                await self.client.session_update(session.session_id, update)
                return
        if session.cancelled.is_set():
            return
        update = acp.update_tool_call(tool_id, status="in_progress")
        await self.client.session_update(session.session_id, update)
        status: Literal["completed", "failed"] = "completed"
        try:
            output = await self._run(session, kind, argument)
        except (OSError, ValueError, RuntimeError) as error:
            output, status = f"failed: {error}", "failed"
        if session.cancelled.is_set():
            status = "failed"
        content = [acp.tool_content(acp.text_block(output))]
        update = acp.update_tool_call(tool_id, status=status, content=content)
        await self.client.session_update(session.session_id, update)
        await self._say(session, f"{kind}: {status}\n", said)

    async def _ask(self, session: Session, tool_id: str, kind: Any, title: str) -> bool:
        """Whether the client allows the tool (a cancelled outcome is a no)."""
        options = [
            schema.PermissionOption(option_id=ALLOW, name="Allow", kind="allow_once"),
            schema.PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
        ]
        call = schema.ToolCallUpdate(tool_call_id=tool_id, title=title, kind=kind)
        try:
            answer = await self.client.request_permission(
                session_id=session.session_id, tool_call=call, options=options
            )
        except acp.RequestError:
            return False
        outcome = answer.outcome
        return isinstance(outcome, schema.AllowedOutcome) and outcome.option_id == ALLOW

    async def _run(self, session: Session, kind: str, argument: str) -> str:
        """The tool's work, in the session's cwd; a command ends when the turn is
        cancelled."""
        if kind == "edit":
            name, _, text = argument.partition("=")
            await asyncio.to_thread(Path(session.cwd, name).write_text, text)
            return f"wrote {name}"
        if kind == "read":
            return await asyncio.to_thread(Path(session.cwd, argument).read_text)
        command = await asyncio.create_subprocess_exec(
            "sh",
            "-c",
            argument,
            cwd=session.cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,  # its own group: a cancel ends all it started
        )
        session.command = command
        output = asyncio.ensure_future(command.communicate())
        cancelled = asyncio.ensure_future(session.cancelled.wait())
        try:
            await asyncio.wait({output, cancelled}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            cancelled.cancel()
            if not output.done():
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(command.pid, signal.SIGKILL)
            stdout, _ = await output
            session.command = None
        return stdout.decode("utf-8", "replace")

    async def _say(self, session: Session, text: str, said: list[str]) -> None:
        said.append(text)
        await self.client.session_update(session.session_id, acp.update_agent_message_text(text))

    def _path(self, session_id: str) -> Path:
        return self._state / f"{session_id}.json"

    def _save(self, session: Session) -> None:
        self._state.mkdir(parents=True, exist_ok=True)
        self._path(session.session_id).write_text(json.dumps(session.history))


def _modes(current: str) -> schema.SessionModeState:
    return schema.SessionModeState(current_mode_id=current, available_modes=list(MODES))


def parse(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="acp_agent", description=__doc__.splitlines()[0])
    parser.add_argument("scenario", nargs="?", default="normal", choices=SCENARIOS)
    parser.add_argument("--count", type=int, default=FLOOD_COUNT, help="chunks of `flood`")
    parser.add_argument("--state", help="the directory of the sessions' histories")
    return parser.parse_args(argv)


async def serve(args: argparse.Namespace) -> None:
    state = Path(args.state or os.environ.get(STATE_ENV) or Path.cwd() / ".acp-test-agent")
    reader, writer = await acp.stdio_streams()
    agent = TestAgent(args.scenario, args.count, state, writer)
    # Only the methods it plays: the SDK answers the others -32601 itself.
    await acp.run_agent(cast(acp.Agent, agent), writer, reader)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.scenario == "exit":
        return 3
    asyncio.run(serve(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
