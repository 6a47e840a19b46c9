"""Workflow templates: which braces are placeholders, one-pass filling, capping,
forEach elements as text, JSON arrays out of agent output, and `check`."""

from __future__ import annotations

from typing import Any

import pytest

from subagent_host.planning.templates import (
    OUTPUT_NAME,
    TRUNCATED_MARKER,
    NotAnArray,
    cap,
    check,
    item_text,
    json_array,
    placeholders,
    render,
)

# --- placeholders ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("template", "names"),
    [
        ("{task}", ["task"]),
        ("do {task} after {previous}", ["task", "previous"]),
        ("{outputs.plan} and {outputs.my-plan_2}", ["outputs.plan", "outputs.my-plan_2"]),
        ("{item} #{index}", ["item", "index"]),
        ("{_private} {a1}", ["_private", "a1"]),
        ("{task}{task}", ["task", "task"]),
        ("{{task}}", ["task"]),  # the inner braces form a placeholder
        ("{foo.bar.baz}", ["foo.bar.baz"]),
    ],
)
def test_placeholders_are_names_in_braces_in_order(template: str, names: list[str]) -> None:
    assert placeholders(template) == names


@pytest.mark.parametrize(
    "template",
    [
        '{"a": 1}',
        "{ x }",
        "{}",
        "{ task}",
        "{task }",
        "{1x}",
        "{my-var}",  # a hyphen only after a dot (output names)
        "{outputs.}",
        "{a b}",
        "plain text",
        "{task",
        "task}",
    ],
)
def test_json_spaces_and_empty_braces_are_literal_text(template: str) -> None:
    assert placeholders(template) == []
    assert render(template, {"task": "T", "x": "X", "a": "A", "my-var": "V"}) == template


def test_json_around_a_placeholder_is_left_alone() -> None:
    template = '{"task": "{task}", "n": {"k": 1}}'
    assert placeholders(template) == ["task"]
    assert render(template, {"task": "go"}) == '{"task": "go", "n": {"k": 1}}'


# --- render -----------------------------------------------------------------------------


def test_render_fills_every_occurrence() -> None:
    values = {"task": "T", "previous": "P", "outputs.plan": "PLAN"}
    assert render("{task}/{previous}/{outputs.plan}/{task}", values) == "T/P/PLAN/T"


def test_render_is_a_single_pass() -> None:
    values = {"task": "{previous}", "previous": "{task}", "item": "{outputs.x}"}
    assert render("{task} | {previous} | {item}", values) == "{previous} | {task} | {outputs.x}"


def test_a_value_containing_its_own_placeholder_is_not_expanded_again() -> None:
    assert render("say {task}", {"task": "{task}{task}"}) == "say {task}{task}"


def test_render_leaves_a_name_without_a_value_as_written() -> None:
    assert render("{task} {foo} {outputs.none}", {"task": "t"}) == "t {foo} {outputs.none}"


def test_render_with_an_empty_value_is_empty() -> None:
    assert render("[{previous}]", {"previous": ""}) == "[]"


# --- cap ----------------------------------------------------------------------------------


def test_the_marker_is_what_the_runner_appends() -> None:
    assert TRUNCATED_MARKER == "[previous output truncated]"


@pytest.mark.parametrize("text", ["", "abc", "é", "日本"])
def test_cap_keeps_text_within_the_limit_unchanged(text: str) -> None:
    assert cap(text, len(text.encode("utf-8"))) == text
    assert cap(text, 1000) == text


def test_cap_cuts_at_the_byte_limit_and_appends_the_marker() -> None:
    assert cap("abcdef", 3) == "abc\n[previous output truncated]"
    assert cap("abcdef", 0) == "\n[previous output truncated]"


def test_cap_counts_utf8_bytes_not_characters() -> None:
    # "éé" is 4 bytes: a limit of 3 characters would keep it whole.
    assert cap("éé", 3) == "é\n" + TRUNCATED_MARKER


@pytest.mark.parametrize(
    ("text", "limit", "kept"),
    [
        ("aé", 2, "a"),  # é is 2 bytes: half of it is dropped
        ("aéb", 3, "aé"),
        ("a日本", 2, "a"),  # 日 is 3 bytes
        ("a日本", 3, "a"),
        ("a日本", 4, "a日"),
        ("a日本", 6, "a日"),
        ("😀x", 3, ""),  # 4 bytes
        ("😀x", 4, "😀"),
    ],
)
def test_cap_keeps_only_whole_utf8_characters(text: str, limit: int, kept: str) -> None:
    if len(text.encode("utf-8")) <= limit:
        assert cap(text, limit) == text
    else:
        assert cap(text, limit) == kept + "\n" + TRUNCATED_MARKER


def test_a_capped_text_is_valid_utf8_within_limit_plus_marker() -> None:
    text = "ü" * 1000
    capped = cap(text, 101)
    body = capped.removesuffix("\n" + TRUNCATED_MARKER)
    assert body == "ü" * 50
    assert len(body.encode("utf-8")) == 100


# --- item_text ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("item", "text"),
    [
        ("plain", "plain"),
        ('"quoted"', '"quoted"'),
        ("", ""),
        ("é", "é"),
        (3, "3"),
        (1.5, "1.5"),
        (True, "true"),
        (None, "null"),
        ({"a": 1, "b": "é"}, '{"a": 1, "b": "é"}'),
        ([1, "x"], '[1, "x"]'),
    ],
)
def test_item_text_is_a_string_as_it_is_and_anything_else_as_json(item: Any, text: str) -> None:
    assert item_text(item) == text


