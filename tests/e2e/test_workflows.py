"""`spawn {workflow}` over real stdio, with `command` items only.

A workflow's steps run in order; each step's children are made from its item
templates when it starts (`{task}`, `{previous}`, `{outputs.NAME}`, `{item}`,
`{index}`), a forEach step fans out over the JSON array its template yields, at
most 4 children of a step run at once, `snapshotPath` is rewritten after each
step, and a failed child resumes (on this server or a later one) into the
remaining steps. Every test runs its servers through `running_server`, which
proves that no process of any run they started survives the test.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import attrs
import psutil
import pytest

from subagent_host.client import ParallelStep, SpawnItem, WorkflowRequest
from tests.e2e.agents import POLL_INTERVAL_S, server_args
from tests.e2e.client import client_of, until_children
from tests.e2e.harness import (
    EXIT_TIMEOUT_S,
    TERMINAL,
    ServerProcess,
    error_of,
    marked_processes,
    result_of,
    running_server,
)
from tests.e2e.test_durability import wait_until_no_run_survives
from tests.e2e.test_preflight import FINGERPRINT, error_codes
from tests.e2e.test_runs import call
from tests.special_files import NOT_REGULAR, shm_path

pytestmark = pytest.mark.e2e

LAUNCH_REJECTED: Final = -32003
PREVIOUS_CAP_BYTES: Final = 64 * 1024
PREVIOUS_MARKER: Final = "[previous output truncated]"
WORKFLOW_PARALLELISM: Final = 4
MAX_FOR_EACH_ITEMS: Final = 32
STOP_REASON: Final = "stopped by the client"  # a `stop` without its own reason
# Prints argv[1] exactly as it was given (no newline added).
ECHO_ARG: Final = "import sys; sys.stdout.write(sys.argv[1])"


def py(code: str, *args: str) -> list[str]:
    """A `command` argv running `code` in Python, with `args` as sys.argv[1:]."""
    return [sys.executable, "-c", code, *args]


def printing(value: Any) -> list[str]:
    """A `command` argv printing `value` as JSON (one line)."""
    return py(f"print({json.dumps(json.dumps(value))})")


async def run_workflow(server: ServerProcess, workflow: dict[str, Any]) -> dict[str, Any]:
    """A task-mode workflow spawn's terminal snapshot."""
    run: dict[str, Any] = await result_of(server, "spawn", {"workflow": workflow, "mode": "task"})
    assert run["kind"] == "workflow" and run["status"] in TERMINAL, run
    return run


