"""Redaction end to end (protocol.md §12.1): a real command child and the real pinned pi
CLI against the loopback mock LLM print a secret they were given and a long base64 run;
neither reaches the reply, `status`, a `run/event` (`output` or `stderr`), the SQLite files
or the server's log,
and `redact: false` keeps the run but never the secret."""

from __future__ import annotations

import base64
import os
import signal
import sys
from pathlib import Path
from typing import Any, Final

import pytest

from tests.e2e.agents import server_args
from tests.e2e.harness import ServerProcess, result_of, running_server
from tests.e2e.test_agent_clis import Cli, each_cli
from tests.e2e.test_agent_events import spawn_and_collect
from tests.e2e.test_runs import next_event
from tests.mock_llm import KEYWORD_ANSWER_NOW, KEYWORD_REPEAT, MockLLM

Json = dict[str, Any]
SECRET: Final = "sk-live-" + "0123456789abcdef" * 4  # 72 characters, all of the alphabet
RUN: Final = base64.b64encode(bytes(range(256)) * 2).decode()[:300]  # 300 characters
SECRET_MARK: Final = f"[redacted: {len(SECRET)} bytes]"
RUN_MARK: Final = f"[redacted: {len(RUN)} bytes]"

# Prints "start" and the first half of $API_TOKEN in one write, waits for SIGUSR1 (sent
# once the server was seen to have read that write), then the rest and a base64 run.
SPLIT_WRITER: Final = """
import os, signal, sys
secret = os.environ["API_TOKEN"]
half = len(secret) // 2
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
sys.stdout.write("start\\n" + secret[:half])
sys.stdout.flush()
signal.sigwait({signal.SIGUSR1})
sys.stdout.write(secret[half:] + "\\n" + os.environ["PAYLOAD"] + "\\nend\\n")
sys.stderr.write("err " + secret + "\\n")
sys.exit(3)
"""


def stored_bytes(state: Path) -> bytes:
    """Every byte of the server's SQLite files (database, WAL) and logs."""
    return b"".join(path.read_bytes() for path in sorted(state.rglob("*")) if path.is_file())


async def split_run(server: ServerProcess, redact: bool | None) -> tuple[Json, list[Json]]:
    """Run SPLIT_WRITER with the secret in its environment, streamed; its snapshot and
    its `output` and `stderr` events."""
    spawn: Json = {
        "command": [sys.executable, "-c", SPLIT_WRITER],
        "env": {"API_TOKEN": SECRET, "PAYLOAD": RUN},  # values are never stored
        "stream": True,
    }
    if redact is not None:
        spawn["redact"] = redact
    run = await result_of(server, "spawn", spawn)
    first = await next_event(server, "output")  # the server has read the first write
    assert first["text"] == "start\n"  # the secret's first half is held back
    pid = (await result_of(server, "status", {"runId": run["runId"]}))["children"][0]["pid"]
    os.kill(pid, signal.SIGUSR1)  # the child of this test's run, by its pid
    while (await next_event(server, "status"))["status"] in ("queued", "running"):
        pass
    replay = await result_of(server, "status", {"runId": run["runId"], "since": 0})
    outputs = [e for e in replay["events"] if e["type"] in ("output", "stderr")]
    return replay, outputs


