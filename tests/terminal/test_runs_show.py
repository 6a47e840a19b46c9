"""`subagent-host runs` and `show`: the runs of a state directory, of every session and
every server, read while servers write (protocol.md §7)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import shutil
import sqlite3
import sys
from pathlib import Path
from typing import Any, Final

import pytest

from subagent_host.values.events import OutputEvent
from tests.terminal.inspecting import (
    COMMAND_TIMEOUT_S,
    assert_plain,
    command,
    on_a_terminal,
    server,
    state,
    task,
)
from tests.terminal.test_logs import wait_for

pytestmark = pytest.mark.e2e

FIXTURE: Final = Path(__file__).resolve().parents[1] / "fixtures" / "state_v1" / "state"
REQUIRED: Final = {
    "runId",
    "sessionId",
    "kind",
    "status",
    "createdAt",
    "head",
    "children",
    "instanceId",
}
NO_COLOR: Final = {"NO_COLOR": "1"}
COLOUR: Final = re.compile(r"\x1b\[(?:[0-9]+;)*(?:3[0-9]|9[0-7])(?:;[0-9]+)*m")
"""A select graphic rendition that sets a foreground colour (NO_COLOR leaves bold)."""
OPTIONAL: Final = {"label", "startedAt", "endedAt", "durationMs", "usage"}


def assert_run_line(line: dict[str, Any]) -> None:
    """The documented shape of one `runs --json` item (protocol.md §7)."""
    assert REQUIRED <= line.keys() <= REQUIRED | OPTIONAL, line
    assert None not in line.values(), line
    assert isinstance(line["children"], int) and isinstance(line["head"], str)
    assert len(line["runId"]) == 32 and line["createdAt"].endswith("Z")
    if "durationMs" in line:
        assert isinstance(line["durationMs"], int)


async def runs_json(tmp_path: Path, *args: str) -> list[dict[str, Any]]:
    finished = await command("runs", "--state-dir", str(state(tmp_path)), "--json", *args)
    assert finished.status == 0 and finished.stderr == "", finished
    lines: list[dict[str, Any]] = json.loads(finished.stdout)
    for line in lines:
        assert_run_line(line)
    return lines


async def test_runs_lists_every_session_of_two_servers_newest_first_while_they_serve(
    tmp_path: Path,
) -> None:
    async with server(tmp_path, "alpha") as first, server(tmp_path, "beta", "lsp") as second:
        one = await task(first, command=["echo", "one"], label="the first")
        two = await task(second, command=["sh", "-c", "echo two; echo 2 >&2"])
        three = await task(first, tasks=[{"command": ["true"]}, {"command": ["echo", "x"]}])
        listed = await runs_json(tmp_path)
    assert [line["runId"] for line in listed] == [three["runId"], two["runId"], one["runId"]]
    assert [line["sessionId"] for line in listed] == ["alpha", "beta", "alpha"]
    assert listed[0]["instanceId"] == listed[2]["instanceId"] != listed[1]["instanceId"]
    assert listed[0]["head"] == "true (+1 more)" and listed[0]["children"] == 2
    assert listed[1]["head"] == "sh -c 'echo two; echo 2 >&2'" and "label" not in listed[1]
    assert listed[2]["label"] == "the first" and listed[2]["head"] == "echo one"
    assert all(line["status"] == "completed" for line in listed)
    # The same, read again once both servers have ended.
    assert [line["runId"] for line in await runs_json(tmp_path)] == [
        line["runId"] for line in listed
    ]


async def test_runs_filters_by_session_and_limits_and_a_pipe_gets_plain_columns(
    tmp_path: Path,
) -> None:
    async with server(tmp_path, "alpha") as first, server(tmp_path, "beta", "lsp") as second:
        older = await task(first, command=["echo", "older"])
        newer = await task(first, command=["echo", "[bold]newer"], label="[red]not markup")
        other = await task(second, command=["false"])
    assert [line["runId"] for line in await runs_json(tmp_path, "--session", "alpha")] == [
        newer["runId"],
        older["runId"],
    ]
    assert [line["runId"] for line in await runs_json(tmp_path, "--limit", "1")] == [other["runId"]]
    table = await command("runs", "--state-dir", str(state(tmp_path)))
    assert table.status == 0 and table.stderr == ""
    assert_plain(table.stdout)
    header, *rows = table.stdout.splitlines()
    # Columns two spaces apart at least, the long one last.
    assert re.split(" {2,}", header) == [
        "RUN", "SESSION", "KIND", "STATUS", "STARTED", "TOOK", "TOKENS", "COST", "WHAT"
    ]  # fmt: skip
    assert [row.split()[:4] for row in rows] == [
        [other["runId"][:8], "beta", "single", "failed"],
        [newer["runId"][:8], "alpha", "single", "completed"],
        [older["runId"][:8], "alpha", "single", "completed"],
    ]
    # Every column starts where its header does: aligned, not wrapped at 80 columns.
    start = header.index("WHAT")
    assert [row[start:] for row in rows] == ["false", "[red]not markup", "echo older"]


async def test_on_a_terminal_runs_is_a_ruled_table_in_colour_that_fits_its_width(
    tmp_path: Path,
) -> None:
    long = "echo " + "very-long-argument " * 10
    async with server(tmp_path, "alpha") as host:
        run = await task(host, command=["sh", "-c", long])
    for colour in (True, False):
        shown = await on_a_terminal(
            100, "runs", "--state-dir", str(state(tmp_path)), **({} if colour else NO_COLOR)
        )
        assert ("\x1b[32mcompleted" in shown) is colour, repr(shown)  # green
        assert bool(COLOUR.search(shown)) is colour, repr(shown)
        plain = re.sub(r"\x1b\[[0-9;]*m", "", shown)
        header, rule, row = plain.splitlines()
        assert header.split() == [
            "RUN", "SESSION", "KIND", "STATUS", "STARTED", "TOOK", "TOKENS", "COST", "WHAT"
        ]  # fmt: skip
        assert set(rule) == {"─"} and all(len(line) <= 100 for line in (header, rule, row))
        assert row.startswith(f"{run['runId'][:8]}  alpha") and row.endswith("…")


async def test_runs_of_a_missing_or_empty_state_directory_says_so_in_one_line(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "nowhere"
    finished = await command("runs", "--state-dir", str(missing))
    assert (finished.status, finished.stdout, finished.stderr) == (
        0,
        f"no runs recorded in {missing}\n",
        "",
    )
    assert not missing.exists()  # a reader creates nothing
    assert (await command("runs", "--state-dir", str(missing), "--json")).stdout == "[]\n"
    async with server(tmp_path, "alpha"):
        pass
    finished = await command("runs", "--state-dir", str(state(tmp_path)), "--session", "alpha")
    assert finished.stdout == f"no runs recorded in {state(tmp_path)} of session alpha\n"


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--limit", "0"], "argument --limit: 0 is out of range (1..1000000)"),
        (["--limit", "x"], "argument --limit: 'x' is not a whole number"),
        (["--session", "a b"], "argument --session: 'a b' is not a valid session id"),
    ],
)
async def test_a_bad_option_of_runs_is_one_line_and_status_2(
    tmp_path: Path, option: list[str], message: str
) -> None:
    finished = await command("runs", "--state-dir", str(tmp_path), *option)
    assert finished.status == 2 and finished.stdout == ""
    assert finished.stderr.startswith(f"subagent-host runs: {message}")
    assert finished.stderr.count("\n") == 1


async def test_runs_and_show_read_a_state_directory_an_earlier_server_wrote_unchanged(
    tmp_path: Path,
) -> None:
    shutil.copytree(FIXTURE, state(tmp_path))
    database = state(tmp_path) / "subagent-host.sqlite3"
    before = hashlib.sha256(database.read_bytes()).hexdigest()
    listed = await runs_json(tmp_path)
    assert [(line["kind"], line.get("label"), line["head"]) for line in listed] == [
        ("workflow", None, "workflow fixture workflow"),
        ("chain", "a chain", "sh -c 'echo first' (+1 more)"),
        ("parallel", None, "sh -c 'echo a' (+1 more)"),
        ("single", "one", "sh -c 'echo single'"),
    ]
    shown = await command("show", listed[3]["runId"][:8], "--state-dir", str(state(tmp_path)))
    assert shown.status == 0 and "completed" in shown.stdout and "single\n" in shown.stdout
    assert hashlib.sha256(database.read_bytes()).hexdigest() == before


async def test_show_json_is_the_snapshot_status_answers_for_a_run_of_another_session(
    tmp_path: Path,
) -> None:
    async with server(tmp_path, "alpha") as host, server(tmp_path, "beta", "lsp"):
        run = await task(host, command=["sh", "-c", "echo out; echo err >&2; exit 4"], label="l")
        answered = await host.request("status", {"runId": run["runId"]})
        # Read from a server of another session: `show` knows no sessions.
        shown = await command(
            "show", run["runId"][:10], "--json", "--state-dir", str(state(tmp_path))
        )
    assert shown.status == 0 and shown.stderr == ""
    assert json.loads(shown.stdout) == answered
    assert answered["status"] == "failed" and answered["children"][0]["exitCode"] == 4


async def test_show_prints_the_run_its_children_their_errors_and_the_output_tail(
    tmp_path: Path,
) -> None:
    script = "for i in $(seq -w 1 30); do echo row-$i; done; echo 'why: no disk' >&2; exit 3"
    async with server(tmp_path, "alpha") as host:
        run = await task(
            host, tasks=[{"command": ["sh", "-c", script]}, {"command": ["echo", "fine"]}]
        )
    shown = await command("show", run["runId"], "--state-dir", str(state(tmp_path)))
    assert shown.status == 0 and shown.stderr == ""
    assert_plain(shown.stdout)
    text = shown.stdout
    for expected in (
        f"run          {run['runId']}",
        "session      alpha",
        "kind         parallel",
        "status       failed",
        "error        exit-status:",
        "child 0 error  exit-status: command exited with status 3",
        "  why: no disk",
        "output (last 20 lines)",
    ):
        assert expected in text, (expected, text)
    children = [line.split() for line in text.splitlines() if line[:2] in ("0 ", "1 ")]
    assert [row[:5] for row in children] == [
        ["0", "command", "failed", "1", children[0][4]],
        ["1", "command", "completed", "1", children[1][4]],
    ]
    assert "exit 3" in text and "exit 0" in text
    tail = text.split("output (last 20 lines)\n", 1)[1].splitlines()
    assert len(tail) == 20 and tail[-1] == "fine" and "row-30" in tail


@pytest.mark.parametrize(
    ("reference", "message"),
    [
        ("4005", "no run '4005' in {state} (a run id prefix needs at least 8 characters)"),
        ("ffffffffff", "no run 'ffffffffff' in {state}"),
        ("40059fd9", "'40059fd9' is the start of more than one run id: give more of it"),
    ],
)
async def test_show_refuses_a_short_unknown_or_ambiguous_reference_in_one_line(
    tmp_path: Path, reference: str, message: str
) -> None:
    shutil.copytree(FIXTURE, state(tmp_path))
    with sqlite3.connect(state(tmp_path) / "subagent-host.sqlite3") as db:
        # A second run whose id starts as the fixture's single run's does.
        db.execute(
            "INSERT INTO runs SELECT '40059fd9' || substr(run_id, 9, 23) || 'x', session_id,"
            " instance_id, kind, status, created_at, ended_at, label, last_seq, record"
            " FROM runs WHERE run_id LIKE '40059fd9%'"
        )
    db.close()
    for subcommand in ("show", "logs"):
        finished = await command(subcommand, reference, "--state-dir", str(state(tmp_path)))
        assert (finished.status, finished.stdout) == (1, "")
        expected = message.format(state=state(tmp_path))
        assert finished.stderr == f"subagent-host {subcommand}: {expected}\n"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["show", "abcdefgh", "more"], "subagent-host show: unrecognized arguments: more"),
        (["logs", "--follow=yes", "abcdefgh"], "subagent-host logs: argument -f/--follow:"),
        (["show", "abcdefgh", "--colour"], "subagent-host show: unrecognized arguments: --colour"),
    ],
)
async def test_a_bad_command_line_of_show_or_logs_is_one_line_and_status_2(
    tmp_path: Path, argv: list[str], message: str
) -> None:
    finished = await command(*argv, "--state-dir", str(tmp_path))
    assert (finished.status, finished.stdout) == (2, "")
    assert finished.stderr.startswith(message) and finished.stderr.count("\n") == 1


async def test_a_reader_that_goes_away_ends_runs_quietly_with_141(tmp_path: Path) -> None:
    shutil.copytree(FIXTURE, state(tmp_path))
    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody will read what it prints
    try:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "subagent_host", "runs", "--state-dir", str(state(tmp_path)),
            stdin=asyncio.subprocess.DEVNULL, stdout=write_end, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
    finally:
        os.close(write_end)
    async with asyncio.timeout(COMMAND_TIMEOUT_S):
        _, stderr = await process.communicate()
    assert (process.returncode, stderr) == (141, b"")


async def test_runs_quiet_prints_ids_and_show_and_logs_default_to_the_newest_run(
    tmp_path: Path,
) -> None:
    async with server(tmp_path, "alpha") as host:
        older = await task(host, command=["echo", "older"])
        newer = await task(host, command=["echo", "newer"])
    quiet = await command("runs", "--state-dir", str(state(tmp_path)), "-q")
    assert (quiet.status, quiet.stdout) == (0, f"{newer['runId']}\n{older['runId']}\n")
    newest = await command("show", "--state-dir", str(state(tmp_path)), "--json")
    assert newest.status == 0 and json.loads(newest.stdout)["runId"] == newer["runId"]
    logged = await command("logs", "--state-dir", str(state(tmp_path)))
    assert logged.status == 0 and logged.stdout.startswith(f"newer\nrun {newer['runId'][:8]} ")
    both = await command("runs", "--state-dir", str(state(tmp_path)), "-q", "--json")
    assert both.status == 2 and "not allowed with" in both.stderr


async def test_show_without_a_run_in_an_empty_state_directory_says_so(tmp_path: Path) -> None:
    async with server(tmp_path, "alpha"):
        pass
    shown = await command("show", "--state-dir", str(state(tmp_path)))
    assert shown.status == 1 and "no runs recorded in" in shown.stderr


async def test_show_of_a_running_run_prints_what_its_children_streamed_so_far(
    tmp_path: Path,
) -> None:
    release = tmp_path / "release"
    script = f"echo first-line; echo second-line; {wait_for(release)}; echo last-line"
    async with server(tmp_path, "alpha") as host:
        run = await host.request("spawn", {"command": ["sh", "-c", script], "stream": True})
        said = ""
        async with asyncio.timeout(COMMAND_TIMEOUT_S):
            async for event in host.events(run["runId"]):
                said += event.event.text if isinstance(event.event, OutputEvent) else ""
                if "second-line" in said:
                    break
        await host.request("status", {"runId": run["runId"]})  # answered once it is on disk
        shown = await command("show", run["runId"], "--state-dir", str(state(tmp_path)))
        release.touch()
        await host.wait(run["runId"])
    assert shown.status == 0 and "\noutput\n" in shown.stdout, shown
    tail = shown.stdout.split("\noutput\n", 1)[1].splitlines()
    assert tail[:2] == ["first-line", "second-line"] and "last-line" not in shown.stdout


async def test_runs_shows_a_long_session_id_by_its_shortest_unique_prefix_and_json_keeps_it(
    tmp_path: Path,
) -> None:
    # Two long ids alike in their first 8 characters and more, and a short one.
    one, two = "f" * 10 + "a" + "x" * 29, "f" * 10 + "b" + "x" * 29
    async with server(tmp_path, one) as first, server(tmp_path, two, "lsp") as second:
        await task(first, command=["true"])
        await task(second, command=["true"])
    async with server(tmp_path, "alpha") as third:
        await task(third, command=["true"])
    table = await command("runs", "--state-dir", str(state(tmp_path)))
    assert table.status == 0 and table.stderr == ""
    assert [row.split()[1] for row in table.stdout.splitlines()[1:]] == [
        "alpha", "f" * 10 + "b", "f" * 10 + "a"
    ]  # fmt: skip
    assert [line["sessionId"] for line in await runs_json(tmp_path)] == ["alpha", two, one]
