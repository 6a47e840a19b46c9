"""The JSON log line (logs.py): one object per line, whatever the record holds."""

from __future__ import annotations

import json
import logging
import sys

from subagent_host.logs import JsonFormatter


def record(message: str, *args: object, **extra: object) -> logging.LogRecord:
    made = logging.LogRecord("subagent_host.test", logging.ERROR, __file__, 1, message, args, None)
    made.__dict__.update(extra)
    return made


def test_a_json_line_has_the_time_in_utc_milliseconds_and_the_run_fields_it_was_given() -> None:
    line = JsonFormatter().format(record("run %s: %d", "r1", 3, runId="r1", index=0, pid=42))
    entry = json.loads(line)
    assert entry.pop("time").endswith("Z") and len(line.splitlines()) == 1
    assert entry == {
        "level": "ERROR",
        "logger": "subagent_host.test",
        "message": "run r1: 3",
        "runId": "r1",
        "index": 0,
        "pid": 42,
    }


def test_an_exception_is_a_one_line_summary_and_its_traceback_in_one_string() -> None:
    try:
        raise ValueError("bad value\nsecond line")
    except ValueError:
        failed = record("it failed")
        failed.exc_info = sys.exc_info()
    line = JsonFormatter().format(failed)
    assert len(line.splitlines()) == 1
    entry = json.loads(line)
    assert entry["exc"] == "ValueError: bad value"
    assert entry["exception"].startswith("Traceback (most recent call last):")
    assert entry["exception"].endswith("ValueError: bad value\nsecond line")


def test_text_a_child_wrote_in_bad_bytes_still_makes_a_line_that_parses_and_encodes() -> None:
    line = JsonFormatter().format(
        record("stderr: %s", b"caf\xe9\n".decode("utf-8", "surrogateescape"))
    )
    line.encode("utf-8")  # no lone surrogate left
    assert json.loads(line)["message"].startswith("stderr: caf")
