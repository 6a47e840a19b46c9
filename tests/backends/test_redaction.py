"""Redaction of a stream (backends/redaction.py): fed in chunks split anywhere, it gives
what one pass over the whole text gives, holding back no more than it must."""

from __future__ import annotations

import base64
import random
import re

import pytest

from subagent_host.backends.base import ParsedOutcome
from subagent_host.backends.redaction import (
    MIN_RUN_CHARS,
    Redaction,
    StreamRedactor,
    marker,
    secret_values,
)

RUN = rb"[A-Za-z0-9+/=_-]{200,}"


def at_once(data: bytes, secrets: tuple[bytes, ...], runs: bool) -> bytes:
    """The rule in one pass: every secret (longest first), then every long run."""
    for secret in secrets:
        data = data.replace(secret, marker(len(secret)))
    if runs:
        data = re.sub(RUN, lambda match: marker(len(match.group())), data)
    return data


def in_chunks(redaction: Redaction, data: bytes, sizes: random.Random) -> bytes:
    redactor = StreamRedactor(redaction)
    out, start = b"", 0
    while start < len(data):
        size = sizes.choice([1, 2, 7, sizes.randint(1, 300), 5000])
        out += redactor.feed(data[start : start + size])
        start += size
    return out + redactor.finish()


def test_any_split_gives_what_one_pass_gives() -> None:
    rng = random.Random(20261204)
    for _ in range(3000):
        secrets = tuple(
            sorted(
                {
                    rng.randbytes(rng.randint(0, 3)).hex().encode()
                    + rng.choice([b"Sk:", b"Sk", b""])
                    + rng.randbytes(rng.randint(4, 20)).hex().encode()
                    for _ in range(rng.randint(0, 2))
                },
                key=lambda value: (-len(value), value),
            )
        )
        pieces = []
        for _ in range(rng.randint(0, 12)):
            roll = rng.random()
            if roll < 0.3:
                pieces.append(base64.b64encode(rng.randbytes(rng.randint(100, 400))))
            elif roll < 0.5 and secrets:
                pieces.append(rng.choice(secrets))
            else:
                pieces.append(rng.choice([b" ", b"\n", b"words ", b"x" * rng.randint(1, 250)]))
        data = b"".join(pieces)
        runs = rng.random() < 0.7
        expected = at_once(data, secrets, runs)
        assert in_chunks(Redaction(secrets, runs), data, rng) == expected, (data, secrets)


def test_a_secret_split_in_two_is_held_back_until_it_is_whole() -> None:
    redactor = StreamRedactor(Redaction((b"hunter2-password",), base64=False))
    assert redactor.feed(b"login: hunter2-") == b"login: "
    assert redactor.feed(b"password ok\n") == b"[redacted: 16 bytes] ok\n"
    assert redactor.feed(b"hunter2-pass") == b""
    assert redactor.feed(b"port\n") == b"hunter2-passport\n"  # not the secret after all


def test_a_run_is_held_while_it_may_still_grow_and_counted_once_it_is_long() -> None:
    redactor = StreamRedactor(Redaction())
    assert redactor.feed(b"a " + b"Q" * 150) == b"a "
    assert redactor.feed(b"Q" * 10_000) == b""  # long enough: counted, not kept
    assert redactor.feed(b"Q" * 10_000) == b""
    assert redactor.feed(b"= end") == b"[redacted: 20151 bytes] "  # `end` may go on
    assert redactor.feed(b"\n") == b"end\n"
    assert redactor.feed(b"Q" * 199) == b""
    assert redactor.finish() == b"Q" * 199  # too short: the stream ended


def test_a_long_run_at_the_end_of_the_stream_is_redacted() -> None:
    redactor = StreamRedactor(Redaction())
    assert redactor.feed(b"x" * MIN_RUN_CHARS) == b""
    assert redactor.finish() == b"[redacted: 200 bytes]"


def test_secrets_stay_redacted_with_the_base64_rule_off() -> None:
    redaction = Redaction.of({"GITHUB_TOKEN": "ghp_" + "a" * 300}, base64=False)
    text = "token ghp_" + "a" * 300 + " and " + "b" * 300
    assert redaction.text(text) == "token [redacted: 304 bytes] and " + "b" * 300


def test_the_size_is_of_the_utf8_bytes_replaced() -> None:
    redaction = Redaction.of({"db_password": "pässwörd-€"})
    assert redaction.text("is pässwörd-€!") == "is [redacted: 14 bytes]!"


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("API_KEY", True),
        ("my_token", True),
        ("ClientSecret", True),
        ("PGPASSWORD", True),
        ("MONKEY", True),  # contains KEY: the rule is by name, plainly
        ("HOME", False),
        ("PATH", False),
    ],
)
def test_secret_names_contain_key_token_secret_or_password_in_any_case(
    name: str, secret: bool
) -> None:
    assert secret_values({name: "long-enough-value"}) == (("long-enough-value",) if secret else ())


def test_values_shorter_than_eight_characters_are_not_secrets() -> None:
    assert secret_values({"A_TOKEN": "1234567", "B_TOKEN": "12345678"}) == ("12345678",)


def test_an_outcome_is_redacted_and_measured_again() -> None:
    redaction = Redaction.of({"API_KEY": "sk-0123456789"})
    outcome = ParsedOutcome.answer("key sk-0123456789\n").failed(
        "exit-status", "said sk-0123456789", {"stderrTail": "sk-0123456789", "exitCode": 1}
    )
    redacted = redaction.outcome(outcome)
    assert redacted.final_text == "key [redacted: 13 bytes]\n"
    assert redacted.final_bytes == len(redacted.final_text) and redacted.final_lines == 1
    assert redacted.error_message == "said [redacted: 13 bytes]"
    assert redacted.error_data == {"stderrTail": "[redacted: 13 bytes]", "exitCode": 1}


def test_large_chunks_find_every_run_the_quick_look_might_skip() -> None:
    """Chunks of 4 KiB and more are first looked at every 7th byte: runs of 199 to 205
    characters at every offset, in text, are still found exactly."""
    rng = random.Random(7)
    text = b"the quick brown fox jumps over the lazy dog\n" * 200
    for length in range(195, 206):
        for offset in range(0, 14):
            where = 4096 + offset + rng.randint(0, 100) * 7
            data = text[:where] + b" " + b"Q" * length + b" " + text[where:]
            redaction = Redaction()
            expected = at_once(data, (), True)
            redactor = StreamRedactor(redaction)
            half = rng.randint(4096, len(data) - 4096)
            got = redactor.feed(data[:half]) + redactor.feed(data[half:]) + redactor.finish()
            assert got == expected, (length, offset, half)
            assert (marker(length) in got) == (length >= MIN_RUN_CHARS)
