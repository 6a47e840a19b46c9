"""An agent CLI retrying a model that does not answer, from its recorded lines: the
parser tells the CLI's own reason while it retries (`retrying`), one activity line
per new reason rather than one per notice, and forgets it once the model answers."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Final

import pytest

from subagent_host.backends.claude import ClaudeParser
from subagent_host.backends.codex import CodexParser, retry_reason
from subagent_host.backends.jsonlines import JsonEventParser
from subagent_host.backends.pi import PiParser

FIXTURES: Final = Path(__file__).resolve().parent / "fixtures"
PARSERS: Final[dict[str, Callable[[], JsonEventParser]]] = {
    "pi": PiParser,
    "claude": ClaudeParser,
    "codex": CodexParser,
}
# Each CLI's recorded stream with its model unreachable, cut where it still retries
# (before the CLI gives up on its own), and what it says while retrying.
RETRYING: Final = {
    "pi": ("server_down_retries.jsonl", "auto_retry_end", "3/3: Connection error."),
    "claude": ("server_down_retries.jsonl", '"assistant"', "3/3: unknown"),
    "codex": (
        "server_down.jsonl",
        None,
        "waiting for network: Connection failed: error sending request",
    ),
}


def retrying_lines(cli: str) -> list[bytes]:
    name, cut_at, _ = RETRYING[cli]
    lines = (FIXTURES / cli / name).read_bytes().splitlines(keepends=True)
    if cut_at is None:
        return lines
    return lines[: next(i for i, line in enumerate(lines) if cut_at.encode() in line)]


def notice_of(lines: list[bytes]) -> bytes:
    """The last retry notice among `lines`."""
    return next(line for line in reversed(lines) if b"retry" in line or b"Reconnecting" in line)


def feed(parser: JsonEventParser, lines: list[bytes]) -> list[str]:
    activity: list[str] = []
    for line in lines:
        parser.on_stdout(line)
        activity += parser.activity()
    return activity


@pytest.mark.parametrize("cli", sorted(RETRYING))
def test_a_cli_retrying_its_model_tells_its_reason(cli: str) -> None:
    parser = PARSERS[cli]()
    activity = feed(parser, retrying_lines(cli))
    reason = RETRYING[cli][2]
    assert parser.retrying == reason
    assert activity[-1] == f"reconnecting to the model ({reason})"


@pytest.mark.parametrize("cli", sorted(RETRYING))
def test_the_same_notice_again_is_one_activity_line(cli: str) -> None:
    lines = retrying_lines(cli)
    notice = notice_of(lines)
    parser = PARSERS[cli]()
    first = feed(parser, lines)
    again = feed(parser, [notice] * 12)
    assert again == []  # told once, not thirteen times
    assert first.count(first[-1]) == 1


def test_codexs_changing_count_is_a_line_each() -> None:
    parser = CodexParser()
    notices = [
        {
            "type": "error",
            "message": f"Reconnecting... {n}/5 (failed to lookup address information)",
        }
        for n in (1, 1, 2)
    ]
    activity = feed(parser, [json.dumps(n).encode() + b"\n" for n in notices])
    assert activity == [
        "reconnecting to the model (1/5: failed to lookup address information)",
        "reconnecting to the model (2/5: failed to lookup address information)",
    ]
    assert parser.retrying == "2/5: failed to lookup address information"
    assert not parser.retries_spent


def test_codexs_last_counted_retry_spends_its_budget_until_an_answer() -> None:
    parser = CodexParser()
    last = {"type": "error", "message": "Reconnecting... 5/5 (failed to lookup address)"}
    feed(parser, [json.dumps(last).encode() + b"\n"])
    assert parser.retries_spent
    feed(parser, [ANSWERS["codex"].encode() + b"\n"])
    assert not parser.retries_spent and parser.retrying is None


@pytest.mark.parametrize(
    ("notice", "reason"),
    [
        (
            "Reconnecting... 2/5 (stream disconnected before completion: "
            "failed to lookup address information: Name or service not known)",
            "2/5: stream disconnected before completion: "
            "failed to lookup address information: Name or service not known",
        ),
        (
            "Reconnecting... waiting for network (Connection failed)",
            "waiting for network: Connection failed",
        ),
        ("Reconnecting... (timeout)", "timeout"),
        ("Reconnecting...", "Reconnecting..."),
        ("Reconnecting... 3/5", "3/5"),
    ],
)
def test_codexs_notice_is_read_as_a_count_and_a_reason(notice: str, reason: str) -> None:
    assert retry_reason(notice) == reason


ANSWERS: Final = {
    "pi": '{"type":"message_update","assistantMessageEvent":{"type":"text_delta","delta":"hi"}}',
    "claude": '{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"hi"}]}}',
    "codex": '{"type":"item.completed","item":{"id":"i1","type":"agent_message","text":"hi"}}',
}


@pytest.mark.parametrize("cli", sorted(RETRYING))
def test_an_answer_ends_the_retrying(cli: str) -> None:
    parser = PARSERS[cli]()
    feed(parser, retrying_lines(cli))
    feed(parser, [ANSWERS[cli].encode() + b"\n"])
    assert parser.retrying is None
    # A later retry is told again, even for the same reason.
    assert feed(parser, [notice_of(retrying_lines(cli))])[-1].startswith(
        "reconnecting to the model ("
    )
