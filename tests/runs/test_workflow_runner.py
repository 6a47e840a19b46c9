"""Workflows carried out by the orchestrator with real processes (only `command` items).

Plans are made the way the server makes them: the request's `workflow` structured
with the wire converter, then `check_spawn` and `accept`. Each test's processes are checked
to be gone when it ends; nothing here waits a fixed time to decide an outcome:
children signal through files and events, waited for with generous bounds.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import attrs
import psutil
import pytest

from subagent_host.backends.base import Backend, ParsedOutcome
from subagent_host.backends.command import CommandBackend, CommandParser
from subagent_host.backends.exits import ProcessExit
from subagent_host.backends.supervisor import Supervisor
from subagent_host.planning.check import check_spawn, resolve_or_reject
from subagent_host.planning.plan import ChildPlan, LaunchPlan, RunPlan, ServerLimits
from subagent_host.planning.stored_workflow import workflow_from_record, workflow_record
from subagent_host.planning.views import Projection, to_json
from subagent_host.rpc.wire import SpawnParams, make_converter
from subagent_host.runs.orchestrator import OutputCaps, RunOrchestrator, WorkflowRecords
from subagent_host.runs.scheduler import Slots
from subagent_host.runs.services import ChildServices
from subagent_host.runs.state import ChildRun, Run, RunEvent, RunStateMachine, RunStatus
from subagent_host.runs.workflow_runner import MAX_FOR_EACH_ITEMS, WORKFLOW_PARALLELISM
from subagent_host.store.reads import mark_command_steps
from subagent_host.store.records import child_from_record, child_record, run_from_record, run_record
from subagent_host.values.events import OutputEvent, StatusEvent
from tests.backends.conftest import processes_with_marker
from tests.runs.test_orchestrator import assert_terminal_table
from tests.waits import loop_turns, still_running

FAKES = Path(__file__).resolve().parent.parent / "fakes"
PY = sys.executable
WAIT_S = 30.0
MARKER = "[previous output truncated]"
LIMITS = ServerLimits(
    output_cap_bytes=49152, output_cap_lines=600, previous_cap_bytes=65536,
    max_concurrency=8, max_depth=1,
)  # fmt: skip


def caps(previous_bytes: int = 64 * 1024) -> OutputCaps:
    return OutputCaps(bytes=48 * 1024, lines=600, parallel_bytes=12 * 1024, parallel_lines=160,
                      previous_bytes=previous_bytes)  # fmt: skip


def py(code: str, *args: str, **fields: Any) -> dict[str, Any]:
    """A `command` item running Python code (no `{`+letter in it: that is a placeholder)."""
    return {"command": [PY, "-c", code, *args], **fields}


# Prints its arguments joined by "-" (the item's `{item}`, `{index}`, ...).
ECHO_ARGS = "import sys; print('-'.join(sys.argv[1:]))"
# Waits until the file named by its first argument exists (bounded by the child's timeout).
WAIT_FOR = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.02)\n"


@attrs.define
class Snapshot:
    """What the run looked like when the snapshot hook was called."""

    path: str
    status: RunStatus
    steps: list[str]
    children: int


@attrs.define
class Records:
    """Every call of the workflow hooks, in order."""

    definitions: list[tuple[Run, RunPlan]] = attrs.Factory(list)
    added: list[tuple[int, dict[str, Any], RunStatus]] = attrs.Factory(list)
    texts: list[tuple[int, str]] = attrs.Factory(list)
    snapshots: list[Snapshot] = attrs.Factory(list)
    snapshot_error: OSError | None = None
    gate: asyncio.Event | None = None
    """When set, the next snapshot call reports itself in `at_gate` and waits for it."""
    at_gate: asyncio.Event = attrs.Factory(asyncio.Event)

    def hooks(self) -> WorkflowRecords:
        def child_added(run: Run, index: int, projection: Projection) -> None:
            self.added.append((index, to_json(projection), run.children[index].status))

        async def snapshot(run: Run, path: str) -> None:
            await asyncio.sleep(0)  # a real await, as the file writer's
            assert run.workflow is not None
            steps: list[str] = [step.status for step in run.workflow.steps]
            self.snapshots.append(Snapshot(path, run.status, steps, len(run.children)))
            if self.snapshot_error is not None:
                raise self.snapshot_error
            gate, self.gate = self.gate, None
            if gate is not None:
                self.at_gate.set()
                await gate.wait()

        return WorkflowRecords(
            definition=lambda run, plan: self.definitions.append((run, plan)),
            child_added=child_added,
            text=lambda _run, index, text: self.texts.append((index, text)),
            snapshot=snapshot,
        )


class Harness:
    """One orchestrator (one server process), its events and its workflow records."""

    def __init__(self, cwd: Path, *, slots: int = 8, previous_bytes: int = 64 * 1024) -> None:
        self.cwd = cwd
        self.real_cwd = os.path.realpath(cwd)
        self.events: list[tuple[str, RunEvent]] = []
        self.changed = asyncio.Event()
        self.records = Records()
        self.backends: dict[str, Backend] = {"command": CommandBackend()}
        services = ChildServices(
            supervisor=Supervisor(),
            backends=self.backends,
            slots=Slots(slots),
            state_machine=RunStateMachine(listener=self.record),
            caps=caps(previous_bytes),
            server_env=os.environ,
            depth=0,
        )
        self.orchestrator = RunOrchestrator(
            services,
            grace_ms=2000,
            workflow_records=self.records.hooks(),
        )
        self.runs: list[Run] = []
        self.watchers: list[Callable[[Run], None]] = []

    def record(self, run: Run, event: RunEvent) -> None:
        self.events.append((run.run_id, event))
        for watch in self.watchers:
            watch(run)
        self.changed.set()

    async def until(self, condition: Callable[[], bool]) -> None:
        """Wait, event by event, until `condition` holds."""
        async with asyncio.timeout(WAIT_S):
            while not condition():
                self.changed.clear()
                await self.changed.wait()

    def plan(self, chain: list[Any], **fields: Any) -> LaunchPlan:
        """The plan the server would make of `spawn {workflow: ...}`."""
        workflow = {"name": "w", "task": "a b c", "chain": chain}
        snapshot_path = fields.pop("snapshotPath", None)
        if snapshot_path is not None:
            workflow["snapshotPath"] = snapshot_path
        raw = {"workflow": workflow, "timeoutMs": 60_000, **fields}
        params = make_converter().structure(raw, SpawnParams)
        checked = check_spawn(
            params, backends=self.backends, limits=LIMITS, depth=0, server_cwd=str(self.cwd)
        )
        resolved = resolve_or_reject(checked)
        return resolved.plan

    def launch(self, plan: LaunchPlan) -> Run:
        run = self.orchestrator.launch(plan, "s1")
        self.runs.append(run)
        return run

    async def finish(self, run: Run) -> Run:
        await asyncio.wait_for(self.orchestrator.wait(run), WAIT_S)
        assert_terminal_table(run)
        return run

    def texts(self) -> dict[int, str]:
        return dict(self.records.texts)


Make = Callable[..., Harness]


@pytest.fixture
async def make(tmp_path: Path) -> AsyncIterator[Make]:
    """Harnesses for one test; when it ends, no process of any of their runs may be left."""
    made: list[Harness] = []

    def new(**options: Any) -> Harness:
        harness = Harness(tmp_path, **options)
        made.append(harness)
        return harness

    yield new
    for harness in made:
        await harness.orchestrator.shutdown("test over")
    left = [pid for h in made for run in h.runs for pid in survivors(run.run_id)]
    assert left == [], f"processes left behind: {left}"


def survivors(run_id: str) -> list[int]:
    """The pids of live processes carrying the run's marker (zombies are not alive)."""
    left = []
    for process in processes_with_marker(run_id):
        try:
            if process.status() != psutil.STATUS_ZOMBIE:
                left.append(process.pid)
        except psutil.NoSuchProcess:
            continue
    return left


