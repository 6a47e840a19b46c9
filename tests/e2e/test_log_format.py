"""`--log-format json` and the INFO lines that tell a run's story (protocol.md §7).

A real server, real children, a real stop: every line the server writes to stderr is
read back as a machine would read it.
"""

from __future__ import annotations

import json
import re
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any, Final

import pytest

from tests.e2e.harness import (
    result_of,
    running_server,
    server_executable,
    state_args,
)
from tests.e2e.test_leftovers import started

pytestmark = pytest.mark.e2e

KEYS: Final = {"time", "level", "logger", "message"}
TIME: Final = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")
# Every process of its tree ignores SIGTERM: the stop must wait out the grace and SIGKILL.
STUBBORN: Final = 'trap "" TERM; echo ready; sleep 1000 & wait'
# Exits at once, leaving a process outside its group that the server must end.
LEAVES: Final = "setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo left"
PING: Final = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'


def json_lines(stderr: str) -> list[dict[str, Any]]:
    """Every stderr line as a JSON object with the four keys and an ISO 8601 UTC time."""
    lines = stderr.splitlines()
    assert lines, "the server logged nothing"
    entries = []
    for line in lines:
        entry = json.loads(line)
        assert isinstance(entry, dict) and KEYS <= entry.keys(), line
        assert TIME.fullmatch(entry["time"]), line
        datetime.fromisoformat(entry["time"])
        entries.append(entry)
    return entries


def story_of(entries: list[dict[str, Any]], run_id: str) -> list[str]:
    """The messages of the lines about one run, in order, with the run id taken out."""
    return [
        entry["message"].replace(run_id, "RUN") for entry in entries if entry.get("runId") == run_id
    ]


def assert_story(story: list[str], patterns: list[str]) -> None:
    assert len(story) == len(patterns), story
    for line, pattern in zip(story, patterns, strict=True):
        assert re.fullmatch(pattern, line), (line, pattern)


async def test_json_logs_at_info_tell_each_run_from_its_start_through_every_stop_step_to_its_end(
    tmp_path: Path,
) -> None:
    args = (*state_args(tmp_path), "--log-format", "json", "--log-level", "info")
    async with running_server(*args, "--grace-ms", "200") as server:
        done = await result_of(server, "spawn", {"command": ["echo", "hi"], "mode": "task"})
        assert done["status"] == "completed", done
        leaving = await result_of(
            server, "spawn", {"command": ["sh", "-c", LEAVES], "mode": "task"}
        )
        assert leaving["status"] == "completed", leaving
        stubborn, _ = await started(server, ["sh", "-c", STUBBORN])  # once it said ready
        stopped = await result_of(server, "stop", {"runId": stubborn, "graceMs": 200})
        assert stopped["status"] == "cancelled", stopped
        assert (await server.finish())[0] == 0
    entries = json_lines(server.stderr_text)

    pid = done["children"][0]["pid"]
    assert_story(
        story_of(entries, done["runId"]),
        [
            r"run RUN started: single, 1 child, session s1",
            rf"run RUN child 0 started: pid {pid}, backend command, attempt 1",
            r"run RUN child 0 ended: completed, exit code 0, after \d+\.\d{3} s",
            r"run RUN ended: completed, \d+\.\d{3} s after it was created",
        ],
    )

    pid = leaving["children"][0]["pid"]
    assert_story(
        story_of(entries, leaving["runId"]),
        [
            r"run RUN started: single, 1 child, session s1",
            rf"run RUN child 0 started: pid {pid}, backend command, attempt 1",
            rf"<Child pid={pid} exited 0>: SIGTERM sent to what it left \(1 process\); "
            r"grace 0\.500 s",
            rf"<Child pid={pid} exited 0>: stop done at sigterm: 1 process besides the child ended",
            r"run RUN child 0 ended: completed, exit code 0, after \d+\.\d{3} s",
            r"run RUN ended: completed, \d+\.\d{3} s after it was created",
        ],
    )

    pid = stopped["children"][0]["pid"]
    patterns = [
        r"run RUN started: single, 1 child, session s1",
        rf"run RUN child 0 started: pid {pid}, backend command, attempt 1",
        r"run RUN stopping \(stopped by the client\): SIGTERM to each running child's tree, "
        r"SIGKILL after 0\.200 s",
        rf"<Child pid={pid} running>: SIGTERM sent to its tree \(\d+ processes\); grace 0\.200 s",
        rf"<Child pid={pid} running>: grace of 0\.200 s elapsed: \d+ processes left",
        rf"<Child pid={pid} running>: SIGKILL sent to its tree \(\d+ processes\)",
        rf"<Child pid={pid} exited -9>: stop done at sigkill: 1 process besides the child ended",
        r"run RUN child 0 ended: cancelled \(stopped by the client\), signal SIGKILL, "
        r"after \d+\.\d{3} s",
        r"run RUN ended: cancelled \(stopped by the client\), \d+\.\d{3} s after it was created",
    ]
    assert_story(story_of(entries, stubborn), patterns)
    for run_id in (done["runId"], leaving["runId"], stubborn):  # a line naming a run carries its id
        assert all(e.get("runId") == run_id for e in entries if run_id in e["message"])
    about_children = [entry for entry in entries if "index" in entry]
    assert about_children and all(
        entry["index"] == 0
        and entry["pid"] in {run["children"][0]["pid"] for run in (done, leaving, stopped)}
        for entry in about_children
    )


def serve_once(*args: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: TID251 - a one-shot command, no event loop here
        [server_executable(), "--state-dir", str(tmp_path / "state"), *args],
        input=PING.decode(),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_text_logs_keep_their_format(tmp_path: Path) -> None:
    done = serve_once("--log-level", "info", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert lines and all(
        re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} INFO subagent_host\.[a-z_.]+: ", line)
        for line in lines
    ), lines
    assert lines[-1].endswith("INFO subagent_host.app: server stopped")


def test_the_settings_files_log_format_is_used_and_the_command_line_wins(tmp_path: Path) -> None:
    config = tmp_path / "subagents.json"
    config.write_text(json.dumps({"log_format": "json", "log_level": "info"}))
    done = serve_once("--config", str(config), tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json_lines(done.stderr)[-1]["message"] == "server stopped"
    done = serve_once("--config", str(config), "--log-format", "text", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[-1].endswith("INFO subagent_host.app: server stopped")


def test_a_bad_log_format_in_a_settings_file_is_a_warning_and_text_is_kept(
    tmp_path: Path,
) -> None:
    config = tmp_path / "subagents.json"
    config.write_text(json.dumps({"log_format": "xml"}))
    done = serve_once("--config", str(config), tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    (line,) = done.stderr.splitlines()
    assert " WARNING " in line and "log_format" in line and '"xml" is not one of text, json' in line


def test_a_bad_log_format_on_the_command_line_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = serve_once("--log-format", "xml", tmp_path=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    (line,) = done.stderr.splitlines()
    assert line.startswith("subagent-host: argument --log-format: invalid choice: 'xml' (choose")
    assert "json" in line and line.endswith(" (see 'subagent-host --help')")
