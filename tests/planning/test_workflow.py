"""Workflow launch checks: steps and their items planned, every placeholder checked
where it stands, output names, step counts, the snapshot path, and the normalized plan."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import attrs
import pytest

from subagent_host.backends.base import Backend
from subagent_host.planning.check import CheckedSpawn, check_spawn
from subagent_host.planning.fingerprint import digest
from subagent_host.planning.normalized import normalized_plan, plan_fingerprint
from subagent_host.planning.plan import RunPlan, command_steps
from subagent_host.planning.views import PlanStep
from subagent_host.rpc.wire import SpawnParams, make_converter
from subagent_host.values import STEP_FOR_EACH, STEP_PARALLEL, STEP_PROMPT, RunKind
from tests.planning.conftest import LIMITS, to_json
from tests.special_files import NOT_REGULAR, shm_path

CONVERTER = make_converter()


def check(
    backends: dict[str, Backend], tmp_path: Path, workflow: dict[str, Any], **fields: Any
) -> CheckedSpawn:
    """check_spawn on `{"workflow": workflow, ...fields}` as it comes off the wire."""
    raw = {"workflow": workflow, "env": {"PATH": str(tmp_path / "bin")}, **fields}
    params = CONVERTER.structure(raw, SpawnParams)
    return check_spawn(params, backends=backends, limits=LIMITS, depth=0, server_cwd=str(tmp_path))


def flow(*chain: dict[str, Any], name: str = "w", task: str = "t", **extra: Any) -> dict[str, Any]:
    return {"name": name, "task": task, "chain": list(chain), **extra}


def errors(checked: CheckedSpawn) -> list[tuple[str, str | None]]:
    """The error diagnostics as (code, path), in the order they were found."""
    return [(d.code, d.path) for d in checked.diagnostics if d.severity == "error"]


def messages(checked: CheckedSpawn) -> list[str]:
    return [d.message for d in checked.diagnostics if d.severity == "error"]


def accepted_plan(checked: CheckedSpawn) -> RunPlan:
    assert errors(checked) == []
    assert checked.accepted and checked.plan is not None
    return checked.plan


def cmd(*argv: str, **fields: Any) -> dict[str, Any]:
    return {"command": list(argv), **fields}


def ask(prompt: str, **fields: Any) -> dict[str, Any]:
    """An agent item (pi, found on the children's PATH)."""
    return {"prompt": prompt, **fields}


# --- refusals: each case's error diagnostics (code, path), and their messages where given ---


@attrs.frozen
class Refusal:
    workflow: dict[str, Any]
    errors: list[tuple[str, str | None]]
    messages: list[str] | None = None
    """All error messages, in order (None: not checked)."""
    first_message: str | None = None
    """The first error message only."""
    message_ends: tuple[str, ...] | None = None
    """How the first error message ends (one of these)."""
    fields: dict[str, Any] = attrs.Factory(dict)
    """Params of the call beside `workflow`."""


def unknown(name: str) -> str:
    return f"unknown placeholder {{{name}}} (use {{task}}, {{previous}}, {{outputs.NAME}}, {{item}} or {{index}})"  # noqa: E501


def outside_for_each(name: str) -> Refusal:
    return Refusal(
        flow(
            ask(f"{{{name}}}"),
            {"parallel": [cmd("true"), cmd("echo", f"{{{name}}}")]},
            {"forEach": f"[{{{name}}}]", "item": cmd("echo", f"{{{name}}}")},
        ),
        [
            ("invalid-template", "workflow.chain[0].prompt"),
            ("invalid-template", "workflow.chain[1].parallel[1].command[1]"),
            ("invalid-template", "workflow.chain[2].forEach"),
        ],
        messages=[f"{{{name}}} is only known inside a forEach item"] * 3,
    )


def invalid_output_name(name: str) -> Refusal:
    return Refusal(
        flow(
            ask("a", **{"as": name}),
            {"parallel": [cmd("true"), cmd("true", **{"as": name})]},
            {"forEach": "[1]", "item": cmd("true"), "as": name},
        ),
        [
            ("invalid-output-name", "workflow.chain[0].as"),
            ("invalid-output-name", "workflow.chain[1].parallel[1].as"),
            ("invalid-output-name", "workflow.chain[2].as"),
        ],
        first_message="use 1-64 characters of A-Z a-z 0-9 _ -",
    )


def snapshot_path(value: str, **expected: Any) -> Refusal:
    return Refusal(
        flow(cmd("true"), snapshotPath=value),
        [("invalid-snapshot-path", "workflow.snapshotPath")],
        **expected,
    )


REFUSALS = [
    pytest.param(
        Refusal(flow(cmd("true")), [("invalid-shape", None)], fields={"prompt": "also"}),
        id="a workflow is one shape among the others",
    ),
    # placeholders
    pytest.param(
        Refusal(
            flow(ask("go on from {previous}"), ask("{previous}")),
            [("invalid-template", "workflow.chain[0].prompt")],
            messages=["{previous} has no earlier step to take its output from"],
        ),
        id="previous in the first step",
    ),
    pytest.param(
        Refusal(
            flow({"forEach": "{previous}", "item": cmd("echo", "{item}")}),
            [("invalid-template", "workflow.chain[0].forEach")],
        ),
        id="previous in a first forEach template",
    ),
    pytest.param(
        Refusal(
            flow(ask("{task}"), ask("use {foo} and {outputs}")),
            [
                ("invalid-template", "workflow.chain[1].prompt"),
                ("invalid-template", "workflow.chain[1].prompt"),
            ],
            messages=[unknown("foo"), unknown("outputs")],
        ),
        id="an unknown placeholder, at its field",
    ),
    pytest.param(
        Refusal(
            flow(
                ask("{outputs.x}"),  # before: an error
                ask("make x", **{"as": "x"}),
                ask("{outputs.x}"),  # after: fine
            ),
            [("invalid-template", "workflow.chain[0].prompt")],
            messages=["{outputs.x}: no earlier step names its output 'x' (known: none yet)"],
        ),
        id="an output is known only after the step that names it",
    ),
    pytest.param(
        Refusal(
            flow(ask("a", **{"as": "zeta"}), ask("b", **{"as": "alpha"}), ask("{outputs.gamma}")),
            [("invalid-template", "workflow.chain[2].prompt")],
            messages=[
                "{outputs.gamma}: no earlier step names its output 'gamma' (known: alpha, zeta)"
            ],
        ),
        id="an unknown output's message lists the known names",
    ),
    pytest.param(
        Refusal(
            flow(
                {"parallel": [ask("a", **{"as": "a"}), ask("{outputs.a}")], "as": "group"},
                ask("{outputs.a} {outputs.group}"),
            ),
            [("invalid-template", "workflow.chain[0].parallel[1].prompt")],
        ),
        id="a parallel item cannot use a sibling's output",
    ),
    pytest.param(
        Refusal(
            flow(ask("list"), {"forEach": "{outputs.each}", "item": ask("{item}"), "as": "each"}),
            [("invalid-template", "workflow.chain[1].forEach")],
        ),
        id="a forEach cannot fan out over its own output",
    ),
    pytest.param(outside_for_each("item"), id="item outside a forEach item"),
    pytest.param(outside_for_each("index"), id="index outside a forEach item"),
    pytest.param(
        Refusal(
            flow(
                cmd("echo", "{task}", "--from={previous}", label="{nope}"),
                {"forEach": "{previous}", "item": cmd("echo", "{item}", "{outputs.none}")},
            ),
            [
                ("invalid-template", "workflow.chain[0].label"),
                ("invalid-template", "workflow.chain[0].command[2]"),
                ("invalid-template", "workflow.chain[1].item.command[2]"),
            ],
        ),
        id="templates in command arguments and labels are checked",
    ),
    pytest.param(
        Refusal(
            flow(cmd("true"), cmd("cat", prompt="{tsak}")),
            [("invalid-template", "workflow.chain[1].prompt")],
        ),
        id="a command item's prompt is checked too",
    ),
    # output names
    pytest.param(
        Refusal(
            flow(ask("a", **{"as": "x"}), ask("b"), ask("c", **{"as": "x"})),
            [("duplicate-output", "workflow.chain[2].as")],
            messages=["another step or item already names its output 'x'"],
        ),
        id="a duplicate output name",
    ),
    pytest.param(
        Refusal(
            flow({"parallel": [cmd("true", **{"as": "x"}), cmd("true", **{"as": "x"})], "as": "x"}),
            [
                ("duplicate-output", "workflow.chain[0].parallel[1].as"),
                ("duplicate-output", "workflow.chain[0].as"),
            ],
        ),
        id="duplicate output names within a parallel step",
    ),
    pytest.param(
        Refusal(
            flow(
                {"parallel": [cmd("true", **{"as": "a"}), cmd("true")]},
                {"forEach": "[1]", "item": cmd("true"), "as": "a"},
            ),
            [("duplicate-output", "workflow.chain[1].as")],
        ),
        id="a step's output may not reuse an earlier item's name",
    ),
    *(
        pytest.param(
            invalid_output_name(name),
            id=f"invalid output name {name!r}" if len(name) < 9 else f"{len(name)} characters",
        )
        for name in ["", "a b", "a.b", "x" * 65, "é", "{x}"]
    ),
    pytest.param(
        Refusal(
            flow(
                ask("list"),
                {"forEach": "{previous}", "item": ask("{item}", **{"as": "one"})},
                ask("{outputs.one}"),
            ),
            [
                ("invalid-output-name", "workflow.chain[1].item.as"),
                # The item's name is not defined for later steps either.
                ("invalid-template", "workflow.chain[2].prompt"),
            ],
            first_message="a forEach item runs many times: "
            "name the fan-out's output with the step's own `as`",
        ),
        id="a forEach item may not name its output",
    ),
    # counts and the name
    *(
        pytest.param(
            Refusal(
                flow(cmd("true"), {"parallel": [cmd("true")] * count}),
                [("item-count", "workflow.chain[1].parallel")],
                messages=[f"parallel takes 1 to 8 items, not {count}"],
            ),
            id=f"a parallel step of {count} items",
        )
        for count in [0, 9]
    ),
    *(
        pytest.param(
            Refusal(
                flow(*[cmd("true")] * count),
                [("item-count", "workflow.chain")],
                messages=[f"workflow.chain takes 1 to 32 steps, not {count}"],
            ),
            id=f"a workflow of {count} steps",
        )
        for count in [0, 33]
    ),
    *(
        pytest.param(
            Refusal(
                flow(cmd("true"), name=name),
                [("invalid-workflow", "workflow.name")],
                messages=["name must be 1..128 characters"],
            ),
            id=f"a workflow name of {len(name)} characters{' (blank)' if name.isspace() else ''}",
        )
        for name in ["", "   ", "x" * 129]
    ),
    pytest.param(
        Refusal(
            flow(
                ask("{previous}", **{"as": "bad name"}),
                {"parallel": []},
                {"forEach": "{item}", "item": cmd("true", **{"as": "y"})},
                name="",
                snapshotPath="missing/snap.json",
            ),
            [
                ("invalid-workflow", "workflow.name"),
                ("invalid-template", "workflow.chain[0].prompt"),
                ("invalid-output-name", "workflow.chain[0].as"),
                ("item-count", "workflow.chain[1].parallel"),
                ("invalid-template", "workflow.chain[2].forEach"),
                ("invalid-output-name", "workflow.chain[2].item.as"),
                ("invalid-snapshot-path", "workflow.snapshotPath"),
            ],
        ),
        id="every problem is found at once",
    ),
    pytest.param(
        Refusal(
            flow(
                cmd("true"),
                {"parallel": [cmd("true"), {"prompt": "x", "backend": "nope"}]},
                {"forEach": "[1]", "item": {"command": ["true"], "timeoutMs": 0}},
            ),
            [
                ("backend-unavailable", "workflow.chain[1].parallel[1].backend"),
                ("invalid-duration", "workflow.chain[2].item.timeoutMs"),
            ],
        ),
        id="item problems carry the item's workflow path",
    ),
    # snapshot paths that need no files of the test's
    *(
        pytest.param(
            snapshot_path(value, message_ends=(" is under /proc", " is under /sys")),
            id=f"a snapshot path under {value.split('/')[1]}",
        )
        for value in ["/proc/self/snap.json", "/sys/snap.json"]
    ),
    pytest.param(
        snapshot_path("", messages=["must be a non-empty path"]), id="an empty snapshot path"
    ),
    pytest.param(
        snapshot_path("snap\0.json", messages=["must be a non-empty path"]),
        id="a snapshot path with NUL",
    ),
]


@pytest.mark.parametrize("case", REFUSALS)
def test_a_workflow_is_refused_with_each_problem_at_its_path(
    backends: dict[str, Backend], tmp_path: Path, case: Refusal
) -> None:
    checked = check(backends, tmp_path, case.workflow, **case.fields)
    assert errors(checked) == case.errors
    if case.messages is not None:
        assert messages(checked) == case.messages
    if case.first_message is not None:
        assert messages(checked)[0] == case.first_message
    if case.message_ends is not None:
        assert messages(checked)[0].endswith(case.message_ends)
    assert not checked.accepted and checked.plan is None


# --- an accepted plan ---------------------------------------------------------------------


def test_an_accepted_workflow_plans_its_steps_over_item_templates(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    checked = check(
        backends,
        tmp_path,
        flow(
            ask("Plan {task}", **{"as": "plan"}),
            {
                "parallel": [
                    cmd("echo", "{outputs.plan}", **{"as": "a"}),
                    ask("review {previous}", label="rev {task}"),
                ],
                "as": "both",
                "label": "fan",
            },
            {
                "forEach": "{outputs.plan}",
                "item": cmd("echo", "{item}", "{index}", label="#{index}"),
                "as": "each",
                "label": "loop",
            },
            ask("sum {outputs.a} {outputs.both} {outputs.each} {previous}"),
        ),
    )
    plan = accepted_plan(checked)
    assert checked.mode == "background"
    assert plan.kind is RunKind.WORKFLOW
    assert plan.workflow is not None
    assert plan.workflow.name == "w"
    assert plan.workflow.task == "t"
    assert plan.workflow.snapshot_path is None
    assert plan.workflow.steps == (
        PlanStep(index=0, kind=STEP_PROMPT, items=(0,), output_name="plan"),
        PlanStep(index=1, kind=STEP_PARALLEL, items=(1, 2), output_name="both", label="fan"),
        PlanStep(
            index=2,
            kind=STEP_FOR_EACH,
            items=(3,),
            output_name="each",
            over="{outputs.plan}",
            label="loop",
        ),
        PlanStep(index=3, kind=STEP_PROMPT, items=(4,)),
    )
    children = plan.children
    assert [c.backend for c in children] == ["pi", "command", "pi", "command", "pi"]
    assert [c.output_name for c in children] == ["plan", "a", None, None, None]
    # Templates stay templates: they are filled when the step starts.
    assert children[0].prompt == "Plan {task}"
    assert children[1].command == ("echo", "{outputs.plan}")
    assert children[2].label == "rev {task}"
    assert children[3].command == ("echo", "{item}", "{index}")
    assert children[3].label == "#{index}"
    assert children[4].prompt == "sum {outputs.a} {outputs.both} {outputs.each} {previous}"


def test_step_kinds_are_the_wire_names() -> None:
    assert (STEP_PROMPT, STEP_PARALLEL, STEP_FOR_EACH) == ("prompt", "parallel", "forEach")


def test_only_a_one_item_step_running_a_command_is_a_command_step_and_it_is_planned_as_prompt(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    plan = accepted_plan(
        check(
            backends,
            tmp_path,
            flow(
                cmd("echo", "{task}"),
                ask("go on from {previous}"),
                {"parallel": [cmd("echo", "a"), cmd("echo", "b")]},
                {"forEach": "{previous}", "item": cmd("echo", "{item}")},
                cmd("echo", "{previous}"),
            ),
        )
    )
    assert plan.workflow is not None
    assert [step.kind for step in plan.workflow.steps] == [
        "prompt", "prompt", "parallel", "forEach", "prompt"
    ]  # fmt: skip
    assert command_steps(plan) == {0, 4}


def test_a_one_step_workflow_of_a_command_is_accepted(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    plan = accepted_plan(check(backends, tmp_path, flow(cmd("echo", "{task}"))))
    assert plan.workflow is not None
    assert plan.workflow.steps == (PlanStep(index=0, kind=STEP_PROMPT, items=(0,)),)
    assert [c.command for c in plan.children] == [("echo", "{task}")]


# --- placeholders ---------------------------------------------------------------------------


def test_json_in_a_prompt_is_not_a_placeholder(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    accepted_plan(check(backends, tmp_path, flow(ask('answer as {"files": []} or { x } or {}'))))


def test_item_and_index_are_known_in_a_for_each_items_fields(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    checked = check(
        backends,
        tmp_path,
        flow(
            ask("list files as JSON"),
            {
                "forEach": "{previous}",
                "item": ask("check {item} ({index}) for {task}", label="{index}: {item}"),
            },
        ),
    )
    accepted_plan(checked)


# --- output names ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["x", "A-b_9", "-", "x" * 64])
def test_a_valid_output_name_is_accepted(
    backends: dict[str, Backend], tmp_path: Path, name: str
) -> None:
    plan = accepted_plan(
        check(backends, tmp_path, flow(ask("a", **{"as": name}), ask(f"{{outputs.{name}}}")))
    )
    assert plan.workflow is not None
    assert plan.workflow.steps[0].output_name == name


# --- counts and the name ----------------------------------------------------------------------


def test_a_parallel_step_of_8_items_is_accepted(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    plan = accepted_plan(check(backends, tmp_path, flow({"parallel": [cmd("true")] * 8})))
    assert plan.workflow is not None
    assert plan.workflow.steps == (PlanStep(index=0, kind=STEP_PARALLEL, items=tuple(range(8))),)
    assert len(plan.children) == 8


def test_a_workflow_of_32_steps_is_accepted(backends: dict[str, Backend], tmp_path: Path) -> None:
    plan = accepted_plan(check(backends, tmp_path, flow(*[cmd("true")] * 32)))
    assert plan.workflow is not None
    assert len(plan.workflow.steps) == 32
    assert [s.items for s in plan.workflow.steps] == [(i,) for i in range(32)]


def test_a_name_of_128_characters_is_accepted(backends: dict[str, Backend], tmp_path: Path) -> None:
    plan = accepted_plan(check(backends, tmp_path, flow(cmd("true"), name="n" * 128)))
    assert plan.workflow is not None
    assert plan.workflow.name == "n" * 128


# --- the snapshot path ------------------------------------------------------------------------


def test_a_relative_snapshot_path_is_the_calls_cwds(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    work = tmp_path / "work"
    (work / "out").mkdir(parents=True)
    plan = accepted_plan(
        check(
            backends,
            tmp_path,
            flow(cmd("true"), snapshotPath="out/snap.json"),
            cwd=str(work),
        )
    )
    assert plan.workflow is not None
    assert plan.workflow.snapshot_path == os.path.join(os.path.realpath(work), "out", "snap.json")


def test_without_a_cwd_a_relative_snapshot_path_is_the_servers_cwds(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    plan = accepted_plan(check(backends, tmp_path, flow(cmd("true"), snapshotPath="snap.json")))
    assert plan.workflow is not None
    assert plan.workflow.snapshot_path == os.path.join(os.path.realpath(tmp_path), "snap.json")


def test_a_snapshot_path_may_start_at_home(
    backends: dict[str, Backend], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    work = tmp_path / "work"
    work.mkdir()
    plan = accepted_plan(
        check(backends, tmp_path, flow(cmd("true"), snapshotPath="~/s.json"), cwd=str(work))
    )
    assert plan.workflow is not None
    assert plan.workflow.snapshot_path == os.path.join(os.path.realpath(home), "s.json")


def test_an_absolute_snapshot_path_is_kept_with_its_directory_resolved(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    work = tmp_path / "work"
    work.mkdir()
    plan = accepted_plan(
        check(
            backends,
            tmp_path,
            flow(cmd("true"), snapshotPath=str(tmp_path / "link" / "s.json")),
            cwd=str(work),
        )
    )
    assert plan.workflow is not None
    assert plan.workflow.snapshot_path == os.path.join(os.path.realpath(real), "s.json")


@pytest.mark.parametrize("value", ["missing/snap.json", "missing/deeper/snap.json"])
def test_a_snapshot_path_in_a_missing_directory_is_an_error(
    backends: dict[str, Backend], tmp_path: Path, value: str
) -> None:
    checked = check(backends, tmp_path, flow(cmd("true"), snapshotPath=value))
    assert errors(checked) == [("invalid-snapshot-path", "workflow.snapshotPath")]
    directory = os.path.dirname(os.path.join(tmp_path, value))
    assert messages(checked) == [f"{directory!r} is not a directory"]
    assert checked.plan is None


def test_a_snapshot_path_under_a_file_is_an_error(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    (tmp_path / "afile").write_text("")
    checked = check(backends, tmp_path, flow(cmd("true"), snapshotPath="afile/snap.json"))
    assert errors(checked) == [("invalid-snapshot-path", "workflow.snapshotPath")]


@pytest.mark.parametrize("value", ["out", "out/", ".", ".."])
def test_a_snapshot_path_that_is_a_directory_is_an_error(
    backends: dict[str, Backend], tmp_path: Path, value: str
) -> None:
    (tmp_path / "out").mkdir()
    checked = check(backends, tmp_path, flow(cmd("true"), snapshotPath=value))
    assert errors(checked) == [("invalid-snapshot-path", "workflow.snapshotPath")]
    assert messages(checked)[0].endswith(" is a directory")
    assert checked.plan is None


@pytest.mark.parametrize("shape", sorted(NOT_REGULAR))
def test_a_snapshot_path_that_is_no_regular_file_is_an_error(
    backends: dict[str, Backend], tmp_path: Path, shape: str
) -> None:
    make, kind = NOT_REGULAR[shape]
    make(tmp_path / "snap.json")
    checked = check(backends, tmp_path, flow(cmd("true"), snapshotPath="snap.json"))
    assert errors(checked) == [("invalid-snapshot-path", "workflow.snapshotPath")]
    real = os.path.join(os.path.realpath(tmp_path), "snap.json")
    assert messages(checked) == [f"{real!r} is {kind}"]
    assert checked.plan is None


def test_a_symlink_to_a_regular_file_is_accepted_and_names_the_link(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    (tmp_path / "target.json").write_text("{}")
    (tmp_path / "snap.json").symlink_to(tmp_path / "target.json")
    plan = accepted_plan(check(backends, tmp_path, flow(cmd("true"), snapshotPath="snap.json")))
    assert plan.workflow is not None
    assert plan.workflow.snapshot_path == os.path.join(os.path.realpath(tmp_path), "snap.json")


def test_a_snapshot_path_under_dev_is_an_error_whether_it_exists_or_not(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    with shm_path() as shm:
        checked = check(backends, tmp_path, flow(cmd("true"), snapshotPath=str(shm)))
        assert errors(checked) == [("invalid-snapshot-path", "workflow.snapshotPath")]
        assert messages(checked) == [f"{str(shm)!r} is under /dev"]
        assert not shm.exists()


def test_a_symlink_that_leads_under_dev_is_an_error(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    with shm_path() as shm:
        (tmp_path / "snap.json").symlink_to(shm)  # dangling: the rename would create it
        checked = check(backends, tmp_path, flow(cmd("true"), snapshotPath="snap.json"))
        assert errors(checked) == [("invalid-snapshot-path", "workflow.snapshotPath")]
        assert messages(checked)[0].endswith(" is under /dev")


def test_a_relative_snapshot_path_is_resolved_against_the_calls_cwd_not_the_servers(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "out").mkdir()  # exists beside the server's cwd only
    checked = check(backends, tmp_path, flow(cmd("true"), snapshotPath="out/s.json"), cwd=str(work))
    assert errors(checked) == [("invalid-snapshot-path", "workflow.snapshotPath")]
    assert messages(checked) == [f"{str(work / 'out')!r} is not a directory"]


# --- the normalized plan and its fingerprint --------------------------------------------------


def test_the_normalized_plan_shows_the_workflow(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    (tmp_path / "snaps").mkdir()
    plan = accepted_plan(
        check(
            backends,
            tmp_path,
            flow(
                cmd("echo", "{task}", **{"as": "first"}),
                {"parallel": [cmd("echo", "{previous}"), cmd("true")], "as": "pair"},
                {"forEach": "{outputs.pair}", "item": cmd("echo", "{item}"), "label": "each"},
                name="review",
                task="Review the diff",
                snapshotPath="snaps/s.json",
            ),
        )
    )
    normalized = to_json(normalized_plan(plan, backends))
    assert normalized["kind"] == "workflow"
    assert [c["index"] for c in normalized["children"]] == [0, 1, 2, 3]
    assert [c["argv"] for c in normalized["children"]] == [
        ["echo", "{task}"],
        ["echo", "{previous}"],
        ["true"],
        ["echo", "{item}"],
    ]
    assert [c.get("as") for c in normalized["children"]] == ["first", None, None, None]
    assert normalized["workflow"] == {
        "name": "review",
        "taskDigest": digest("Review the diff"),
        "steps": [
            {"index": 0, "kind": "prompt", "items": [0], "as": "first"},
            {"index": 1, "kind": "parallel", "items": [1, 2], "as": "pair"},
            {
                "index": 2,
                "kind": "forEach",
                "items": [3],
                "forEach": "{outputs.pair}",
                "label": "each",
            },
        ],
        "snapshotPath": os.path.join(os.path.realpath(tmp_path), "snaps", "s.json"),
    }
    assert normalized["workflow"]["taskDigest"].startswith("sha256:v1:")
    assert "Review the diff" not in repr(normalized)


def test_workflows_differing_only_in_task_have_different_fingerprints(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    def fingerprint_of(task: str, name: str = "w") -> str:
        plan = accepted_plan(
            check(backends, tmp_path, flow(cmd("echo", "{task}"), task=task, name=name))
        )
        return plan_fingerprint(normalized_plan(plan, backends, None))

    first = fingerprint_of("fix the bug")
    assert first.startswith("sha256:v1:")
    assert fingerprint_of("fix the bug") == first
    assert fingerprint_of("fix another bug") != first
    assert fingerprint_of("fix the bug", name="other") != first


def test_workflows_differing_only_in_step_shape_have_different_fingerprints(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    def fingerprint_of(*chain: dict[str, Any]) -> str:
        plan = accepted_plan(check(backends, tmp_path, flow(*chain)))
        return plan_fingerprint(normalized_plan(plan, backends, None))

    as_steps = fingerprint_of(cmd("true"), cmd("true"))
    as_group = fingerprint_of({"parallel": [cmd("true"), cmd("true")]})
    assert as_steps != as_group
    assert fingerprint_of(cmd("true", **{"as": "x"}), cmd("true")) != as_steps