def statuses(run: Run) -> list[str]:
    assert run.workflow is not None
    return [step.status for step in run.workflow.steps]


def step_children(run: Run) -> list[list[int]]:
    assert run.workflow is not None
    return [list(step.children) for step in run.workflow.steps]


# --- fan-out and templates --------------------------------------------------------------


async def test_a_for_each_fans_out_over_a_produced_list_and_the_last_step_gathers(
    make: Make,
) -> None:
    runs = make()
    plan = runs.plan(
        [
            py("import json; print(json.dumps(['a', 'b', 'c']))", **{"as": "words"}),
            {
                "forEach": "{outputs.words}",
                "item": py(ECHO_ARGS, "{item}", "{index}", label="{index}:{item} of {task}"),
            },
            py(
                "import json, sys\n"
                "texts = json.loads(sys.argv[1])\n"
                "print('|'.join(t.strip() for t in texts) + ' / ' + sys.argv[2])",
                "{previous}",
                "{task}",
            ),
        ]
    )
    run = await runs.finish(runs.launch(plan))
    assert run.status is RunStatus.COMPLETED, (run.status, run.error)
    assert run.output is not None and run.output.text == "a-0|b-1|c-2 / a b c"
    assert not run.output.partial
    assert len(run.children) == 5
    assert [child.step for child in run.children] == [0, 1, 1, 1, 2]
    labels = [child.label for child in run.children]
    assert labels == [None, "0:a of a b c", "1:b of a b c", "2:c of a b c", None]
    assert [child.status for child in run.children] == [RunStatus.COMPLETED] * 5
    assert statuses(run) == ["completed"] * 3
    assert step_children(run) == [[0], [1, 2, 3], [4]]
    assert run.workflow is not None and run.workflow.steps[0].output_name == "words"
    assert runs.texts() == {
        0: '["a", "b", "c"]',
        1: "a-0",
        2: "b-1",
        3: "c-2",
        4: "a-0|b-1|c-2 / a b c",
    }


