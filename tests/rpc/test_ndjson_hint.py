"""Pretty-printed JSON sent to a server reading NDJSON: the first error says, once per
connection, that NDJSON is one JSON text per line; every other message is still answered."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from subagent_host.rpc.framing import NDJSON_HINT
from tests.e2e.harness import server_executable

PRETTY = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}, indent=2).encode()


def served(tmp_path: Path, *lines: bytes) -> list[dict[str, object]]:
    done = subprocess.run(  # noqa: TID251 - a one-shot server: it exits at the end of its input
        [server_executable(), "--state-dir", str(tmp_path / "state")],
        input=b"\n".join(lines) + b"\n",
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert b"Traceback" not in done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_pretty_printed_json_is_told_once_what_ndjson_is(tmp_path: Path) -> None:
    ping = b'{"jsonrpc":"2.0","id":%d,"method":"ping"}'
    replies = served(tmp_path, ping % 2, PRETTY, ping % 3, PRETTY, ping % 4)
    errors = [r["error"] for r in replies if "error" in r]
    assert len(errors) == 2 * PRETTY.count(b"\n") + 2  # one per line of each pretty text
    messages = [str(e["message"]) for e in errors]  # type: ignore[index]
    hinted = [m for m in messages if m.endswith(NDJSON_HINT)]
    assert hinted == [messages[0]]  # the first error of the connection, and only it
    assert messages[0].startswith("parse error: ")
    assert "one JSON text per line" in NDJSON_HINT
    answered = [r["id"] for r in replies if "result" in r]
    assert answered == [2, 3, 4]
    assert all(r["id"] is None for r in replies if "error" in r)


def test_a_whole_text_that_is_wrong_gets_no_hint(tmp_path: Path) -> None:
    replies = served(tmp_path, b'{"jsonrpc":"2.0","id":NaN,"method":"ping"}', PRETTY)
    messages = [str(r["error"]["message"]) for r in replies]  # type: ignore[index]
    assert not messages[0].endswith(NDJSON_HINT)  # a whole (wrong) JSON text, not a piece
    assert messages[1].endswith(NDJSON_HINT) and len(messages) == 1 + PRETTY.count(b"\n") + 1
