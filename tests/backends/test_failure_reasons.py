"""The reason shown is the reason: what each pinned agent CLI printed when it could not
answer (recorded offline by tests/fixtures/cli_failures/record.sh: no key, not logged
in, unknown model, unknown provider, no network), and the line the error message
takes from it."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from subagent_host.backends.claude import ClaudeParser
from subagent_host.backends.codex import CodexParser
from subagent_host.backends.command import CommandParser
from subagent_host.backends.exits import ProcessExit
from subagent_host.backends.jsonlines import JsonEventParser
from subagent_host.backends.pi import PiParser

FIXTURES = Path(__file__).parent.parent / "fixtures" / "cli_failures"
EXITED_1 = ProcessExit(exit_code=1, signal=None)
EXITED_0 = ProcessExit(exit_code=0, signal=None)
# codex reconnects for ever without a network: the recording (and a server) ends it.
TERMINATED = ProcessExit(exit_code=None, signal=signal.SIGTERM)
PARSERS: dict[str, type[JsonEventParser]] = {
    "pi": PiParser,
    "claude": ClaudeParser,
    "codex": CodexParser,
}


@pytest.mark.parametrize(
    ("name", "exit_status", "code", "message"),
    [
        (
            "pi-no-key",
            EXITED_1,
            "exit-status",
            "pi exited with status 1: No API key found for the selected model.",
        ),
        (
            "pi-unknown-provider",
            EXITED_1,
            "exit-status",
            'pi exited with status 1: Unknown provider "nosuch". '
            "Use --list-models to see available providers/models.",
        ),
        ("pi-unknown-model", EXITED_0, "agent-error", "pi: Connection error."),
        ("pi-no-network", EXITED_0, "agent-error", "pi: Connection error."),
        (
            "claude-not-logged-in",
            EXITED_1,
            "agent-error",
            "claude: Not logged in · Please run /login",
        ),
        (
            "claude-unknown-model",
            EXITED_1,
            "agent-error",
            "claude: API Error: Unable to connect to API (ConnectionRefused)",
        ),
        (
            "claude-no-network",
            EXITED_1,
            "agent-error",
            "claude: API Error: Unable to connect to API (ConnectionRefused)",
        ),
        (
            "codex-no-key",
            TERMINATED,
            "exit-status",
            "codex was killed by SIGTERM: Reconnecting... waiting for network "
            "(Connection failed: error sending request)",
        ),
        (
            "codex-unknown-provider",
            EXITED_1,
            "exit-status",
            "codex exited with status 1: Model provider `nosuch` not found",
        ),
        (
            "codex-no-provider-key",
            EXITED_1,
            "agent-error",
            "codex: Missing environment variable: `LOCAL_API_KEY`.",
        ),
        (
            "codex-no-network",
            TERMINATED,
            "exit-status",
            "codex was killed by SIGTERM: Reconnecting... waiting for network "
            "(Connection failed: error sending request)",
        ),
    ],
)
def test_the_message_of_a_recorded_failure_is_the_line_that_says_why(
    name: str, exit_status: ProcessExit, code: str, message: str
) -> None:
    parser = PARSERS[name.partition("-")[0]]()
    parser.on_stdout((FIXTURES / f"{name}.stdout").read_bytes())
    parser.on_stderr((FIXTURES / f"{name}.stderr").read_bytes())
    outcome = parser.outcome(exit_status)
    assert (outcome.error_code, outcome.error_message) == (code, message)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        # What a command that runs a CLI says when it fails: its reason, not a path.
        # pi's hint ends in `See:` and the paths follow: all three passed over.
        ("pi-no-key", "command exited with status 1: No API key found for the selected model."),
        (
            "codex-unknown-provider",
            "command exited with status 1: Model provider `nosuch` not found",
        ),
    ],
)
def test_a_command_child_says_its_last_line_that_is_no_path_url_or_introduction(
    name: str, message: str
) -> None:
    parser = CommandParser()
    parser.on_stderr((FIXTURES / f"{name}.stderr").read_bytes())
    outcome = parser.outcome(EXITED_1)
    assert (outcome.error_code, outcome.error_message) == ("exit-status", message)