async def test_a_parallel_items_own_output_name_reaches_later_steps(make: Make) -> None:
    runs = make()
    plan = runs.plan(
        [
            {"parallel": [py(ECHO_ARGS, "left", **{"as": "l"}), py(ECHO_ARGS, "right")]},
            py(ECHO_ARGS, "{outputs.l}"),
        ]
    )
    run = await runs.finish(runs.launch(plan))
    assert run.status is RunStatus.COMPLETED, (run.status, run.error)
    assert run.output is not None and run.output.text == "left"


@pytest.mark.parametrize(
    ("previous_bytes", "printed"),
    [(100, 1_000), (64 * 1024, 70_000)],
    ids=["small-cap", "server-cap"],
)
async def test_previous_is_capped_with_the_marker(
    make: Make, previous_bytes: int, printed: int
) -> None:
    runs = make(previous_bytes=previous_bytes)
    plan = runs.plan(
        [
            # Dots: a long run of letters would be redacted (protocol.md §12.1).
            py("import sys; sys.stdout.write('.' * int(sys.argv[1]))", str(printed)),
            py(
                "import json, sys\n"
                "data = sys.stdin.read()\n"
                "print(json.dumps([len(data.encode()), data.count('.'), data[-40:]]))",
                prompt="{previous}",
            ),
        ]
    )
    run = await runs.finish(runs.launch(plan))
    assert run.status is RunStatus.COMPLETED, (run.status, run.error)
    assert run.output is not None
    expected = "." * previous_bytes + "\n" + MARKER
    assert json.loads(run.output.text) == [len(expected), previous_bytes, expected[-40:]]
    # What later steps see of the first child is kept capped the same way.
    assert runs.texts()[0] == expected


# --- forEach problems -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("printed", "code", "data"),
    [
        ("print('no list here')", "foreach-not-array", {"step": 1}),
        ("print('[1, 2')", "foreach-not-array", {"step": 1}),
        ("print(7)", "foreach-not-array", {"step": 1}),
        (
            f"import json; print(json.dumps(list(range({MAX_FOR_EACH_ITEMS + 1}))))",
            "foreach-too-long",
            {"step": 1, "elements": MAX_FOR_EACH_ITEMS + 1},
        ),
    ],
    ids=["not-json", "broken-json", "a-number", "too-long"],
)
async def test_a_for_each_that_cannot_fan_out_fails_the_run_without_children(
    make: Make, printed: str, code: str, data: dict[str, Any]
) -> None:
    runs = make()
    plan = runs.plan(
        [
            py(printed),
            {"forEach": "{previous}", "item": py(ECHO_ARGS, "{item}")},
            py(ECHO_ARGS, "never"),
        ]
    )
    run = await runs.finish(runs.launch(plan))
    assert run.status is RunStatus.FAILED and run.error is not None
    assert (run.error.code, run.error.data) == (code, data)
    assert run.error.message.startswith("step 1: ")
    assert statuses(run) == ["completed", "failed", "pending"]
    assert step_children(run) == [[0], [], []]
    assert len(run.children) == 1 and [i for i, _, _ in runs.records.added] == [0]


async def test_an_empty_for_each_completes_its_step_without_children(make: Make) -> None:
    runs = make()
    plan = runs.plan(
        [
            py("print('[]')"),
            {"forEach": "{previous}", "item": py(ECHO_ARGS, "{item}")},
            py(ECHO_ARGS, "after", "{previous}"),
        ]
    )
    run = await runs.finish(runs.launch(plan))
    assert run.status is RunStatus.COMPLETED, (run.status, run.error)
    assert statuses(run) == ["completed"] * 3
    assert step_children(run) == [[0], [], [1]]
    assert run.output is not None and run.output.text == "after-[]"