# --- json_array ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "array"),
    [
        ("[1, 2, 3]", [1, 2, 3]),
        ('  ["a", {"b": 2}]\n', ["a", {"b": 2}]),
        ("[]", []),
        ('```json\n["x", "y"]\n```', ["x", "y"]),
        ("```\n[1]\n```", [1]),
        ('\n```json\n  ["x"]  \n```\n\n', ["x"]),
    ],
)
def test_json_array_takes_the_whole_text_or_one_fence(text: str, array: list[Any]) -> None:
    assert json_array(text) == array


def test_json_array_mends_a_childs_lone_surrogates_so_items_can_be_stored_and_exec_d() -> None:
    elements = json_array('["a\\ud800", {"k\\udfff": ["\\ud83d\\ude00"]}]')
    assert elements == ["a\ufffd", {"k\ufffd": ["\U0001f600"]}]
    item_text(elements[1]).encode("utf-8")  # storable, and fit for an argv


def test_json_array_refuses_an_object() -> None:
    with pytest.raises(NotAnArray) as raised:
        json_array('{"a": [1]}')
    assert str(raised.value) == "it yielded JSON an object, not an array"


def test_json_array_refuses_an_object_in_a_fence() -> None:
    with pytest.raises(NotAnArray, match="an object"):
        json_array('```json\n{"a": 1}\n```')


@pytest.mark.parametrize(
    ("text", "kind"),
    [('"s"', "a string"), ("3", "a number"), ("true", "true"), ("null", "null")],
)
def test_json_array_names_the_json_it_got_instead(text: str, kind: str) -> None:
    with pytest.raises(NotAnArray) as raised:
        json_array(text)
    assert str(raised.value) == f"it yielded JSON {kind}, not an array"


def test_json_array_quotes_the_beginning_of_what_is_not_json() -> None:
    with pytest.raises(NotAnArray) as raised:
        json_array("  Here are the files: a, b\n")
    assert str(raised.value) == "it did not yield JSON (it began 'Here are the files: a, b')"


def test_json_array_quotes_only_80_characters() -> None:
    text = "x" * 200
    with pytest.raises(NotAnArray) as raised:
        json_array(text)
    assert str(raised.value) == f"it did not yield JSON (it began {'x' * 80 + '...'!r})"


@pytest.mark.parametrize(
    "text",
    [
        "Sure! ```json\n[1]\n```",  # text around the fence
        "```json [1]```",  # a fence on one line
        "```json\n[1]\n```\nmore",
        "[1, 2",
    ],
)
def test_json_array_accepts_nothing_looser_than_one_fence(text: str) -> None:
    with pytest.raises(NotAnArray, match="did not yield JSON"):
        json_array(text)


def test_not_an_array_is_a_value_error() -> None:
    assert issubclass(NotAnArray, ValueError)


# --- output names -------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["plan", "a", "A_b-9", "-", "0", "x" * 64])
def test_output_names_are_1_to_64_safe_characters(name: str) -> None:
    assert OUTPUT_NAME.fullmatch(name) is not None


@pytest.mark.parametrize("name", ["", "x" * 65, "a.b", "a b", "é", "a/b", "{a}"])
def test_other_output_names_are_refused(name: str) -> None:
    assert OUTPUT_NAME.fullmatch(name) is None


# --- check --------------------------------------------------------------------------------


def test_task_and_literal_braces_are_always_fine() -> None:
    assert check('{task} {"a": 1} { x } {}', previous=False, outputs=(), loop=False) == []


def test_previous_in_the_first_step_is_an_error() -> None:
    assert check("{previous}", previous=False, outputs=(), loop=False) == [
        "{previous} has no earlier step to take its output from"
    ]
    assert check("{previous}", previous=True, outputs=(), loop=False) == []


@pytest.mark.parametrize("name", ["foo", "outputs", "tasks", "task.x", "item.name", "prev"])
def test_an_unknown_placeholder_is_an_error(name: str) -> None:
    assert check(f"a {{{name}}} b", previous=True, outputs={"x"}, loop=True) == [
        f"unknown placeholder {{{name}}} (use {{task}}, {{previous}}, "
        "{outputs.NAME}, {item} or {index})"
    ]


def test_an_output_no_earlier_step_defines_is_an_error() -> None:
    assert check("{outputs.x}", previous=True, outputs=(), loop=False) == [
        "{outputs.x}: no earlier step names its output 'x' (known: none yet)"
    ]
    assert check("{outputs.x}", previous=True, outputs={"b", "a"}, loop=False) == [
        "{outputs.x}: no earlier step names its output 'x' (known: a, b)"
    ]


def test_an_output_an_earlier_step_defines_is_fine() -> None:
    assert check("{outputs.x} {outputs.y-2}", previous=True, outputs={"x", "y-2"}, loop=False) == []


@pytest.mark.parametrize("name", ["item", "index"])
def test_item_and_index_are_known_only_in_a_loop(name: str) -> None:
    assert check(f"{{{name}}}", previous=True, outputs=(), loop=False) == [
        f"{{{name}}} is only known inside a forEach item"
    ]
    assert check(f"{{{name}}}", previous=False, outputs=(), loop=True) == []


def test_check_reports_every_problem_in_order() -> None:
    problems = check(
        "{previous} {task} {foo} {item} {outputs.z}", previous=False, outputs=(), loop=False
    )
    assert problems == [
        "{previous} has no earlier step to take its output from",
        "unknown placeholder {foo} (use {task}, {previous}, {outputs.NAME}, {item} or {index})",
        "{item} is only known inside a forEach item",
        "{outputs.z}: no earlier step names its output 'z' (known: none yet)",
    ]


def test_a_placeholder_used_twice_is_reported_twice() -> None:
    assert (
        check("{foo}{foo}", previous=True, outputs=(), loop=False)
        == ["unknown placeholder {foo} (use {task}, {previous}, {outputs.NAME}, {item} or {index})"]
        * 2
    )
