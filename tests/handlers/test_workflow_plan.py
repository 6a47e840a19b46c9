"""Workflow launch checks: steps and their items planned, every placeholder checked
where it stands, output names, step counts, the snapshot path, and the normalized plan."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from subagent_host.backends.base import Backend
from subagent_host.handlers.spawn_plan import CheckedSpawn, check_spawn
from subagent_host.rpc.wire import SpawnParams, make_converter
from subagent_host.runs.plans import (
    STEP_FOR_EACH,
    STEP_PARALLEL,
    STEP_PROMPT,
    RunPlan,
    StepPlan,
    digest,
    normalized_plan,
    plan_fingerprint,
)
from subagent_host.runs.state import RunKind
from tests.handlers.conftest import LIMITS
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
        StepPlan(STEP_PROMPT, (0,), "plan"),
        StepPlan(STEP_PARALLEL, (1, 2), "both", label="fan"),
        StepPlan(STEP_FOR_EACH, (3,), "each", over="{outputs.plan}", label="loop"),
        StepPlan(STEP_PROMPT, (4,)),
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


def test_a_one_step_workflow_of_a_command_is_accepted(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    plan = accepted_plan(check(backends, tmp_path, flow(cmd("echo", "{task}"))))
    assert plan.workflow is not None
    assert plan.workflow.steps == (StepPlan(STEP_PROMPT, (0,)),)
    assert [c.command for c in plan.children] == [("echo", "{task}")]


def test_a_workflow_is_one_shape_among_the_others(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    checked = check(backends, tmp_path, flow(cmd("true")), prompt="also")
    assert errors(checked) == [("invalid-shape", None)]
    assert checked.plan is None


# --- placeholders ---------------------------------------------------------------------------


def test_previous_in_the_first_step_is_an_error(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    checked = check(backends, tmp_path, flow(ask("go on from {previous}"), ask("{previous}")))
    assert errors(checked) == [("invalid-template", "workflow.chain[0].prompt")]
    assert messages(checked) == ["{previous} has no earlier step to take its output from"]
    assert checked.plan is None


def test_previous_in_a_first_for_each_template_is_an_error(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    checked = check(
        backends, tmp_path, flow({"forEach": "{previous}", "item": cmd("echo", "{item}")})
    )
    assert errors(checked) == [("invalid-template", "workflow.chain[0].forEach")]


def test_an_unknown_placeholder_is_an_error_at_its_field(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    checked = check(backends, tmp_path, flow(ask("{task}"), ask("use {foo} and {outputs}")))
    assert errors(checked) == [
        ("invalid-template", "workflow.chain[1].prompt"),
        ("invalid-template", "workflow.chain[1].prompt"),
    ]
    assert messages(checked) == [
        "unknown placeholder {foo} (use {task}, {previous}, {outputs.NAME}, {item} or {index})",
        "unknown placeholder {outputs} (use {task}, {previous}, {outputs.NAME}, {item} or {index})",
    ]


def test_json_in_a_prompt_is_not_a_placeholder(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    accepted_plan(check(backends, tmp_path, flow(ask('answer as {"files": []} or { x } or {}'))))


def test_an_output_is_known_only_after_the_step_that_names_it(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    checked = check(
        backends,
        tmp_path,
        flow(
            ask("{outputs.x}"),  # before: an error
            ask("make x", **{"as": "x"}),
            ask("{outputs.x}"),  # after: fine
        ),
    )
    assert errors(checked) == [("invalid-template", "workflow.chain[0].prompt")]
    assert messages(checked) == [
        "{outputs.x}: no earlier step names its output 'x' (known: none yet)"
    ]


def test_an_unknown_output_message_lists_the_known_names(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    checked = check(
        backends,
        tmp_path,
        flow(ask("a", **{"as": "zeta"}), ask("b", **{"as": "alpha"}), ask("{outputs.gamma}")),
    )
    assert errors(checked) == [("invalid-template", "workflow.chain[2].prompt")]
    assert messages(checked) == [
        "{outputs.gamma}: no earlier step names its output 'gamma' (known: alpha, zeta)"
    ]


def test_a_parallel_item_cannot_use_a_siblings_output(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    checked = check(
        backends,
        tmp_path,
        flow(
            {"parallel": [ask("a", **{"as": "a"}), ask("{outputs.a}")], "as": "group"},
            ask("{outputs.a} {outputs.group}"),
        ),
    )
    assert errors(checked) == [("invalid-template", "workflow.chain[0].parallel[1].prompt")]


def test_a_for_each_cannot_fan_out_over_its_own_output(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    checked = check(
        backends,
        tmp_path,
        flow(ask("list"), {"forEach": "{outputs.each}", "item": ask("{item}"), "as": "each"}),
    )
    assert errors(checked) == [("invalid-template", "workflow.chain[1].forEach")]


@pytest.mark.parametrize("name", ["item", "index"])
def test_item_and_index_outside_a_for_each_item_are_errors(
    backends: dict[str, Backend], tmp_path: Path, name: str
) -> None:
    checked = check(
        backends,
        tmp_path,
        flow(
            ask(f"{{{name}}}"),
            {"parallel": [cmd("true"), cmd("echo", f"{{{name}}}")]},
            {"forEach": f"[{{{name}}}]", "item": cmd("echo", f"{{{name}}}")},
        ),
    )
    assert errors(checked) == [
        ("invalid-template", "workflow.chain[0].prompt"),
        ("invalid-template", "workflow.chain[1].parallel[1].command[1]"),
        ("invalid-template", "workflow.chain[2].forEach"),
    ]
    assert messages(checked) == [f"{{{name}}} is only known inside a forEach item"] * 3


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


def test_templates_in_command_arguments_and_labels_are_checked(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    checked = check(
        backends,
        tmp_path,
        flow(
            cmd("echo", "{task}", "--from={previous}", label="{nope}"),
            {"forEach": "{previous}", "item": cmd("echo", "{item}", "{outputs.none}")},
        ),
    )
    assert errors(checked) == [
        ("invalid-template", "workflow.chain[0].label"),
        ("invalid-template", "workflow.chain[0].command[2]"),
        ("invalid-template", "workflow.chain[1].item.command[2]"),
    ]


def test_a_command_items_prompt_is_checked_too(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    checked = check(backends, tmp_path, flow(cmd("true"), cmd("cat", prompt="{tsak}")))
    assert errors(checked) == [("invalid-template", "workflow.chain[1].prompt")]


# --- output names ---------------------------------------------------------------------------


def test_a_duplicate_output_name_is_an_error(backends: dict[str, Backend], tmp_path: Path) -> None:
    checked = check(
        backends, tmp_path, flow(ask("a", **{"as": "x"}), ask("b"), ask("c", **{"as": "x"}))
    )
    assert errors(checked) == [("duplicate-output", "workflow.chain[2].as")]
    assert messages(checked) == ["another step or item already names its output 'x'"]


def test_duplicate_output_names_within_a_parallel_step_are_errors(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    checked = check(
        backends,
        tmp_path,
        flow({"parallel": [cmd("true", **{"as": "x"}), cmd("true", **{"as": "x"})], "as": "x"}),
    )
    assert errors(checked) == [
        ("duplicate-output", "workflow.chain[0].parallel[1].as"),
        ("duplicate-output", "workflow.chain[0].as"),
    ]


def test_a_step_output_may_not_reuse_an_earlier_items_name(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    checked = check(
        backends,
        tmp_path,
        flow(
            {"parallel": [cmd("true", **{"as": "a"}), cmd("true")]},
            {"forEach": "[1]", "item": cmd("true"), "as": "a"},
        ),
    )
    assert errors(checked) == [("duplicate-output", "workflow.chain[1].as")]


@pytest.mark.parametrize("name", ["", "a b", "a.b", "x" * 65, "é", "{x}"])
def test_an_invalid_output_name_is_an_error(
    backends: dict[str, Backend], tmp_path: Path, name: str
) -> None:
    checked = check(
        backends,
        tmp_path,
        flow(
            ask("a", **{"as": name}),
            {"parallel": [cmd("true"), cmd("true", **{"as": name})]},
            {"forEach": "[1]", "item": cmd("true"), "as": name},
        ),
    )
    assert errors(checked) == [
        ("invalid-output-name", "workflow.chain[0].as"),
        ("invalid-output-name", "workflow.chain[1].parallel[1].as"),
        ("invalid-output-name", "workflow.chain[2].as"),
    ]
    assert messages(checked)[0] == "use 1-64 characters of A-Z a-z 0-9 _ -"


@pytest.mark.parametrize("name", ["x", "A-b_9", "-", "x" * 64])
def test_a_valid_output_name_is_accepted(
    backends: dict[str, Backend], tmp_path: Path, name: str
) -> None:
    plan = accepted_plan(
        check(backends, tmp_path, flow(ask("a", **{"as": name}), ask(f"{{outputs.{name}}}")))
    )
    assert plan.workflow is not None
    assert plan.workflow.steps[0].output_name == name


def test_a_for_each_item_may_not_name_its_output(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    checked = check(
        backends,
        tmp_path,
        flow(
            ask("list"),
            {"forEach": "{previous}", "item": ask("{item}", **{"as": "one"})},
            ask("{outputs.one}"),
        ),
    )
    assert errors(checked) == [
        ("invalid-output-name", "workflow.chain[1].item.as"),
        # The item's name is not defined for later steps either.
        ("invalid-template", "workflow.chain[2].prompt"),
    ]
    assert messages(checked)[0] == (
        "a forEach item runs many times: name the fan-out's output with the step's own `as`"
    )


# --- counts and the name ----------------------------------------------------------------------


@pytest.mark.parametrize("count", [0, 9])
def test_a_parallel_step_takes_1_to_8_items(
    backends: dict[str, Backend], tmp_path: Path, count: int
) -> None:
    checked = check(backends, tmp_path, flow(cmd("true"), {"parallel": [cmd("true")] * count}))
    assert errors(checked) == [("item-count", "workflow.chain[1].parallel")]
    assert messages(checked) == [f"parallel takes 1 to 8 items, not {count}"]
    assert checked.plan is None


def test_a_parallel_step_of_8_items_is_accepted(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    plan = accepted_plan(check(backends, tmp_path, flow({"parallel": [cmd("true")] * 8})))
    assert plan.workflow is not None
    assert plan.workflow.steps == (StepPlan(STEP_PARALLEL, tuple(range(8))),)
    assert len(plan.children) == 8


@pytest.mark.parametrize("count", [0, 33])
def test_a_workflow_takes_1_to_32_steps(
    backends: dict[str, Backend], tmp_path: Path, count: int
) -> None:
    checked = check(backends, tmp_path, flow(*[cmd("true")] * count))
    assert errors(checked) == [("item-count", "workflow.chain")]
    assert messages(checked) == [f"workflow.chain takes 1 to 32 steps, not {count}"]
    assert checked.plan is None


def test_a_workflow_of_32_steps_is_accepted(backends: dict[str, Backend], tmp_path: Path) -> None:
    plan = accepted_plan(check(backends, tmp_path, flow(*[cmd("true")] * 32)))
    assert plan.workflow is not None
    assert len(plan.workflow.steps) == 32
    assert [s.items for s in plan.workflow.steps] == [(i,) for i in range(32)]


@pytest.mark.parametrize("name", ["", "   ", "x" * 129])
def test_a_workflow_needs_a_name_of_1_to_128_characters(
    backends: dict[str, Backend], tmp_path: Path, name: str
) -> None:
    checked = check(backends, tmp_path, flow(cmd("true"), name=name))
    assert errors(checked) == [("invalid-workflow", "workflow.name")]
    assert messages(checked) == ["name must be 1..128 characters"]
    assert checked.plan is None


def test_a_name_of_128_characters_is_accepted(backends: dict[str, Backend], tmp_path: Path) -> None:
    plan = accepted_plan(check(backends, tmp_path, flow(cmd("true"), name="n" * 128)))
    assert plan.workflow is not None
    assert plan.workflow.name == "n" * 128


def test_every_problem_is_found_at_once(backends: dict[str, Backend], tmp_path: Path) -> None:
    checked = check(
        backends,
        tmp_path,
        flow(
            ask("{previous}", **{"as": "bad name"}),
            {"parallel": []},
            {"forEach": "{item}", "item": cmd("true", **{"as": "y"})},
            name="",
            snapshotPath="missing/snap.json",
        ),
    )
    assert errors(checked) == [
        ("invalid-workflow", "workflow.name"),
        ("invalid-template", "workflow.chain[0].prompt"),
        ("invalid-output-name", "workflow.chain[0].as"),
        ("item-count", "workflow.chain[1].parallel"),
        ("invalid-template", "workflow.chain[2].forEach"),
        ("invalid-output-name", "workflow.chain[2].item.as"),
        ("invalid-snapshot-path", "workflow.snapshotPath"),
    ]


def test_item_problems_carry_the_items_workflow_path(
    backends: dict[str, Backend], tmp_path: Path
) -> None:
    checked = check(
        backends,
        tmp_path,
        flow(
            cmd("true"),
            {"parallel": [cmd("true"), {"prompt": "x", "backend": "nope"}]},
            {"forEach": "[1]", "item": {"command": ["true"], "timeoutMs": 0}},
        ),
    )
    assert errors(checked) == [
        ("backend-unavailable", "workflow.chain[1].parallel[1].backend"),
        ("invalid-duration", "workflow.chain[2].item.timeoutMs"),
    ]


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


@pytest.mark.parametrize("value", ["/proc/self/snap.json", "/sys/snap.json"])
def test_a_snapshot_path_under_proc_or_sys_is_an_error(
    backends: dict[str, Backend], tmp_path: Path, value: str
) -> None:
    checked = check(backends, tmp_path, flow(cmd("true"), snapshotPath=value))
    assert errors(checked) == [("invalid-snapshot-path", "workflow.snapshotPath")]
    assert messages(checked)[0].endswith((" is under /proc", " is under /sys"))


@pytest.mark.parametrize("value", ["", "snap\0.json"])
def test_an_empty_snapshot_path_or_one_with_nul_is_an_error(
    backends: dict[str, Backend], tmp_path: Path, value: str
) -> None:
    checked = check(backends, tmp_path, flow(cmd("true"), snapshotPath=value))
    assert errors(checked) == [("invalid-snapshot-path", "workflow.snapshotPath")]
    assert messages(checked) == ["must be a non-empty path"]


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
    normalized = normalized_plan(plan, backends)
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
        return plan_fingerprint(plan, backends, None)

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
        return plan_fingerprint(plan, backends, None)

    as_steps = fingerprint_of(cmd("true"), cmd("true"))
    as_group = fingerprint_of({"parallel": [cmd("true"), cmd("true")]})
    assert as_steps != as_group
    assert fingerprint_of(cmd("true", **{"as": "x"}), cmd("true")) != as_steps