async def test_a_code_fenced_array_fans_out_and_elements_that_are_not_strings_read_as_json(
    make: Make,
) -> None:
    runs = make()
    fenced = '```json\n[1, {"k": [true]}, "s"]\n```'
    plan = runs.plan(
        [
            py("import sys; print(sys.argv[1])", fenced),
            {"forEach": "{previous}", "item": py(ECHO_ARGS, "{item}"), "as": "all"},
        ]
    )
    run = await runs.finish(runs.launch(plan))
    assert run.status is RunStatus.COMPLETED, (run.status, run.error)
    assert run.output is not None
    assert json.loads(run.output.text) == ["1", '{"k": [true]}', "s"]


# --- failures and stops -----------------------------------------------------------------


async def test_a_failing_child_of_a_parallel_step_fails_the_run_after_its_siblings(
    make: Make, tmp_path: Path
) -> None:
    runs = make()
    failed = tmp_path / "failed"
    plan = runs.plan(
        [
            py(ECHO_ARGS, "first"),
            {
                "parallel": [
                    py(WAIT_FOR + "print('a')", str(failed)),
                    py("import sys; open(sys.argv[1], 'w').close(); sys.exit(1)", str(failed)),
                    py(WAIT_FOR + "print('c')", str(failed)),
                ]
            },
            py(ECHO_ARGS, "never"),
        ]
    )
    run = await runs.finish(runs.launch(plan))
    assert run.status is RunStatus.FAILED and run.error is not None
    assert run.error.message.startswith("child 2: ")
    assert run.error.data is not None and run.error.data["index"] == 2
    assert run.error.data["exitCode"] == 1
    # The siblings waited for the failure and still finished.
    assert [c.status for c in run.children] == [
        RunStatus.COMPLETED,
        RunStatus.COMPLETED,
        RunStatus.FAILED,
        RunStatus.COMPLETED,
    ]
    assert [c.step for c in run.children] == [0, 1, 1, 1]
    assert statuses(run) == ["completed", "failed", "pending"]
    assert step_children(run) == [[0], [1, 2, 3], []]
    assert sorted(runs.texts()) == [0, 1, 3]  # a failed child keeps no text
    assert [i for i, _, _ in runs.records.added] == [0, 1, 2, 3]


async def test_a_step_runs_at_most_four_children_at_once(make: Make, tmp_path: Path) -> None:
    runs = make(slots=8)  # the server would run eight: the workflow's own bound applies
    release = tmp_path / "release"
    release.mkdir()
    plan = runs.plan(
        [
            py("print(list(range(6)))"),
            {
                "forEach": "{previous}",
                "item": py(
                    "import os, sys, time\n"
                    "print('started', flush=True)\n"
                    "path = os.path.join(sys.argv[1], sys.argv[2])\n"
                    "while not os.path.exists(path): time.sleep(0.02)\n",
                    str(release),
                    "{index}",
                ),
            },
        ],
        stream=True,
    )
    running_counts: list[int] = []

    def watch(run: Run) -> None:
        running_counts.append(sum(c.status is RunStatus.RUNNING for c in run.children))

    runs.watchers.append(watch)
    run = runs.launch(plan)

    def started_now() -> set[int]:
        """The children that printed "started" (child 0 is the list's step)."""
        return {
            e.payload.index
            for rid, e in runs.events
            if rid == run.run_id
            and isinstance(e.payload, OutputEvent)
            and "started" in e.payload.text
        }

    await runs.until(lambda: len(started_now()) == WORKFLOW_PARALLELISM)
    assert started_now() == {1, 2, 3, 4}
    assert [c.status for c in run.children[5:]] == [RunStatus.QUEUED] * 2
    # One ends: exactly one more may start, and it is the next in order.
    (release / "0").touch()
    await runs.until(lambda: 5 in started_now())
    assert run.children[1].status is RunStatus.COMPLETED
    assert run.children[6].status is RunStatus.QUEUED
    (release / "1").touch()
    await runs.until(lambda: 6 in started_now())
    for index in range(2, 6):
        (release / str(index)).touch()
    run = await runs.finish(run)
    assert run.status is RunStatus.COMPLETED, (run.status, run.error)
    assert max(running_counts) == WORKFLOW_PARALLELISM
    # Whatever the order of events, the fifth started only after the first ended.
    first, fifth = run.children[1], run.children[5]
    assert first.ended_at is not None and fifth.started_at is not None
    assert fifth.started_at >= first.ended_at


def tree_of(child: ChildRun) -> list[psutil.Process]:
    assert child.pid is not None
    root = psutil.Process(child.pid)
    return [root, *root.children(recursive=True)]