async def poll_status(
    server: ServerProcess, run_id: str, until: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """`status {runId}` again and again (bounded) until `until` holds of the snapshot."""
    async with asyncio.timeout(EXIT_TIMEOUT_S):
        while True:  # a background run tells nothing unasked: poll it, bounded
            snapshot: dict[str, Any] = await result_of(server, "status", {"runId": run_id})
            if until(snapshot):
                return snapshot
            await asyncio.sleep(POLL_INTERVAL_S)


async def until(check: Callable[[], bool]) -> None:
    """Until `check()` holds (run on a thread, bounded): for what no message announces."""
    async with asyncio.timeout(EXIT_TIMEOUT_S):
        while True:  # the process table and the file system change silently: poll them
            if await asyncio.to_thread(check):
                return
            await asyncio.sleep(POLL_INTERVAL_S)


def statuses(snapshot: dict[str, Any]) -> list[str]:
    return [child["status"] for child in snapshot["children"]]


def steps(snapshot: dict[str, Any]) -> list[tuple[str, str, list[int]]]:
    """Each step's (kind, status, children)."""
    return [(s["kind"], s["status"], s["children"]) for s in snapshot["workflow"]["steps"]]


# --- templates and fan-out -------------------------------------------------------------


async def test_a_fan_out_over_a_produced_json_list_gathers_its_outputs(tmp_path: Path) -> None:
    workflow = {
        "name": "shout",
        "task": "shout three words",
        "chain": [
            {"command": printing(["alpha", "beta", "gamma"]), "as": "words"},
            {
                "forEach": "{outputs.words}",
                "item": {
                    "command": py("import sys; print(sys.argv[1].upper())", "{index}:{item}"),
                    "label": "{task}: {index}",
                },
            },
            {"command": py(ECHO_ARG, "{previous}")},
        ],
    }
    async with running_server(*server_args(tmp_path)) as server:
        reply, notes = await call(server, "spawn", {"workflow": workflow, "mode": "task"})
        run = reply["result"]
        expected = json.dumps(["0:ALPHA", "1:BETA", "2:GAMMA"])  # trailing newlines dropped
        assert run["status"] == "completed", run
        assert run["output"] == {
            "text": expected, "truncated": False, "bytes": len(expected), "lines": 1,
            "partial": False,
        }  # fmt: skip
        children = run["children"]
        assert [c["index"] for c in children] == [0, 1, 2, 3, 4]
        assert [c["step"] for c in children] == [0, 1, 1, 1, 2]
        assert statuses(run) == ["completed"] * 5
        assert [c["attempt"] for c in children] == [1] * 5
        assert [c["output"]["text"] for c in children] == [
            '["alpha", "beta", "gamma"]\n', "0:ALPHA\n", "1:BETA\n", "2:GAMMA\n", expected
        ]  # fmt: skip
        assert [c.get("label") for c in children] == [
            None, "shout three words: 0", "shout three words: 1", "shout three words: 2", None
        ]  # fmt: skip
        assert run["workflow"] == {
            "name": "shout",
            "steps": [
                {"index": 0, "kind": "command", "status": "completed", "children": [0],
                 "as": "words"},
                {"index": 1, "kind": "forEach", "status": "completed", "children": [1, 2, 3]},
                {"index": 2, "kind": "command", "status": "completed", "children": [4]},
            ],
        }  # fmt: skip
        # Each step's children are added (`queued`) once the step before it has ended.
        changes = [
            (n["params"]["index"], n["params"]["status"])
            for n in notes
            if n["method"] == "run/event" and n["params"]["type"] == "child"
        ]
        assert sorted(changes) == [
            (i, status) for i in range(5) for status in ("completed", "queued", "running")
        ]
        assert changes[:4] == [(0, "queued"), (0, "running"), (0, "completed"), (1, "queued")]
        assert changes[4:6] == [(2, "queued"), (3, "queued")]
        assert changes[-3:] == [(4, "queued"), (4, "running"), (4, "completed")]
        assert await result_of(server, "status", {"runId": run["runId"]}) == run
        assert (await server.finish())[0] == 0


async def test_unfillable_placeholders_are_rejected_before_anything_runs(tmp_path: Path) -> None:
    workflow = {
        "name": "broken",
        "task": "t",
        "chain": [
            {"command": ["echo", "{previous}"], "as": "first"},
            {"command": ["echo", "{outputs.first}"], "label": "label {nope}"},
        ],
    }
    expected = [
        ("error", "invalid-template", "workflow.chain[0].command[1]", "{previous}"),
        ("error", "invalid-template", "workflow.chain[1].label", "{nope}"),
    ]
    async with running_server(*server_args(tmp_path)) as server:
        reply, notes = await call(server, "spawn", {"workflow": workflow, "mode": "task"})
        assert notes == []
        assert reply["error"]["code"] == LAUNCH_REJECTED, reply
        diagnostics = reply["error"]["data"]["diagnostics"]
        assert [(d["severity"], d["code"], d["path"]) for d in diagnostics] == [
            e[:3] for e in expected
        ]
        for diagnostic, (*_, placeholder) in zip(diagnostics, expected, strict=True):
            assert placeholder in diagnostic["message"], diagnostic

        checked = await result_of(server, "preflight", {"workflow": workflow, "mode": "task"})
        assert checked["accepted"] is False, checked
        assert checked["diagnostics"] == diagnostics
        assert "preflightId" not in checked and "fingerprint" not in checked, checked

        assert (await result_of(server, "status", {}))["runs"] == []
        assert (await server.finish())[0] == 0


# --- caps ------------------------------------------------------------------------------


async def test_previous_is_capped_at_64_kib_with_its_marker(tmp_path: Path) -> None:
    measure = (
        "import sys; a = sys.argv[1]; "
        f"print(len(a.encode()), a.endswith({PREVIOUS_MARKER!r}), "
        f"a == '.' * {PREVIOUS_CAP_BYTES} + '\\n' + {PREVIOUS_MARKER!r})"
    )
    workflow = {
        "name": "big",
        "task": "t",
        "chain": [
            # Dots: a long run of letters would be redacted (protocol.md §12.1).
            {"command": py("import sys; sys.stdout.write('.' * 102400)")},
            {"command": py(measure, "{previous}")},
        ],
    }
    async with running_server(*server_args(tmp_path)) as server:
        run = await run_workflow(server, workflow)
        assert run["status"] == "completed", run
        big = run["children"][0]["output"]
        assert (big["bytes"], big["truncated"]) == (102400, True), big
        # The first 64 KiB, a newline, then the marker.
        length = PREVIOUS_CAP_BYTES + 1 + len(PREVIOUS_MARKER)
        assert run["output"]["text"] == f"{length} True True", run["output"]
        assert (await server.finish())[0] == 0


async def test_a_nul_a_step_puts_in_an_argv_fails_that_child_as_spawn_failed(
    tmp_path: Path,
) -> None:
    workflow = {
        "name": "nul",
        "task": "t",
        "chain": [
            {"command": py("import sys; sys.stdout.write('a\\0b')")},
            {"command": py(ECHO_ARG, "{previous}")},
        ],
    }
    async with running_server(*server_args(tmp_path)) as server:
        run = await run_workflow(server, workflow)
        assert run["status"] == "failed", run
        first, second = run["children"]
        assert first["status"] == "completed"
        assert second["status"] == "failed" and "pid" not in second, second
        assert second["error"]["code"] == "spawn-failed", second
        assert "contains a NUL character" in second["error"]["message"], second
        assert (await server.finish())[0] == 0
    assert "Traceback" not in server.stderr_text


async def test_an_argument_over_the_kernels_128_kib_limit_fails_that_child_as_spawn_failed(
    tmp_path: Path,
) -> None:
    workflow = {
        "name": "big",
        "task": "x" * (200 * 1024),
        "chain": [{"command": py(ECHO_ARG, "{task}")}],
    }
    async with running_server(*server_args(tmp_path)) as server:
        run = await run_workflow(server, workflow)
        [child] = run["children"]
        assert child["status"] == "failed" and child["error"]["code"] == "spawn-failed", child
        assert (
            "Argument list too long (one argument may hold at most 128 KiB"
            in (child["error"]["message"])
        ), child
        assert (await server.finish())[0] == 0


async def test_for_each_takes_a_json_array_of_at_most_32_elements(tmp_path: Path) -> None:
    def fan_out(first: list[str]) -> dict[str, Any]:
        return {
            "name": "fan",
            "task": "t",
            "chain": [
                {"command": first},
                {"forEach": "{previous}", "item": {"command": ["echo", "{index}={item}"]}},
                {"command": ["echo", "after {previous}"]},
            ],
        }

    async with running_server(*server_args(tmp_path)) as server:
        not_array = await run_workflow(server, fan_out(printing({"a": 1})))
        assert not_array["status"] == "failed", not_array
        error = not_array["error"]
        assert (error["code"], error["data"]) == ("foreach-not-array", {"step": 1}), error
        assert error["message"].startswith("step 1: forEach needs a JSON array"), error
        assert steps(not_array) == [
            ("command", "completed", [0]), ("forEach", "failed", []), ("command", "pending", [])
        ]  # fmt: skip
        assert statuses(not_array) == ["completed"]

        too_long = await run_workflow(
            server, fan_out(printing(list(range(MAX_FOR_EACH_ITEMS + 1))))
        )
        assert too_long["status"] == "failed", too_long
        error = too_long["error"]
        assert (error["code"], error["data"]) == (
            "foreach-too-long", {"step": 1, "elements": MAX_FOR_EACH_ITEMS + 1}
        ), error  # fmt: skip
        assert steps(too_long) == [
            ("command", "completed", [0]), ("forEach", "failed", []), ("command", "pending", [])
        ]  # fmt: skip
        assert statuses(too_long) == ["completed"]

        longest = await run_workflow(server, fan_out(printing(list(range(MAX_FOR_EACH_ITEMS)))))
        assert longest["status"] == "completed", longest
        fanned = list(range(1, MAX_FOR_EACH_ITEMS + 1))
        last = MAX_FOR_EACH_ITEMS + 1
        assert steps(longest) == [
            ("command", "completed", [0]), ("forEach", "completed", fanned),
            ("command", "completed", [last]),
        ]  # fmt: skip
        assert [longest["children"][i]["output"]["text"] for i in fanned] == [
            f"{i}={i}\n" for i in range(MAX_FOR_EACH_ITEMS)
        ]
        gathered = json.dumps([f"{i}={i}" for i in range(MAX_FOR_EACH_ITEMS)])
        assert longest["output"]["text"] == f"after {gathered}"

        empty = await run_workflow(server, fan_out(printing([])))
        assert empty["status"] == "completed", empty
        assert steps(empty) == [
            ("command", "completed", [0]), ("forEach", "completed", []),
            ("command", "completed", [1]),
        ]  # fmt: skip
        assert empty["output"]["text"] == "after []"

        fenced = py("print('```json'); print('[\"p\", {\"q\": 1}]'); print('```')")
        in_fence = await run_workflow(server, fan_out(fenced))
        assert in_fence["status"] == "completed", in_fence
        assert [c["output"]["text"] for c in in_fence["children"][1:3]] == [
            "0=p\n", '1={"q": 1}\n'  # a string as it is, anything else as JSON
        ]  # fmt: skip
        assert in_fence["output"]["text"] == 'after ["0=p", "1={\\"q\\": 1}"]'
        assert (await server.finish())[0] == 0


# --- the snapshot file -----------------------------------------------------------------


async def test_the_snapshot_file_is_rewritten_after_each_step_and_at_the_end(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "snapshots"
    directory.mkdir()
    path = directory / "run.json"
    read_snapshot = (
        "import json, sys; s = json.load(open(sys.argv[1])); w = s['workflow']['steps']; "
        "print(s['status'], w[0]['status'], w[1]['status'], len(s['children']), "
        "s['children'][0]['output']['text'].strip())"
    )
    workflow = {
        "name": "snap",
        "task": "t",
        "snapshotPath": str(path),
        "chain": [
            {"command": ["echo", "zero"]},
            {"command": py(read_snapshot, str(path))},
        ],
    }
    async with running_server(*server_args(tmp_path)) as server:
        run = await run_workflow(server, workflow)
        assert run["status"] == "completed", run
        # Step 1 read the file written after step 0 ended, before step 1 began.
        assert run["output"]["text"] == "running completed pending 1 zero", run
        final = json.loads(path.read_text())
        assert final == run
        assert final["status"] == "completed"
        assert steps(final) == [("command", "completed", [0]), ("command", "completed", [1])]
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert sorted(os.listdir(directory)) == ["run.json"]  # no temporary file left
        assert (await server.finish())[0] == 0


async def test_a_snapshot_path_that_is_no_regular_file_is_refused_at_spawn_and_preflight(
    tmp_path: Path,
) -> None:
    with shm_path() as shm:
        paths = {"under-dev-shm": shm}
        for shape, (make, _kind) in sorted(NOT_REGULAR.items()):
            paths[shape] = tmp_path / f"{shape}.json"
            make(paths[shape])
        modes = {
            shape: path.lstat().st_mode for shape, path in paths.items() if shape in NOT_REGULAR
        }
        async with running_server(*server_args(tmp_path)) as server:
            for shape, path in paths.items():
                workflow = {
                    "name": "w",
                    "task": "t",
                    "snapshotPath": str(path),
                    "chain": [{"command": ["true"]}],
                }
                error = await error_of(server, "spawn", {"workflow": workflow, "mode": "task"})
                assert error["code"] == LAUNCH_REJECTED, (shape, error)
                found = [(d["code"], d["path"]) for d in error["data"]["diagnostics"]]
                assert found == [("invalid-snapshot-path", "workflow.snapshotPath")], shape
                checked = await result_of(server, "preflight", {"workflow": workflow})
                assert checked["accepted"] is False, (shape, checked)
                assert error_codes(checked) == ["invalid-snapshot-path"], shape
            assert (await server.finish())[0] == 0
        assert {shape: paths[shape].lstat().st_mode for shape in modes} == modes
        assert not shm.exists()


async def test_a_snapshot_path_that_is_a_symlink_to_a_file_replaces_the_link(
    tmp_path: Path,
) -> None:
    target = tmp_path / "target.json"
    target.write_text("kept")
    link = tmp_path / "snap.json"
    link.symlink_to(target)
    workflow = {
        "name": "w",
        "task": "t",
        "snapshotPath": str(link),
        "chain": [{"command": ["echo", "done"]}],
    }
    async with running_server(*server_args(tmp_path)) as server:
        run = await run_workflow(server, workflow)
        assert run["status"] == "completed", run
        assert not link.is_symlink() and json.loads(link.read_text()) == run
        assert target.read_text() == "kept"
        assert (await server.finish())[0] == 0


async def test_a_snapshot_path_that_becomes_a_fifo_mid_run_is_left_alone_with_a_warning(
    tmp_path: Path,
) -> None:
    (tmp_path / "snapshots").mkdir()
    path = tmp_path / "snapshots" / "snap.json"
    # Step 1 swaps the snapshot written after step 0 for a FIFO; nothing ever opens it.
    to_fifo = "import os, sys; os.unlink(sys.argv[1]); os.mkfifo(sys.argv[1], 0o600)"
    workflow = {
        "name": "w",
        "task": "t",
        "snapshotPath": str(path),
        "chain": [
            {"command": ["echo", "zero"]},
            {"command": py(to_fifo, str(path))},
            {"command": ["echo", "two"]},
        ],
    }
    async with running_server(*server_args(tmp_path)) as server:
        run = await run_workflow(server, workflow)
        assert run["status"] == "completed", run
        assert statuses(run) == ["completed", "completed", "completed"]
        assert stat.S_ISFIFO(path.lstat().st_mode)
        assert os.listdir(path.parent) == ["snap.json"]  # no temporary file left
        warning = {
            "severity": "warning",
            "code": "snapshot-skipped",
            "message": f"the snapshot was not written: {str(path)!r} is a FIFO",
            "path": "workflow.snapshotPath",
        }
        assert run["diagnostics"] == [warning]  # once, though two writes were skipped
        status = await result_of(server, "status", {"runId": run["runId"]})
        assert status["diagnostics"] == [warning]
        assert (await server.finish())[0] == 0
    # A later server reads it from the run's record.
    async with running_server(*server_args(tmp_path)) as server:
        status = await result_of(server, "status", {"runId": run["runId"]})
        assert status["diagnostics"] == [warning]
        assert (await server.finish())[0] == 0


# --- stop and parallelism --------------------------------------------------------------


def sleeps_of(run_id: str) -> int:
    """How many live `sleep` processes carry the run's marker."""
    count = 0
    for process in marked_processes({run_id}):
        try:
            count += process.name() == "sleep"
        except psutil.Error:
            continue
    return count


async def test_stop_during_a_parallel_step_ends_every_tree_and_runs_no_later_step(
    tmp_path: Path,
) -> None:
    tree = SpawnItem(command=("sh", "-c", "sleep 60 & wait"))
    workflow = WorkflowRequest(
        name="stoppable",
        task="t",
        chain=(
            ParallelStep(parallel=(tree, tree, tree), output_name="naps"),
            SpawnItem(command=("echo", "never")),
        ),
    )
    async with running_server(*server_args(tmp_path)) as server, client_of(server) as host:
        started = await host.spawn(workflow=workflow, mode="background")
        assert started.status == "running", started
        await until_children(host, started.run_id, lambda children: children == ["running"] * 3)
        await until(lambda: sleeps_of(started.run_id) == 3)  # each tree's `sleep` exists

        stopped = await host.stop(run_id=started.run_id, grace_ms=500)
        assert (stopped.status, stopped.already_terminal) == ("cancelled", False), stopped
        assert [c.status for c in stopped.children] == ["cancelled"] * 3
        assert stopped.reason == STOP_REASON
        assert [c.reason for c in stopped.children] == [STOP_REASON] * 3
        assert stopped.workflow is not None
        assert [(s.kind, s.status, s.children) for s in stopped.workflow.steps] == [
            ("parallel", "cancelled", (0, 1, 2)),
            ("command", "pending", ()),
        ]
        assert await asyncio.to_thread(marked_processes, {started.run_id}) == []
        later = await host.status(started.run_id)
        assert later == attrs.evolve(stopped, already_terminal=None)


@pytest.mark.parametrize("configured", [None, 2])
async def test_a_step_runs_at_most_four_children_at_once_or_as_configured(
    tmp_path: Path, configured: int | None
) -> None:
    limit = configured or WORKFLOW_PARALLELISM
    extra: list[str] = ["--max-concurrency", "8"]
    if configured is not None:
        config = tmp_path / "config.json"
        config.write_text(json.dumps({"workflow_parallelism": configured}))
        extra += ["--config", str(config)]
    gate = tmp_path / "gate"
    gate.mkdir()
    blocked = (
        "import os, sys, time\n"
        "gate, index = sys.argv[1], sys.argv[2]\n"
        "open(os.path.join(gate, 'started-' + index), 'w').close()\n"
        "deadline = time.monotonic() + 30\n"
        "while not os.path.exists(os.path.join(gate, 'release')):\n"
        "    if time.monotonic() > deadline:\n"
        "        sys.exit(9)\n"
        "    time.sleep(0.02)\n"
        "print('done', index)\n"
    )
    workflow = {
        "name": "bounded",
        "task": json.dumps(list(range(6))),
        "chain": [{"forEach": "{task}", "item": {"command": py(blocked, str(gate), "{index}")}}],
    }

    def started() -> list[str]:
        return sorted(name for name in os.listdir(gate) if name.startswith("started-"))

    async with running_server(*server_args(tmp_path), *extra) as server:
        spawned = await result_of(server, "spawn", {"workflow": workflow, "mode": "background"})
        run_id = spawned["runId"]
        await until(lambda: len(started()) >= limit)
        blocked_now = await poll_status(
            server,
            run_id,
            lambda s: sorted(statuses(s)) == ["queued"] * (6 - limit) + ["running"] * limit,
        )
        assert len(blocked_now["children"]) == 6
        assert statuses(blocked_now)[limit:] == ["queued"] * (6 - limit)  # in element order
        assert started() == [f"started-{i}" for i in range(limit)]

        (gate / "release").touch()
        done = await poll_status(server, run_id, lambda s: s["status"] in TERMINAL)
        assert done["status"] == "completed", done
        assert statuses(done) == ["completed"] * 6
        assert [c["step"] for c in done["children"]] == [0] * 6
        assert done["output"]["text"] == json.dumps([f"done {i}" for i in range(6)])
        assert started() == [f"started-{i}" for i in range(6)]
        assert (await server.finish())[0] == 0


# --- resume ----------------------------------------------------------------------------


# Fails (exit 3, after a line) for element 1 until the flag file exists; then prints
# `index=item` and, for element 1, what its new attempt read on stdin.
FLAKY: Final = (
    "import os, sys\n"
    "index, item, flag = sys.argv[1:]\n"
    "if index == '1' and not os.path.exists(flag):\n"
    "    print('no flag for', item)\n"
    "    sys.exit(3)\n"
    "heard = sys.stdin.read() if index == '1' else ''\n"
    "print(f'{index}={item}' + (f' heard {heard!r}' if heard else ''))\n"
)
FAILED_CHILD: Final = 2  # step 0's child is 0; the forEach's are 1 ("x") and 2 ("y")
# What the second attempt of element 1 prints: its prior output, then the follow-up.
RESUMED_TEXT: Final = "1=y heard 'no flag for y\\nagain'\n"
# Step 2 prints step 0's text, then step 1's (a JSON array of its children's texts),
# each without its trailing newline.
FINAL_TEXT: Final = '["x", "y"]' + json.dumps(["0=x", RESUMED_TEXT.rstrip("\n")])


def flaky_workflow(flag: Path) -> dict[str, Any]:
    return {
        "name": "flaky",
        "task": "t",
        "chain": [
            {"command": printing(["x", "y"]), "as": "items"},
            {
                "forEach": "{outputs.items}",
                "item": {"command": py(FLAKY, "{index}", "{item}", str(flag))},
            },
            {
                "command": py(
                    "import sys; sys.stdout.write(sys.argv[1] + sys.argv[2])",
                    "{outputs.items}",
                    "{previous}",
                )
            },
        ],
    }


def assert_failed_at_step_1(run: dict[str, Any]) -> None:
    assert run["status"] == "failed", run
    assert statuses(run) == ["completed", "completed", "failed"]
    failed = run["children"][FAILED_CHILD]
    assert (failed["exitCode"], failed["output"]["text"]) == (3, "no flag for y\n"), failed
    assert steps(run) == [
        ("command", "completed", [0]), ("forEach", "failed", [1, 2]), ("command", "pending", [])
    ]  # fmt: skip


async def approve_failed_child(server: ServerProcess, run_id: str) -> dict[str, Any]:
    """An accepted `preflight {resume}` of the failed forEach child."""
    approval: dict[str, Any] = await result_of(
        server,
        "preflight",
        {"resume": {"runId": run_id, "index": FAILED_CHILD, "message": "again"}},
    )
    assert approval["accepted"] is True, approval
    assert isinstance(approval["token"], str) and approval["token"], approval
    contract = approval["contract"]
    assert (contract["runId"], contract["index"], contract["attempt"]) == (run_id, 2, 2)
    assert contract["workflow"]["step"] == 1, contract
    assert FINGERPRINT.fullmatch(contract["workflow"]["definitionDigest"]), contract
    assert await asyncio.to_thread(marked_processes, {run_id}) == []  # a preflight starts nothing
    return approval


async def resume(server: ServerProcess, token: str) -> dict[str, Any]:
    resumed: dict[str, Any] = await result_of(server, "resume", {"token": token, "mode": "task"})
    return resumed


def assert_completed_after_resume(before: dict[str, Any], after: dict[str, Any]) -> None:
    assert after["runId"] == before["runId"] and after["status"] == "completed", after
    children = after["children"]
    assert [c["attempt"] for c in children] == [1, 1, 2, 1]
    assert [c["step"] for c in children] == [0, 1, 1, 2]
    assert statuses(after) == ["completed"] * 4
    for kept in (0, 1):  # not run again: the very same attempt
        assert children[kept] == before["children"][kept]
    assert children[FAILED_CHILD]["output"]["text"] == RESUMED_TEXT
    assert children[3]["output"]["text"] == FINAL_TEXT  # the reused outputs, and the new one
    assert after["output"]["text"] == FINAL_TEXT
    assert steps(after) == [
        ("command", "completed", [0]), ("forEach", "completed", [1, 2]),
        ("command", "completed", [3]),
    ]  # fmt: skip


async def test_a_failed_workflow_child_resumes_and_the_remaining_steps_run(
    tmp_path: Path,
) -> None:
    flag = tmp_path / "flag"
    async with running_server(*server_args(tmp_path)) as server:
        failed = await run_workflow(server, flaky_workflow(flag))
        assert_failed_at_step_1(failed)
        flag.touch()
        approval = await approve_failed_child(server, failed["runId"])
        resumed = await resume(server, approval["token"])
        assert_completed_after_resume(failed, resumed)
        assert await result_of(server, "status", {"runId": failed["runId"]}) == resumed
        runs = (await result_of(server, "status", {}))["runs"]
        assert [r["runId"] for r in runs] == [failed["runId"]]  # the same run, not a new one
        # Step 2 ran on the forEach's outputs: a child of step 1 is no longer resumable.
        again = await result_of(
            server, "preflight", {"resume": {"runId": failed["runId"], "index": 1, "message": "x"}}
        )
        assert again["accepted"] is False
        assert [d["code"] for d in again["diagnostics"]] == ["later-steps-ran"]
        assert (await server.finish())[0] == 0


async def test_a_failed_workflow_child_resumes_on_a_later_server(tmp_path: Path) -> None:
    flag = tmp_path / "flag"
    async with running_server(*server_args(tmp_path)) as first:
        failed = await run_workflow(first, flaky_workflow(flag))
        assert_failed_at_step_1(failed)
        live = await approve_failed_child(first, failed["runId"])  # from the runner it has
        assert (await first.finish())[0] == 0
    flag.touch()
    async with running_server(*server_args(tmp_path)) as second:
        stored = await result_of(second, "status", {"runId": failed["runId"]})
        assert steps(stored) == steps(failed)
        approval = await approve_failed_child(second, failed["runId"])  # from the store
        assert approval["contract"] == live["contract"]
        assert approval["contractDigest"] == live["contractDigest"]
        resumed = await resume(second, approval["token"])
        assert_completed_after_resume(failed, resumed)
        assert (await second.finish())[0] == 0


async def test_a_child_launched_with_env_is_never_resumed_without_it_on_a_later_server(
    tmp_path: Path,
) -> None:
    flag = tmp_path / "flag"
    workflow = {
        "name": "env",
        "task": "t",
        "chain": [
            {"command": ["sh", "-c", 'echo "FOO=$FOO"'], "env": {"FOO": "bar"}},
            {
                "command": py(
                    "import os, sys; sys.exit(0 if os.path.exists(sys.argv[1]) else 3)", str(flag)
                )
            },  # fmt: skip
            {"command": ["echo", "last"]},
        ],
    }
    async with running_server(*server_args(tmp_path)) as first:
        failed = await run_workflow(first, workflow)
        assert statuses(failed) == ["completed", "failed"]
        assert failed["children"][0]["output"]["text"] == "FOO=bar\n"
        assert (await first.finish())[0] == 0
    flag.touch()
    async with running_server(*server_args(tmp_path)) as second:
        env_child = {"resume": {"runId": failed["runId"], "index": 0, "message": "m"}}
        before = await result_of(second, "preflight", env_child)
        assert (before["accepted"], error_codes(before)) == (False, ["environment-gone"])
        default = {"resume": {"runId": failed["runId"], "message": "m"}}
        approval = await result_of(second, "preflight", default)
        assert approval["contract"]["index"] == 1, approval
        resumed = await resume(second, approval["token"])
        assert resumed["status"] == "completed" and len(resumed["children"]) == 3, resumed
        after = await result_of(second, "preflight", env_child)  # still without FOO's value
        assert (after["accepted"], error_codes(after)) == (False, ["environment-gone"]), after
        assert (await second.finish())[0] == 0


async def test_a_workflow_interrupted_by_a_crash_resumes_on_the_next_server(
    tmp_path: Path,
) -> None:
    """SIGKILL the server mid-step: the next one reports the step interrupted, and a
    resume of its child carries the workflow on with step 0's recorded output."""
    flag = tmp_path / "flag"
    waits_for_flag = f'test -f {flag} && echo "got $1" || exec sleep 300'
    workflow = {
        "name": "crash",
        "task": "t",
        "chain": [
            {"command": ["echo", "zero"]},
            {"command": ["sh", "-c", waits_for_flag, "_", "{previous}"]},
            {"command": ["echo", "final {previous}"]},
        ],
    }
    async with running_server(*server_args(tmp_path)) as first:
        spawned = await result_of(first, "spawn", {"workflow": workflow})
        run_id = spawned["runId"]
        await poll_status(first, run_id, lambda s: statuses(s) == ["completed", "running"])
        first.signal(signal.SIGKILL)
        assert await asyncio.wait_for(first.proc.wait(), EXIT_TIMEOUT_S) == -signal.SIGKILL
        crashed = set(first.run_ids)
        first.run_ids.clear()  # the next server's to end
    flag.touch()
    async with running_server(*server_args(tmp_path)) as second:
        interrupted = await result_of(second, "status", {"runId": run_id})
        assert interrupted["status"] == "interrupted", interrupted
        assert steps(interrupted) == [
            ("command", "completed", [0]),
            ("command", "interrupted", [1]),
            ("command", "pending", []),
        ]  # fmt: skip
        await wait_until_no_run_survives(crashed)  # the recovery ends the `sleep` left
        resume = {"resume": {"runId": run_id, "index": 1, "message": "go"}}
        # Gone is not yet recorded as ended: until it is, a resume is refused (protocol.md
        # §13), as a client is told: "try again in a moment".
        approval = await result_of(second, "preflight", resume)
        async with asyncio.timeout(EXIT_TIMEOUT_S):
            while error_codes(approval) == ["still-running"]:
                await asyncio.sleep(POLL_INTERVAL_S)
                approval = await result_of(second, "preflight", resume)
        assert approval["accepted"] is True, approval
        resumed = await result_of(second, "resume", {"token": approval["token"], "mode": "task"})
        assert resumed["status"] == "completed", resumed
        assert [c["attempt"] for c in resumed["children"]] == [1, 2, 1]
        assert resumed["output"]["text"] == "final got zero"
        assert steps(resumed) == [
            ("command", "completed", [0]),
            ("command", "completed", [1]),
            ("command", "completed", [2]),
        ]  # fmt: skip
        assert (await second.finish())[0] == 0
    assert crashed == {run_id}


async def test_work_done_progress_counts_a_workflows_steps(tmp_path: Path) -> None:
    workflow = {
        "name": "progress",
        "task": "t",
        "chain": [
            {"command": ["echo", "a"]},
            {"parallel": [{"command": ["echo", "b"]}, {"command": ["echo", "c"]}]},
        ],
    }
    async with running_server(*server_args(tmp_path)) as server:
        reply, notes = await call(
            server, "spawn", {"workflow": workflow, "mode": "task", "workDoneToken": "wf"}
        )
        assert reply["result"]["status"] == "completed", reply
        values = [n["params"]["value"] for n in notes if n.get("method") == "$/progress"]
        assert all(n["params"]["token"] == "wf" for n in notes if n.get("method") == "$/progress")
        assert [v["kind"] for v in values][0] == "begin" and values[-1]["kind"] == "end"
        reports = [(v["message"], v["percentage"]) for v in values if v["kind"] == "report"]
        # Steps completed of all steps: 0 until step 0 ends, 50 until step 1 ends.
        assert reports[:5] == [
            ("child 0 queued", 0), ("child 0 running", 0), ("child 0 completed", 0),
            ("child 1 queued", 50), ("child 2 queued", 50),
        ], reports  # fmt: skip
        assert sorted(reports[5:]) == [  # the two parallel children, in either order
            ("child 1 completed", 50), ("child 1 running", 50),
            ("child 2 completed", 50), ("child 2 running", 50),
        ], reports  # fmt: skip
        assert values[-1]["message"] == f"run {reply['result']['runId']} completed"
        assert (await server.finish())[0] == 0