async def test_a_secret_split_between_two_reads_and_a_base64_run_are_redacted_everywhere(
    tmp_path: Path,
) -> None:
    async with running_server(*server_args(tmp_path)) as server:
        snapshot, outputs = await split_run(server, None)
        await server.finish()
    streamed = "".join(event["text"] for event in outputs if event["type"] == "output")
    expected = f"start\n{SECRET_MARK}\n{RUN_MARK}\nend\n"
    assert streamed == expected
    assert "".join(e["text"] for e in outputs if e["type"] == "stderr") == f"err {SECRET_MARK}\n"
    child = snapshot["children"][0]
    assert child["output"]["text"] == expected
    assert child["output"]["bytes"] == len(expected)
    assert child["error"]["data"]["stderrTail"] == f"err {SECRET_MARK}\n"
    assert child["output"]["stderrTail"] == f"err {SECRET_MARK}\n"  # the tail kept beside it
    # Stored as sent: a later server reads the same from disk.
    async with running_server(*server_args(tmp_path)) as server:
        again = await result_of(server, "status", {"runId": snapshot["runId"], "since": 0})
        await server.finish()
    assert again["children"][0]["output"] == child["output"]
    assert [e for e in again["events"] if e["type"] in ("output", "stderr")] == outputs
    stored = stored_bytes(tmp_path / "state")
    assert SECRET.encode() not in stored and RUN.encode() not in stored
    assert SECRET[: len(SECRET) // 2].encode() not in stored
    assert SECRET not in server.stderr_text and RUN not in server.stderr_text


async def test_redact_false_keeps_a_base64_run_but_never_a_secret(tmp_path: Path) -> None:
    async with running_server(*server_args(tmp_path)) as server:
        snapshot, outputs = await split_run(server, False)
        await server.finish()
    expected = f"start\n{SECRET_MARK}\n{RUN}\nend\n"
    assert "".join(event["text"] for event in outputs if event["type"] == "output") == expected
    assert "".join(e["text"] for e in outputs if e["type"] == "stderr") == f"err {SECRET_MARK}\n"
    assert snapshot["children"][0]["output"]["text"] == expected
    stored = stored_bytes(tmp_path / "state")
    assert SECRET.encode() not in stored and RUN.encode() in stored


@each_cli()
async def test_an_agents_message_events_and_answer_are_redacted(
    tmp_path: Path, mock: MockLLM, cli: Cli
) -> None:
    env = cli.mock_environment(tmp_path, mock)
    prompt = f"{KEYWORD_ANSWER_NOW} {KEYWORD_REPEAT}{SECRET} {KEYWORD_REPEAT}{RUN}"
    given = {**cli.spawn.get("env", {}), "MY_SECRET": SECRET}
    spawn = {**cli.spawn, "env": given, "mode": "task", "stream": "raw"}
    async with running_server(*server_args(tmp_path), env=env) as server:
        run, events = await spawn_and_collect(server, {**spawn, "prompt": prompt})
        kept, kept_events = await spawn_and_collect(
            server, {**spawn, "prompt": prompt, "redact": False}
        )
        status = await result_of(server, "status", {"runId": run["runId"], "since": 0})
        await server.finish()
    assert run["status"] == "completed", run
    text = "".join(e["text"] for e in events if e["type"] == "message")
    # The mock streams its answer in three deltas (pi and codex show them as they come):
    # the secret and the run are cut apart.
    assert text.endswith(f" {SECRET_MARK} {RUN_MARK}"), text
    assert run["children"][0]["output"]["text"] == text
    for event in [*events, *status["events"]]:
        assert SECRET not in str(event) and RUN not in str(event)
    assert SECRET[:20] not in str(status) + str(events)
    kept_text = "".join(e["text"] for e in kept_events if e["type"] == "message")
    assert kept_text.endswith(f" {SECRET_MARK} {RUN}"), kept_text
    assert SECRET not in str(kept) + str(kept_events)


async def test_output_past_what_is_kept_is_counted_as_printed(tmp_path: Path) -> None:
    """A command's stdout past its kept head is neither kept nor sent: it is counted as
    printed, not redacted (what the head holds is)."""
    body = "a few words on a line\n" * 10_000  # 220,000 bytes: past the 64 KiB kept
    script = (
        "import os, sys; s = os.environ['API_TOKEN']; "
        "sys.stdout.write(s + '\\n' + 'a few words on a line\\n' * 10_000 + s + '\\n')"
    )
    spawn = {
        "command": [sys.executable, "-c", script],
        "env": {"API_TOKEN": SECRET},
        "mode": "task",
    }
    async with running_server(*server_args(tmp_path)) as server:
        run = await result_of(server, "spawn", spawn)
        await server.finish()
    output = run["children"][0]["output"]
    assert output["text"].startswith(SECRET_MARK + "\na few words") and output["truncated"]
    assert SECRET not in str(run) and output["lines"] == 10_002
    printed = 2 * len(SECRET) + 2 + len(body)
    saved = len(SECRET) - len(SECRET_MARK)
    # The first secret is in the head; the last one was redacted too only if it came in
    # the read that filled the head.
    assert output["bytes"] in (printed - saved, printed - 2 * saved)


# Prints a base64 run from its environment, then fails, so that it can be resumed.
RUN_AND_FAIL: Final = [
    sys.executable,
    "-c",
    "import os, sys; sys.stdin.read(); print(os.environ['PAYLOAD']); sys.exit(3)",
]


@pytest.mark.parametrize("redact", [False, None])
async def test_a_resume_redacts_as_its_childs_launch_did(
    tmp_path: Path, redact: bool | None
) -> None:
    spawn: Json = {"command": RUN_AND_FAIL, "env": {"PAYLOAD": RUN}, "prompt": "", "mode": "task"}
    if redact is not None:
        spawn["redact"] = redact
    shown = RUN if redact is False else RUN_MARK
    async with running_server(*server_args(tmp_path)) as server:
        run = await result_of(server, "spawn", spawn)
        assert run["status"] == "failed" and run["output"]["text"] == shown + "\n"
        preflight = await result_of(
            server, "preflight", {k: v for k, v in spawn.items() if k != "mode"}
        )
        assert preflight["plan"]["children"][0].get("redact") == redact
        approval = await result_of(
            server, "preflight", {"resume": {"runId": run["runId"], "message": "again"}}
        )
        assert approval["contract"]["projection"].get("redact") == redact
        resumed = await result_of(server, "resume", {"token": approval["token"], "mode": "task"})
        await server.finish()
    child = resumed["children"][0]
    assert child["attempt"] == 2 and child["output"]["text"] == shown + "\n", child