async def test_stop_during_a_parallel_step_cancels_it_and_ends_every_tree(make: Make) -> None:
    runs = make()
    plan = runs.plan(
        [
            py("print(list(range(5)))"),
            {"forEach": "{previous}", "item": {"command": [PY, str(FAKES / "tree.py"), "3"]}},
            py(ECHO_ARGS, "never"),
        ],
        stream=True,
    )
    run = runs.launch(plan)

    def ready() -> set[int]:
        return {
            e.payload.index
            for rid, e in runs.events
            if rid == run.run_id
            and isinstance(e.payload, OutputEvent)
            and "ready" in e.payload.text
        }

    # Four trees of three processes each are up; the fifth waits its turn.
    await runs.until(lambda: len(ready()) == WORKFLOW_PARALLELISM)
    assert ready() == {1, 2, 3, 4} and run.children[5].status is RunStatus.QUEUED
    processes = [p for child in run.children[1:5] for p in tree_of(child)]
    assert len(processes) == 12
    assert await runs.orchestrator.stop(run, grace_ms=2000, reason="test") is False
    assert_terminal_table(run)
    assert run.status is RunStatus.CANCELLED and run.reason == "test"
    terminal = [
        e
        for rid, e in runs.events
        if isinstance(e.payload, StatusEvent) and e.payload.status not in ("queued", "running")
    ]
    assert len(terminal) == 1
    assert [c.status for c in run.children] == [RunStatus.COMPLETED] + [RunStatus.CANCELLED] * 5
    assert all(c.reason == "test" for c in run.children[1:])
    assert run.children[5].pid is None  # never started
    assert statuses(run) == ["completed", "cancelled", "pending"]
    assert step_children(run) == [[0], [1, 2, 3, 4, 5], []]
    assert await still_running(processes, WAIT_S) == []


async def test_stop_during_a_prompt_step_leaves_the_rest_pending(
    make: Make, tmp_path: Path
) -> None:
    runs = make()
    go = tmp_path / "go"
    plan = runs.plan(
        [
            py("import sys; print('waiting', flush=True)\n" + WAIT_FOR, str(go)),
            py(ECHO_ARGS, "never"),
        ],
        stream=True,
    )
    run = runs.launch(plan)
    await runs.until(lambda: any(e.type == "output" for _, e in runs.events))
    assert await runs.orchestrator.stop(run, grace_ms=2000, reason="test") is False
    assert_terminal_table(run)
    assert run.status is RunStatus.CANCELLED and run.reason == "test"
    assert statuses(run) == ["cancelled", "pending"]
    assert len(run.children) == 1


async def test_stop_between_steps_starts_no_further_step(make: Make) -> None:
    runs = make()
    runs.records.gate = gate = asyncio.Event()  # holds the snapshot after step 0
    plan = runs.plan(
        [py(ECHO_ARGS, "zero"), py(ECHO_ARGS, "never")], snapshotPath=str(runs.cwd / "s.json")
    )
    run = runs.launch(plan)
    async with asyncio.timeout(WAIT_S):
        await runs.records.at_gate.wait()
    assert statuses(run) == ["completed", "pending"]
    stopping = asyncio.create_task(runs.orchestrator.stop(run, grace_ms=2000, reason="test"))
    await loop_turns()  # the stop is requested, and waits for the step held at the gate
    assert not stopping.done() and not run.is_terminal
    gate.set()
    assert await asyncio.wait_for(stopping, WAIT_S) is False
    assert_terminal_table(run)
    assert run.status is RunStatus.CANCELLED and run.reason == "test"
    assert statuses(run) == ["completed", "pending"]
    assert len(run.children) == 1 and step_children(run) == [[0], []]
    assert run.output is None


# --- the records hooks ------------------------------------------------------------------


async def test_the_records_hooks_see_the_definition_each_child_each_text_and_snapshots(
    make: Make, tmp_path: Path
) -> None:
    runs = make()
    snapshot_path = tmp_path / "snapshot.json"
    plan = runs.plan(
        [
            py(ECHO_ARGS, "zero"),
            {"parallel": [py(ECHO_ARGS, "{previous}", "l"), py(ECHO_ARGS, "r")], "label": "two"},
            py(ECHO_ARGS, "done"),
        ],
        snapshotPath=str(snapshot_path),
    )
    path = os.path.join(runs.real_cwd, snapshot_path.name)  # as resolve_spawn makes it
    assert plan.workflow is not None and plan.workflow.snapshot_path == path
    run = runs.launch(plan)
    # The definition is recorded at launch, before anything runs.
    assert runs.records.definitions == [(run, plan)]
    assert runs.records.added == [] and runs.records.snapshots == []
    run = await runs.finish(run)
    assert run.status is RunStatus.COMPLETED, (run.status, run.error)
    assert len(runs.records.definitions) == 1

    # Each child once, queued when added, with its filled launch projection.
    added = runs.records.added
    assert [(index, status) for index, _, status in added] == [
        (i, RunStatus.QUEUED) for i in range(4)
    ]
    argvs = [projection["argvTemplate"][3:] for _, projection, _ in added]
    assert argvs == [["zero"], ["zero", "l"], ["r"], ["done"]]
    assert all(projection["backend"] == "command" for _, projection, _ in added)
    assert all(projection["cwd"] == runs.real_cwd for _, projection, _ in added)

    assert sorted(runs.records.texts) == [
        (0, "zero"),
        (1, "zero-l"),
        (2, "r"),
        (3, "done"),
    ]

    # After each step, then once at the end with the run terminal.
    assert runs.records.snapshots == [
        Snapshot(path, RunStatus.RUNNING, ["completed", "pending", "pending"], 1),
        Snapshot(path, RunStatus.RUNNING, ["completed", "completed", "pending"], 3),
        Snapshot(path, RunStatus.RUNNING, ["completed", "completed", "completed"], 4),
        Snapshot(path, RunStatus.COMPLETED, ["completed", "completed", "completed"], 4),
    ]
    assert not snapshot_path.exists()  # the hook writes it; this one only records


