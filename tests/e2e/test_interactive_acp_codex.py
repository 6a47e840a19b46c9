"""codex-acp (pinned, scripts/install-agents; it runs the pinned codex's app-server) as
an ACP agent, started with the launch a configured backend would have (`CODEX_ACP`,
`codex_acp_env`: a CODEX_HOME whose config.toml points codex at the mock's Responses
API) and driven only through `AcpConversation`. Nothing leaves 127.0.0.1; no process
of a test survives it."""

from __future__ import annotations

import contextlib
import os
from functools import partial
from pathlib import Path
from typing import Final, Unpack

from subagent_host.backends.events import ToolEnded, ToolKind, ToolStarted
from subagent_host.backends.interactive.base import (
    Delivery,
    ProtocolFailure,
    TurnEndedLeavingCommands,
    TurnStarted,
)
from tests.backends.fixtures.driven import Watched
from tests.backends.fixtures.record_acp import (
    WRITE_COMMAND,
    WRITTEN,
    AgentOptions,
    DrivenAgent,
    a_message_then_closing_stdin,
    a_second_agent_loads_the_session,
    wait_for_sleep,
    watched_agent,
)
from tests.backends.fixtures.record_codex import API_KEY_VARIABLE, MODEL, codex_config
from tests.e2e.agents import AGENT_BIN, needs_cli
from tests.mock_llm import (
    KEYWORD_ANSWER_NOW,
    KEYWORD_ESCALATE,
    KEYWORD_REPEAT,
    KEYWORD_SLEEP_TOOL,
    MockLLM,
)

pytestmark = needs_cli("codex-acp")

CODEX_ACP: Final = AGENT_BIN / "codex-acp"
SLEEP_COMMAND: Final = "sleep 30"
ASKING: Final = "read-only"
"""codex-acp's mode in which codex asks before leaving its read-only sandbox."""


def codex_acp_env(tmp_path: Path, base_url: str) -> dict[str, str]:
    """The launch's environment: a scratch HOME and CODEX_HOME, whose config.toml names
    the model and the mock as its provider (the key the provider reads is in the env)."""
    home, codex_home = tmp_path / "home", tmp_path / "codex-home"
    home.mkdir(exist_ok=True)
    codex_home.mkdir(exist_ok=True)
    (codex_home / "config.toml").write_text(f'model = "{MODEL}"\n' + codex_config(base_url))
    return {
        "PATH": os.environ["PATH"],
        "HOME": str(home),
        "CODEX_HOME": str(codex_home),
        API_KEY_VARIABLE: "dummy",
    }


def codex_acp(
    tmp_path: Path, mock: MockLLM, prompt: str, **options: Unpack[AgentOptions]
) -> contextlib.AbstractAsyncContextManager[Watched[DrivenAgent]]:
    """codex-acp in `tmp_path`/work, against `mock`."""
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    env = codex_acp_env(tmp_path, mock.openai_base_url)
    return watched_agent((str(CODEX_ACP),), env, work, prompt=prompt, **options)


async def test_a_tool_turn_then_a_message_then_closing_stdin_ends_codex_acp(
    tmp_path: Path,
) -> None:
    with MockLLM(tool_command=WRITE_COMMAND) as mock:
        async with codex_acp(tmp_path, mock, "list the files please") as watched:
            child = watched.child
            assert (await child.turn_ended()).stop_reason == "end_turn"
            assert child.acp.agent_info is not None
            assert child.acp.agent_info["name"] == "@agentclientprotocol/codex-acp"
            [started] = [r for r in child.reactions if isinstance(r, ToolStarted)]
            assert started.kind is ToolKind.EXECUTE and started.summary == WRITE_COMMAND
            [ended] = [r for r in child.reactions if isinstance(r, ToolEnded)]
            assert not ended.is_error
            assert (tmp_path / "work" / WRITTEN).exists()
            assert watched.text_since(0).startswith("MOCK-FINAL: scenario=after-tool")
            await a_message_then_closing_stdin(watched)


async def test_codex_acp_offers_no_mode_that_asks_before_every_command(tmp_path: Path) -> None:
    """The host's approvals find no asking mode (`ASKING_MODES`) among codex-acp's: the
    child fails before its first prompt (`approvals-unsupported`), since none of its
    commands would be asked for."""
    with MockLLM() as mock:
        prompt = f"{KEYWORD_ANSWER_NOW} hello"
        async with codex_acp(tmp_path, mock, prompt, ask_before_tools=True) as watched:
            child = watched.child
            failure = await child.next(ProtocolFailure)
            assert failure.reason.startswith("approvals-unsupported: "), failure
            offered = {mode.mode_id for mode in child.acp.modes}
            assert offered == {"read-only", "workspace-write", "agent", "agent-full-access"}
            assert child.acp.asking_mode() is None
            assert not [r for r in child.reactions if isinstance(r, TurnStarted)]
            assert mock.requests_containing("hello") == []  # the model was never asked


async def test_in_read_only_codex_asks_to_leave_its_sandbox_and_the_answer_decides(
    tmp_path: Path,
) -> None:
    with MockLLM(tool_command=WRITE_COMMAND) as mock:
        prompt = f"{KEYWORD_ESCALATE} write it please"
        async with codex_acp(tmp_path, mock, prompt, mode=ASKING) as watched:
            child = watched.child
            written = tmp_path / "work" / WRITTEN
            asked = await child.permission()
            assert asked.kind is ToolKind.EXECUTE and asked.summary == WRITE_COMMAND
            assert {option.option_id for option in asked.options} >= {"allow_once", "cancel"}
            await child.carry_out(child.conversation.answer(asked.permission_id, "allow_once"))
            assert (await child.turn_ended()).stop_reason == "end_turn"
            assert written.exists()
            written.unlink()
            await child.send("m1", f"{KEYWORD_ESCALATE} write again", Delivery.QUEUE)
            asked = await child.permission()
            await child.carry_out(child.conversation.answer(asked.permission_id, "cancel"))
            # codex's "No, and tell Codex what to do differently" ends the turn.
            assert (await child.turn_ended()).stop_reason == "interrupted"
            assert not written.exists()
            assert await child.close() == 0


async def test_an_interrupt_mid_tool_ends_the_turn_naming_the_command_left_running(
    tmp_path: Path,
) -> None:
    with MockLLM(sleep_command=SLEEP_COMMAND) as mock:
        prompt = f"{KEYWORD_SLEEP_TOOL} please"
        async with codex_acp(tmp_path, mock, prompt) as watched:
            child = watched.child
            await wait_for_sleep(child)
            watched.look()
            await child.next(ToolStarted)
            await child.carry_out(child.conversation.interrupt())
            ended = await child.turn_ended()
            # codex ends the turn but not the command: it is told as left running (the
            # supervision ends it with the child's tree).
            assert isinstance(ended, TurnEndedLeavingCommands)
            assert ended.stop_reason == "interrupted"
            assert [left.summary for left in ended.left_running] == [SLEEP_COMMAND]
            start = len(child.reactions)
            await child.send("m1", f"{KEYWORD_ANSWER_NOW} {KEYWORD_REPEAT}after")
            await child.turn_ended()
            assert watched.text_since(start).endswith(" after")


async def test_a_second_codex_acp_loads_the_session_and_continues_it(tmp_path: Path) -> None:
    with MockLLM() as mock:
        await a_second_agent_loads_the_session(partial(codex_acp, tmp_path, mock))
