"""A permission asked by the real Claude Code CLI (pinned, against the loopback mock LLM),
answered from another process: `subagent-host show` lists it, `subagent-host permit`
allows it, `watch`'s `r` key rejects one; each answer is recorded as given by
`client:terminal`, through the server's control socket (protocol.md §10.1, §23.4).

What the mock can drive: only a shell tool call (Claude Code's `Bash`), so the asked tool
is a command with a redirect (`printf x > written.txt`), which Claude Code asks about.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from subagent_host.terminal.views import short_id
from subagent_host.values.events import PermissionEvent, TurnEvent
from tests.backends.fixtures.record_claude_stream import WRITE_COMMAND, WRITTEN
from tests.e2e.agents import CLAUDE_SPAWN, claude_environment, needs_cli
from tests.mock_llm import MockLLM
from tests.terminal.test_live_commands import command
from tests.terminal.test_stop import EXIT_S, Server, serving
from tests.terminal.test_watch import quits_cleanly, watch_command
from tests.terminal.tmux import needs_tmux, terminal

pytestmark = needs_cli("claude")


@asynccontextmanager
async def asking(tmp_path: Path) -> AsyncIterator[tuple[Server, str, PermissionEvent, Path]]:
    """A server whose interactive claude child (approvals by the client) asks to run the
    write; the run, the `permission` event and the child's directory. Afterwards the run
    is closed and nothing of it or of the server is left (`serving`)."""
    work = tmp_path / "work"
    work.mkdir()
    with MockLLM(tool_command=WRITE_COMMAND) as mock:
        env = claude_environment(tmp_path, mock.base_url)
        async with serving(tmp_path, env=env) as server:
            spawned: Any = await server.host.request(
                "spawn",
                {
                    **CLAUDE_SPAWN,
                    "prompt": "write it please",
                    "cwd": str(work),
                    "interactive": True,
                    "approvals": "client",
                    "stream": True,
                },
            )
            run_id: str = spawned["runId"]
            asked = await first_permission(server, run_id)
            yield server, run_id, asked, work
            assert (await command(server.state, "close", run_id))[0] == 0


async def first_permission(server: Server, run_id: str) -> PermissionEvent:
    async with asyncio.timeout(EXIT_S):
        async for event in server.host.events(run_id):
            if isinstance(event.event, PermissionEvent):
                return event.event
    raise AssertionError("the run ended before its child asked")


async def answered(server: Server, run_id: str) -> PermissionEvent:
    """The run's `permission` `answered` event, once its turn ended."""
    events = []
    async with asyncio.timeout(EXIT_S):
        async for event in server.host.events(run_id):
            events.append(event.event)
            if isinstance(event.event, TurnEvent) and event.event.phase == "end":
                break
    (found,) = [e for e in events if isinstance(e, PermissionEvent) and e.stage == "answered"]
    return found


async def test_show_lists_the_pending_permission_and_permit_allows_it_as_the_terminal(
    tmp_path: Path,
) -> None:
    async with asking(tmp_path) as (server, run_id, asked, work):
        name = short_id(run_id)
        code, shown, _err = await command(server.state, "show", name)
        assert code == 0
        assert "pending permissions" in shown
        assert (
            f"{asked.permission_id} child 0 asks: Bash (execute): {WRITE_COMMAND}"
            " [allow-once, allow-always, reject-once, reject-always]" in shown
        )
        assert f"subagent-host permit {name} {asked.permission_id} allow|reject" in shown
        assert not (work / WRITTEN).exists()

        code, out, err = await command(server.state, "permit", name, asked.permission_id, "allow")
        assert (code, err) == (0, "")
        assert out == (
            f"{asked.permission_id} answered allow-once: Bash (execute): {WRITE_COMMAND}\n"
        )
        told = await answered(server, run_id)
        assert (told.option_id, told.answered_by) == ("allow-once", "client:terminal")
        assert (work / WRITTEN).exists()

        again = await command(server.state, "permit", name, asked.permission_id, "allow")
        assert again[0] == 1 and f"has no pending permission '{asked.permission_id}'" in again[2]
        code, logged, _err = await command(server.state, "logs", name)
        assert f"» permission {asked.permission_id} answered: allow-once by client:terminal" in (
            logged
        )
        code, shown, _err = await command(server.state, "show", name)
        assert "pending permissions" not in shown


@needs_tmux
async def test_watch_shows_the_pending_permission_and_r_rejects_it(tmp_path: Path) -> None:
    async with asking(tmp_path) as (server, run_id, asked, work):
        async with terminal(watch_command(server.state), width=200) as term:
            await term.shows(rf"› {short_id(run_id)}\s+running")
            shown = re.escape(asked.permission_id[:10])
            await term.shows(
                rf"\? {shown}.*asks.*Bash \(execute\).*a allow once · r reject  printf"
            )
            await term.keys("r")
            await term.shows(rf"{re.escape(asked.permission_id)} answered reject-once")
            told = await answered(server, run_id)
            assert (told.option_id, told.answered_by) == ("reject-once", "client:terminal")
            await term.shows(r"\A(?![\s\S]*\basks\b)")  # its row went once it was answered
            await term.keys("a")  # nothing is pending now: said so, nothing answered
            await term.shows(rf"run {short_id(run_id)} waits on no permission")
            await quits_cleanly(term)
        assert not (work / WRITTEN).exists()