async def test_a_snapshot_that_cannot_be_written_does_not_stop_the_workflow(
    make: Make, tmp_path: Path
) -> None:
    runs = make()
    runs.records.snapshot_error = PermissionError("read-only")
    plan = runs.plan(
        [py(ECHO_ARGS, "one"), py(ECHO_ARGS, "two")], snapshotPath=str(tmp_path / "s.json")
    )
    run = await runs.finish(runs.launch(plan))
    assert run.status is RunStatus.COMPLETED, (run.status, run.error)
    assert len(runs.records.snapshots) == 3


async def test_without_a_snapshot_path_no_snapshot_is_written(make: Make) -> None:
    runs = make()
    run = await runs.finish(runs.launch(runs.plan([py(ECHO_ARGS, "one")])))
    assert run.status is RunStatus.COMPLETED
    assert runs.records.snapshots == []


# --- resume -----------------------------------------------------------------------------


@attrs.frozen
class Flaky:
    """A workflow whose step 1 fails until `flag` exists; step 0 logs each of its runs."""

    log: Path
    flag: Path

    def chain(self) -> list[Any]:
        return [
            py(
                "import sys\n"
                "with open(sys.argv[1], 'a') as log: log.write('ran\\n')\n"
                "print('zero')",
                str(self.log),
                **{"as": "first"},
            ),
            py(
                "import os, sys\n"
                "if not os.path.exists(sys.argv[1]): sys.exit(1)\n"
                "print('got ' + sys.argv[2].strip())",
                str(self.flag),
                "{previous}",
            ),
            py(
                "import sys; print('final: ' + sys.argv[1].strip() + ' + ' + sys.argv[2].strip())",
                "{previous}",
                "{outputs.first}",
            ),
        ]


@pytest.fixture
def flaky(tmp_path: Path) -> Flaky:
    return Flaky(log=tmp_path / "step0.log", flag=tmp_path / "flag")


async def fail_at_step_one(runs: Harness, flaky: Flaky) -> tuple[Run, RunPlan]:
    plan = runs.plan(flaky.chain())
    run = await runs.finish(runs.launch(plan))
    assert run.status is RunStatus.FAILED and run.error is not None
    assert run.error.data is not None and run.error.data["index"] == 1
    assert statuses(run) == ["completed", "failed", "pending"]
    assert len(run.children) == 2
    return run, plan


def resumed_plan(runs: Harness, plan: RunPlan, index: int) -> ChildPlan:
    """A child's new attempt: its item template, filled as its first attempt was launched."""
    (projection,) = [p for i, p, _ in runs.records.added if i == index]
    assert plan.workflow is not None
    step = runs.runs[0].children[index].step
    assert step is not None
    template = plan.children[plan.workflow.steps[step].items[0]]
    return attrs.evolve(template, prompt=None, command=tuple(projection["argvTemplate"]))


async def test_a_resumed_child_lets_the_remaining_steps_run_on_the_earlier_outputs(
    make: Make, flaky: Flaky
) -> None:
    runs = make()
    run, plan = await fail_at_step_one(runs, flaky)
    flaky.flag.touch()
    resumed = runs.orchestrator.resume(run, 1, resumed_plan(runs, plan, 1))
    reopened = run.status
    assert resumed is run and reopened is RunStatus.QUEUED  # running once the attempt starts
    run = await runs.finish(run)
    assert run.status is RunStatus.COMPLETED, (run.status, run.error)
    assert run.output is not None and run.output.text == "final: got zero + zero"
    assert [(c.step, c.attempt, c.status) for c in run.children] == [
        (0, 1, RunStatus.COMPLETED),
        (1, 2, RunStatus.COMPLETED),
        (2, 1, RunStatus.COMPLETED),
    ]
    assert flaky.log.read_text() == "ran\n"  # step 0 ran once: its output was reused
    assert statuses(run) == ["completed"] * 3
    assert step_children(run) == [[0], [1], [2]]
    assert runs.texts() == {0: "zero", 1: "got zero", 2: "final: got zero + zero"}
    assert [i for i, _, _ in runs.records.added] == [0, 1, 2]
    run_statuses = [
        e.payload.status for rid, e in runs.events if isinstance(e.payload, StatusEvent)
    ]
    assert run_statuses == ["queued", "running", "failed", "queued", "running", "completed"]


async def test_a_resumed_child_that_fails_again_leaves_the_later_steps_pending(
    make: Make, flaky: Flaky
) -> None:
    runs = make()
    run, plan = await fail_at_step_one(runs, flaky)
    runs.orchestrator.resume(run, 1, resumed_plan(runs, plan, 1))
    run = await runs.finish(run)
    assert run.status is RunStatus.FAILED and run.error is not None
    assert run.error.data is not None and run.error.data["index"] == 1
    assert [c.attempt for c in run.children] == [1, 2]
    assert statuses(run) == ["completed", "failed", "pending"]


async def test_a_step_with_two_failed_children_goes_on_once_both_were_resumed(
    make: Make, tmp_path: Path
) -> None:
    runs = make()
    flags = [tmp_path / "flag-a", tmp_path / "flag-b"]
    unless_flag = (
        "import os, sys\nif not os.path.exists(sys.argv[1]): sys.exit(1)\nprint(sys.argv[2])"
    )
    plan = runs.plan(
        [
            {
                "parallel": [
                    py(unless_flag, str(flags[0]), "a"),
                    py(unless_flag, str(flags[1]), "b"),
                ]
            },
            py("import json, sys; print(json.loads(sys.argv[1]))", "{previous}"),
        ]
    )
    run = await runs.finish(runs.launch(plan))
    assert run.status is RunStatus.FAILED and run.error is not None
    assert run.error.data is not None and run.error.data["index"] == 0

    flags[0].touch()
    runs.orchestrator.resume(run, 0, resumed_plan(runs, plan, 0))
    run = await runs.finish(run)
    # Its step still has a failed child: the run fails again, now for that one.
    assert run.status is RunStatus.FAILED and run.error is not None
    assert run.error.data is not None and run.error.data["index"] == 1
    assert [c.status for c in run.children] == [RunStatus.COMPLETED, RunStatus.FAILED]
    assert statuses(run) == ["failed", "pending"]

    flags[1].touch()
    runs.orchestrator.resume(run, 1, resumed_plan(runs, plan, 1))
    run = await runs.finish(run)
    assert run.status is RunStatus.COMPLETED, (run.status, run.error)
    assert run.output is not None and run.output.text == "['a', 'b']"
    assert [(c.step, c.attempt) for c in run.children] == [(0, 2), (0, 2), (1, 1)]
    assert statuses(run) == ["completed", "completed"]


async def test_resuming_a_child_of_an_earlier_step_runs_the_later_steps_again(
    make: Make, tmp_path: Path
) -> None:
    runs = make()
    source = tmp_path / "value"
    source.write_text("v1")
    plan = runs.plan(
        [
            py("import sys; print(open(sys.argv[1]).read())", str(source)),
            py(ECHO_ARGS, "got", "{previous}"),
        ]
    )
    run = await runs.finish(runs.launch(plan))
    assert run.output is not None and run.output.text == "got-v1"
    source.write_text("v2")
    runs.orchestrator.resume(run, 0, resumed_plan(runs, plan, 0))
    run = await runs.finish(run)
    assert run.status is RunStatus.COMPLETED, (run.status, run.error)
    assert run.output is not None and run.output.text == "got-v2"
    # The later step ran again as a new child; its step now refers to that one.
    assert [(c.step, c.attempt) for c in run.children] == [(0, 2), (1, 1), (1, 1)]
    assert step_children(run) == [[0], [2]]


def stored_copy(run: Run, plan: RunPlan) -> Run:
    """The run as a restarted server reads it from the store (JSON records, no events;
    a step's kind `command` from its workflow's definition, `plan`)."""
    children = [child_from_record(json.loads(json.dumps(child_record(c)))) for c in run.children]
    copy = run_from_record(json.loads(json.dumps(run_record(run))), children)
    mark_command_steps(copy, stored_plan(plan))
    return copy


def stored_plan(plan: RunPlan) -> RunPlan:
    """The workflow's definition as stored: its templates without environment values."""
    return workflow_from_record(json.loads(json.dumps(workflow_record(plan))))


async def test_after_a_restart_a_resume_given_the_stored_workflow_runs_the_rest(
    make: Make, flaky: Flaky
) -> None:
    before = make()
    run, plan = await fail_at_step_one(before, flaky)
    child_plan = resumed_plan(before, plan, 1)
    texts = before.texts()
    assert texts == {0: "zero"}
    await before.orchestrator.shutdown("restart")

    after = make()  # a new server process: it has neither the run nor its runner
    copy = stored_copy(run, plan)
    assert copy is not run and copy.workflow == run.workflow
    assert after.orchestrator.workflow_of(run.run_id) is None
    after.runs.append(copy)
    flaky.flag.touch()
    after.orchestrator.resume(copy, 1, child_plan, workflow=(stored_plan(plan), texts))
    await after.finish(copy)
    assert copy.status is RunStatus.COMPLETED, (copy.status, copy.error)
    assert copy.output is not None and copy.output.text == "final: got zero + zero"
    assert [(c.step, c.attempt) for c in copy.children] == [(0, 1), (1, 2), (2, 1)]
    assert flaky.log.read_text() == "ran\n"
    assert statuses(copy) == ["completed"] * 3
    assert after.texts() == {1: "got zero", 2: "final: got zero + zero"}
    assert [i for i, _, _ in after.records.added] == [2]
    assert run.status is RunStatus.FAILED  # the first server's object is untouched


async def test_after_a_restart_env_of_never_answers_with_another_childs_env(
    make: Make, tmp_path: Path
) -> None:
    before = make()
    flag = tmp_path / "flag"
    chain = [
        py("import os; print(os.environ['SECRET'])", env={"SECRET": "s3"}),
        py("import os, sys; sys.exit(0 if os.path.exists(sys.argv[1]) else 1)", str(flag)),
        py(ECHO_ARGS, "done"),
    ]
    plan = before.plan(chain)
    run = await before.finish(before.launch(plan))
    assert run.status is RunStatus.FAILED
    assert before.orchestrator.env_of(run.run_id, 0) == {"SECRET": "s3"}
    child_plan = resumed_plan(before, plan, 1)
    texts = before.texts()
    await before.orchestrator.shutdown("restart")

    after = make()
    copy = stored_copy(run, plan)
    after.runs.append(copy)
    flag.touch()
    after.orchestrator.resume(copy, 1, child_plan, workflow=(stored_plan(plan), texts))
    await after.finish(copy)
    assert copy.status is RunStatus.COMPLETED, (copy.status, copy.error)
    assert after.orchestrator.env_of(run.run_id, 0) is None  # this server never had it
    assert after.orchestrator.env_of(run.run_id, 2) == {}


async def test_a_fan_out_that_failed_runs_once_the_child_feeding_it_is_resumed(
    make: Make, tmp_path: Path
) -> None:
    """The forEach failure of the first run is no reason to fail the second."""
    flag = tmp_path / "flag"
    runs = make()
    producer = py(
        "import os, sys\nprint('[\"a\", \"b\"]' if os.path.exists(sys.argv[1]) else 'no list')",
        str(flag),
    )
    plan = runs.plan([producer, {"forEach": "{previous}", "item": py(ECHO_ARGS, "{item}")}])
    run = await runs.finish(runs.launch(plan))
    assert run.status is RunStatus.FAILED and run.error is not None
    assert run.error.code == "foreach-not-array"
    flag.touch()
    runs.orchestrator.resume(run, 0, resumed_plan(runs, plan, 0))
    run = await runs.finish(run)
    assert run.status is RunStatus.COMPLETED, (run.status, run.error)
    assert statuses(run) == ["completed", "completed"]
    assert step_children(run) == [[0], [1, 2]]


class _UnreadableExitParser(CommandParser):
    """A parser with a bug that shows once a child has exited."""

    def outcome(self, exit_status: ProcessExit) -> ParsedOutcome:
        raise RuntimeError("a bug")


class _UnreadableExitBackend(CommandBackend):
    def parser(self) -> _UnreadableExitParser:
        return _UnreadableExitParser()


async def test_a_bug_of_ours_in_a_step_ends_that_step_once_as_the_run_fails(make: Make) -> None:
    runs = make()
    plan = runs.plan([py(ECHO_ARGS, "first"), py(ECHO_ARGS, "second")])
    runs.backends["command"] = _UnreadableExitBackend()  # planned as usual, then run broken
    run = await runs.finish(runs.launch(plan))
    assert run.status is RunStatus.FAILED and run.error is not None
    assert run.error.code == "internal"
    assert statuses(run) == ["failed", "pending"]  # no step is left running
    assert [child.status for child in run.children] == [RunStatus.FAILED]
