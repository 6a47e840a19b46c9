"""Parsing one agent definition file: every field form and every diagnostic."""

from __future__ import annotations

import hashlib

import pytest

from subagent_host.agents.definitions import (
    MAX_DIAGNOSTICS_PER_CODE,
    MAX_INSTRUCTIONS_BYTES,
    PROJECT,
    USER,
    AgentDefinition,
    DefinitionDiagnostic,
    parse_definition,
)
from subagent_host.values import DIGEST_PREFIX, EFFORTS
from subagent_host.values.choices import AgentSource

PATH = "/defs/reviewer.md"


def parse(
    text: str | bytes, source: str = USER
) -> tuple[AgentDefinition | None, list[DefinitionDiagnostic]]:
    data = text.encode() if isinstance(text, str) else text
    return parse_definition(data, path=PATH, source=source)


def valid(frontmatter: str, body: str = "Do the work.") -> AgentDefinition:
    """Parse a definition expected to be usable, with no diagnostics at all."""
    definition, diagnostics = parse(f"---\n{frontmatter}\n---\n{body}\n")
    assert diagnostics == []
    assert definition is not None
    return definition


def codes(diagnostics: list[DefinitionDiagnostic]) -> list[tuple[str, str]]:
    return [(d.severity, d.code) for d in diagnostics]


def errors(frontmatter: str) -> list[DefinitionDiagnostic]:
    """Parse a definition expected to be rejected; return its error diagnostics."""
    definition, diagnostics = parse(f"---\n{frontmatter}\n---\nbody\n")
    assert definition is None
    found = [d for d in diagnostics if d.severity == "error"]
    assert found
    return found


EXAMPLE = """\
---
name: reviewer
description: Reviews a diff for bugs
tools: read, grep, find
model: anthropic/claude-sonnet-4-5
effort: high
subagent_mode: task
---
You review code. Be terse.
"""


def test_the_documented_example_parses_into_every_field() -> None:
    definition, diagnostics = parse(EXAMPLE)

    assert diagnostics == []
    assert definition == AgentDefinition(
        name="reviewer",
        description="Reviews a diff for bugs",
        instructions="You review code. Be terse.",
        source=AgentSource.USER,
        path=PATH,
        digest=DIGEST_PREFIX + hashlib.sha256(EXAMPLE.encode()).hexdigest(),
        model="anthropic/claude-sonnet-4-5",
        effort="high",
        tools=("read", "grep", "find"),
        mode="task",
    )


def test_digest_is_sha256_of_the_exact_bytes_with_the_v1_prefix() -> None:
    data = b"---\nname: a\ndescription: d\n---\nbody  \n\n\n"
    definition, _ = parse_definition(data, path=PATH, source=PROJECT)

    assert definition is not None
    assert definition.digest == "sha256:v1:" + hashlib.sha256(data).hexdigest()
    assert definition.source == "project"


def test_digest_changes_when_only_trailing_blank_lines_change() -> None:
    first, _ = parse("---\nname: a\ndescription: d\n---\nbody\n")
    second, _ = parse("---\nname: a\ndescription: d\n---\nbody\n\n")

    assert first is not None and second is not None
    assert first.instructions == second.instructions == "body"
    assert first.digest != second.digest


def test_optional_fields_default_to_none() -> None:
    definition = valid("name: plain\ndescription: d")

    assert (definition.model, definition.effort, definition.tools, definition.mode) == (
        None,
        None,
        None,
        None,
    )


@pytest.mark.parametrize("backend", ["pi", "claude", "codex", "qwen", "claude-agent-acp"])
def test_a_backend_is_any_agent_backends_name_built_in_or_configured(backend: str) -> None:
    assert valid(f"name: a\ndescription: d\nbackend: {backend}").backend == backend


def test_an_unset_or_empty_backend_is_none() -> None:
    assert valid("name: a\ndescription: d").backend is None
    assert valid("name: a\ndescription: d\nbackend:").backend is None


@pytest.mark.parametrize("backend", ["command", "Qwen", "9lives", "qwen code", "a" * 33, "'-x'"])
def test_a_backend_that_cannot_run_an_agent_is_invalid(backend: str) -> None:
    [error] = errors(f"name: a\ndescription: d\nbackend: {backend}")
    assert error.code == "invalid-backend"
    assert error.message.startswith(f"{PATH}: field 'backend' is ")
    assert "not command, which runs no agent" in error.message


def test_key_is_the_lowercase_name_and_name_keeps_its_case() -> None:
    definition = valid("name: Code-Reviewer.v2\ndescription: d")

    assert definition.name == "Code-Reviewer.v2"
    assert definition.key == "code-reviewer.v2"


def test_instructions_drop_surrounding_blank_lines_and_keep_the_rest_verbatim() -> None:
    body = "\n  \n# Role\n\n    indented  \n\n- item\n\n \n"
    definition = valid("name: a\ndescription: d", body=body)

    assert definition.instructions == "# Role\n\n    indented  \n\n- item"


def test_instructions_may_be_empty() -> None:
    definition, diagnostics = parse("---\nname: a\ndescription: d\n---\n")

    assert diagnostics == []
    assert definition is not None
    assert definition.instructions == ""


def test_crlf_line_endings_are_read() -> None:
    text = (
        "---\r\nname: a\r\ndescription: d\r\ntools: read, grep\r\n---\r\nline one\r\nline two\r\n"
    )
    definition, diagnostics = parse(text)

    assert diagnostics == []
    assert definition is not None
    assert (definition.name, definition.description, definition.tools) == (
        "a",
        "d",
        ("read", "grep"),
    )
    assert definition.instructions == "line one\r\nline two"


def test_a_leading_byte_order_mark_is_ignored() -> None:
    definition, diagnostics = parse("\ufeff---\nname: a\ndescription: d\n---\nx\n".encode())

    assert diagnostics == []
    assert definition is not None and definition.name == "a"


def test_a_second_fence_in_the_body_is_instructions() -> None:
    definition = valid("name: a\ndescription: d", body="before\n---\nafter")

    assert definition.instructions == "before\n---\nafter"


def test_comments_and_blank_lines_in_frontmatter_are_ignored() -> None:
    definition = valid(
        "# leading comment\n\nname: a\n  # indented comment\ndescription: d\n\ntools:\n"
        "  # between items\n  - read\n\n  - grep"
    )

    assert definition.tools == ("read", "grep")


def test_plain_values_are_verbatim_including_hash_and_colons() -> None:
    definition = valid("name: a\ndescription: Fixes issue #12: the one with a: colon")

    assert definition.description == "Fixes issue #12: the one with a: colon"


def test_surrounding_spaces_of_a_value_are_dropped() -> None:
    definition = valid("name:    a   \ndescription:\td  ")

    assert (definition.name, definition.description) == ("a", "d")


def test_double_quoted_values_unescape_quote_and_backslash_only() -> None:
    definition = valid(r'name: "a"' + "\n" + r'description: "say \"hi\" C:\\dir \n raw"')

    assert definition.name == "a"
    assert definition.description == r'say "hi" C:\dir \n raw'


def test_single_quoted_values_keep_backslashes_and_double_the_quote() -> None:
    definition = valid("name: 'a'\ndescription: 'it''s \\ fine # really'")

    assert definition.description == "it's \\ fine # really"


@pytest.mark.parametrize(
    ("value", "tools"),
    [
        ("read, grep,find", ("read", "grep", "find")),
        ("read", ("read",)),
        ("[read, grep]", ("read", "grep")),
        ("[ 'read' , \"grep\" ]", ("read", "grep")),
        ("'read', \"grep\"", ("read", "grep")),
        ('"read, grep"', ("read", "grep")),
        ("read, grep,", ("read", "grep")),
        ("[]", ()),
        ('""', ()),
        ("mcp:server.tool, my-tool, a_b", ("mcp:server.tool", "my-tool", "a_b")),
        ("read, grep, read", ("read", "grep")),
    ],
)
def test_inline_tool_lists(value: str, tools: tuple[str, ...]) -> None:
    definition = valid(f"name: a\ndescription: d\ntools: {value}")

    assert definition.tools == tools


def test_block_tool_list_with_quoted_items() -> None:
    definition = valid("name: a\ntools:\n  - read\n  - 'grep'\n  - \"find\"\ndescription: d")

    assert definition.tools == ("read", "grep", "find")


def test_block_tool_list_items_may_start_at_column_zero() -> None:
    definition = valid("name: a\ndescription: d\ntools:\n- read\n-   grep")

    assert definition.tools == ("read", "grep")


def test_empty_tools_field_means_no_tools_listed() -> None:
    definition = valid("name: a\ndescription: d\ntools:")

    assert definition.tools is None


def test_empty_model_effort_and_mode_mean_unset() -> None:
    definition = valid("name: a\ndescription: d\nmodel:\neffort:\nsubagent_mode:")

    assert (definition.model, definition.effort, definition.mode) == (None, None, None)


@pytest.mark.parametrize("effort", EFFORTS)
def test_every_effort_level_is_accepted(effort: str) -> None:
    assert valid(f"name: a\ndescription: d\neffort: {effort}").effort == effort


@pytest.mark.parametrize("mode", ["task", "background"])
def test_both_modes_are_accepted(mode: str) -> None:
    assert valid(f"name: a\ndescription: d\nsubagent_mode: {mode}").mode == mode


@pytest.mark.parametrize(
    "model", ["anthropic/claude-sonnet-4-5", "openrouter/anthropic/claude-3.5", "a/b", "p/id:tag"]
)
def test_valid_models(model: str) -> None:
    assert valid(f"name: a\ndescription: d\nmodel: {model}").model == model


@pytest.mark.parametrize(
    "name", ["a", "A", "0", "a.b_c-d", "x" * 64, "Reviewer2", "9lives", "a--b..c__"]
)
def test_valid_names(name: str) -> None:
    assert valid(f"name: {name}\ndescription: d").name == name


# --- diagnostics ---------------------------------------------------------------


def test_non_utf8_bytes_are_unreadable() -> None:
    definition, diagnostics = parse(b"---\nname: a\ndescription: caf\xe9\n---\nbody\n")

    assert definition is None
    assert diagnostics == [
        DefinitionDiagnostic(
            "error",
            "unreadable",
            "/defs/reviewer.md: not UTF-8 text (bad byte at offset 28)",
            PATH,
            None,
        )
    ]


@pytest.mark.parametrize(
    "text",
    [
        "name: a\ndescription: d\n",
        "\n---\nname: a\n---\nbody\n",
        "---\nname: a\ndescription: d\nbody without a closing fence\n",
        "---",
        "",
        "----\nname: a\n----\n",
        "# Title\n---\nname: a\n---\n",
    ],
)
def test_files_without_frontmatter_are_rejected(text: str) -> None:
    definition, diagnostics = parse(text)

    assert definition is None
    assert codes(diagnostics) == [("error", "no-frontmatter")]
    assert diagnostics[0].message.startswith("/defs/reviewer.md: no frontmatter")
    assert diagnostics[0].name is None


def test_an_empty_frontmatter_lacks_a_name() -> None:
    definition, diagnostics = parse("---\n---\nbody\n")

    assert definition is None
    assert codes(diagnostics) == [("error", "missing-name"), ("warning", "missing-description")]


def test_a_line_that_is_not_key_value_is_invalid_with_its_line_number() -> None:
    found = errors("name: a\ndescription: d\njust some words")

    assert [(d.code, d.message, d.name) for d in found] == [
        (
            "invalid-frontmatter",
            "/defs/reviewer.md: line 4: expected 'key: value', a '- item' or a '#' comment, "
            "got 'just some words'",
            "a",
        )
    ]


@pytest.mark.parametrize(
    ("frontmatter", "line"),
    [
        ("name: a\ndescription: d\n  nested: value", 4),
        ("name: a\nmodel:anthropic/x\ndescription: d", 3),
        ("name: a\ndescription: d\n--", 4),
        ("name: a\ndescription: d\n-item", 4),
        ("name: a\ndescription: d\n: value", 4),
    ],
)
def test_malformed_lines_are_reported_by_line(frontmatter: str, line: int) -> None:
    found = errors(frontmatter)

    assert [d.code for d in found] == ["invalid-frontmatter"]
    assert f"line {line}:" in found[0].message


def test_a_list_item_before_any_field_is_invalid() -> None:
    found = errors("- read\nname: a\ndescription: d")

    assert [(d.code, d.message) for d in found] == [
        ("invalid-frontmatter", "/defs/reviewer.md: line 2: a list item belongs to no field")
    ]


def test_a_list_for_a_single_valued_field_is_invalid() -> None:
    found = errors("name: a\ndescription:\n  - one\n  - two")

    assert [(d.code, d.message) for d in found] == [
        (
            "invalid-frontmatter",
            "/defs/reviewer.md: line 4: field 'description' takes a single value, not a list",
        )
    ]


def test_list_items_after_a_scalar_value_of_another_field_are_invalid() -> None:
    found = errors("name: a\ndescription: d\nmodel: a/b\n  - c/d")

    assert [d.code for d in found] == ["invalid-frontmatter"]
    assert "line 5:" in found[0].message and "'model'" in found[0].message


@pytest.mark.parametrize(
    "value", ['"unterminated', "'unterminated", '"a" trailing', '"ends with escape\\"']
)
def test_bad_quoting_is_invalid_frontmatter(value: str) -> None:
    found = errors(f"name: a\ndescription: {value}")

    assert [d.code for d in found] == ["invalid-frontmatter"]
    assert found[0].message.startswith("/defs/reviewer.md: line 3: field 'description': ")


def test_a_missing_name_is_an_error() -> None:
    definition, diagnostics = parse("---\ndescription: d\n---\nbody\n")

    assert definition is None
    assert diagnostics == [
        DefinitionDiagnostic(
            "error",
            "missing-name",
            "/defs/reviewer.md: no 'name' field: every agent needs one",
            PATH,
            None,
        )
    ]


@pytest.mark.parametrize("value", ["", '""', "''"])
def test_an_empty_name_is_missing(value: str) -> None:
    assert [d.code for d in errors(f"name: {value}\ndescription: d")] == ["missing-name"]


@pytest.mark.parametrize(
    "name", ["-lead", ".hidden", "_x", "two words", "x" * 65, "a/b", "caf\u00e9", "a:b"]
)
def test_invalid_names_are_errors_without_a_name_on_the_diagnostic(name: str) -> None:
    found = errors(f"name: '{name}'\ndescription: d")

    assert [(d.code, d.name) for d in found] == [("invalid-name", None)]
    assert f"field 'name' is {name!r}" in found[0].message


def test_a_missing_description_is_only_a_warning() -> None:
    definition, diagnostics = parse("---\nname: a\n---\nbody\n")

    assert definition is not None
    assert definition.description == ""
    assert diagnostics == [
        DefinitionDiagnostic(
            "warning",
            "missing-description",
            "/defs/reviewer.md: no 'description' field",
            PATH,
            "a",
        )
    ]


def test_an_empty_description_is_also_missing() -> None:
    definition, diagnostics = parse("---\nname: a\ndescription:\n---\nbody\n")

    assert definition is not None and definition.description == ""
    assert codes(diagnostics) == [("warning", "missing-description")]


def test_inline_tools_followed_by_list_items_are_ambiguous() -> None:
    definition, diagnostics = parse(
        "---\nname: a\ndescription: d\ntools: read\n  - grep\n  - find\n---\nbody\n"
    )

    assert definition is None
    assert diagnostics == [
        DefinitionDiagnostic(
            "error",
            "ambiguous-tools",
            "/defs/reviewer.md: field 'tools' has both an inline value (line 4) "
            "and list items (line 5): use one form",
            PATH,
            "a",
        )
    ]


@pytest.mark.parametrize(
    ("value", "bad"),
    [
        ("read, two words", ["two words"]),
        ("[read, grep/x]", ["grep/x"]),
        ("read, 'caf\u00e9', a*b", ["caf\u00e9", "a*b"]),
    ],
)
def test_invalid_tool_names_are_errors(value: str, bad: list[str]) -> None:
    found = errors(f"name: a\ndescription: d\ntools: {value}")

    assert [d.code for d in found] == ["invalid-tools"]
    assert f"invalid tool names {bad!r}" in found[0].message


def test_invalid_tool_names_in_a_block_list_are_errors() -> None:
    found = errors("name: a\ndescription: d\ntools:\n  - read\n  - bad tool")

    assert [d.code for d in found] == ["invalid-tools"]


def test_an_unclosed_bracket_list_is_invalid() -> None:
    found = errors("name: a\ndescription: d\ntools: [read, grep")

    assert [d.code for d in found] == ["invalid-frontmatter"]
    assert "'tools' (line 4)" in found[0].message


@pytest.mark.parametrize("model", ["claude", "/claude", "anthropic/", "a/b c", '""', "a /b"])
def test_models_must_be_provider_slash_id(model: str) -> None:
    found = errors(f"name: a\ndescription: d\nmodel: {model}")

    assert [(d.code, d.name) for d in found] == [("invalid-model", "a")]
    assert "field 'model'" in found[0].message and "provider/id" in found[0].message


@pytest.mark.parametrize("effort", ["huge", "High", "", "none", "high # comment"])
def test_unknown_effort_levels_are_errors(effort: str) -> None:
    found = errors(f"name: a\ndescription: d\neffort: '{effort}'")

    assert [d.code for d in found] == ["invalid-effort"]
    assert found[0].message == (
        f"/defs/reviewer.md: field 'effort' is {effort!r}: "
        "expected one of off, minimal, low, medium, high, xhigh, max"
    )


@pytest.mark.parametrize("mode", ["parallel", "Task", "chain"])
def test_unknown_modes_are_errors(mode: str) -> None:
    found = errors(f"name: a\ndescription: d\nsubagent_mode: {mode}")

    assert [(d.code, d.message) for d in found] == [
        (
            "invalid-mode",
            f"/defs/reviewer.md: field 'subagent_mode' is {mode!r}: "
            "expected one of task, background",
        )
    ]


def test_unknown_fields_are_warnings_and_ignored() -> None:
    definition, diagnostics = parse(
        "---\nname: a\ndescription: d\ncolor: blue\nmode: task\nextra:\n  - x\n---\nbody\n"
    )

    assert definition is not None
    assert definition.mode is None  # `mode` is not `subagent_mode`
    assert diagnostics == [
        DefinitionDiagnostic(
            "warning",
            "unknown-field",
            f"{PATH}: unknown field {key!r} (line {line}) ignored",
            PATH,
            "a",
        )
        for key, line in [("color", 4), ("mode", 5), ("extra", 6)]
    ]


def test_a_field_given_twice_is_an_error() -> None:
    found = errors("name: a\ndescription: d\neffort: low\neffort: high")

    assert [(d.code, d.message) for d in found] == [
        ("duplicate-field", "/defs/reviewer.md: field 'effort' appears twice (lines 4 and 5)")
    ]


def test_items_under_a_repeated_tools_field_do_not_merge_into_the_first() -> None:
    found = errors("name: a\ndescription: d\ntools:\n  - read\ntools:\n  - grep")

    assert [d.code for d in found] == ["duplicate-field"]


def test_subagent_tools_are_removed_with_a_note() -> None:
    definition, diagnostics = parse(
        "---\nname: a\ndescription: d\ntools: read, subagent_spawn, grep, Subagent_Status\n"
        "---\nbody\n"
    )

    assert definition is not None
    assert definition.tools == ("read", "grep")
    assert diagnostics == [
        DefinitionDiagnostic(
            "info",
            "tools-removed",
            "/defs/reviewer.md: field 'tools': removed subagent_spawn, Subagent_Status: "
            "a child must not delegate further through these tools",
            PATH,
            "a",
        )
    ]


def test_only_subagent_tools_leaves_an_empty_tool_list_not_the_default() -> None:
    definition, diagnostics = parse(
        "---\nname: a\ndescription: d\ntools:\n  - subagent_spawn\n---\nbody\n"
    )

    assert definition is not None
    assert definition.tools == ()
    assert codes(diagnostics) == [("info", "tools-removed")]


def test_a_tool_merely_containing_subagent_is_kept() -> None:
    assert valid("name: a\ndescription: d\ntools: my_subagent_tool").tools == ("my_subagent_tool",)


def test_every_error_is_reported_not_just_the_first() -> None:
    definition, diagnostics = parse(
        "---\nname: a\nmodel: nope\neffort: huge\nsubagent_mode: later\ntools: a b\n---\nx\n"
    )

    assert definition is None
    assert codes(diagnostics) == [
        ("warning", "missing-description"),
        ("error", "invalid-tools"),
        ("error", "invalid-model"),
        ("error", "invalid-effort"),
        ("error", "invalid-mode"),
    ]
    assert {d.name for d in diagnostics} == {"a"}


def test_an_unknown_source_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="source must be one of"):
        parse_definition(EXAMPLE.encode(), path=PATH, source="global")


def test_isolation_worktree_is_read_and_absent_means_unset() -> None:
    assert valid("name: a\ndescription: d\nisolation: worktree").isolation == "worktree"
    assert valid("name: a\ndescription: d").isolation is None


def test_an_unknown_isolation_is_an_error() -> None:
    found = errors("name: a\ndescription: d\nisolation: container")

    assert [(d.code, d.message) for d in found] == [
        (
            "invalid-isolation",
            "/defs/reviewer.md: field 'isolation' is 'container': expected one of worktree",
        )
    ]


@pytest.mark.parametrize(("text", "value"), [("true", True), ("false", False), ("", None)])
def test_interactive_is_a_flag_and_absent_means_unset(text: str, value: bool | None) -> None:
    field = f"\ninteractive: {text}" if text else ""
    assert valid(f"name: a\ndescription: d{field}").interactive is value


@pytest.mark.parametrize("text", ["cli", "client", "policy"])
def test_approvals_is_read_as_written(text: str) -> None:
    assert valid(f"name: a\ndescription: d\napprovals: {text}").approvals == text
    assert valid("name: a\ndescription: d").approvals is None


def test_an_interactive_other_than_true_or_false_and_an_unknown_approvals_are_errors() -> None:
    found = errors("name: a\ndescription: d\ninteractive: yes\napprovals: always")

    assert [(d.code, d.message) for d in found] == [
        (
            "invalid-approvals",
            "/defs/reviewer.md: field 'approvals' is 'always': expected one of cli, client, policy",
        ),
        (
            "invalid-interactive",
            "/defs/reviewer.md: field 'interactive' is 'yes': expected true or false",
        ),
    ]


def test_instructions_holding_a_nul_are_an_error() -> None:
    definition, diagnostics = parse("---\nname: a\ndescription: d\n---\nDo\0 the work.\n")

    assert definition is None
    assert [(d.code, d.message) for d in diagnostics] == [
        (
            "invalid-instructions",
            f"{PATH}: the instructions contain U+0000 (NUL), which no command line can hold",
        )
    ]
    assert diagnostics[0].name == "a"


def test_instructions_too_large_for_a_command_line_are_an_error() -> None:
    fits = "x" * MAX_INSTRUCTIONS_BYTES
    too_large = "é" * (MAX_INSTRUCTIONS_BYTES // 2 + 1)  # two bytes each in UTF-8

    assert valid("name: a\ndescription: d", fits).instructions == fits
    definition, diagnostics = parse(f"---\nname: a\ndescription: d\n---\n{too_large}\n")
    assert definition is None
    assert [(d.severity, d.code) for d in diagnostics] == [("error", "instructions-too-large")]
    assert f"{MAX_INSTRUCTIONS_BYTES + 2} bytes" in diagnostics[0].message
    assert MAX_INSTRUCTIONS_BYTES < 128 * 1024  # what one exec argument can hold


def test_a_model_holding_a_nul_is_invalid() -> None:
    assert [d.code for d in errors("name: a\ndescription: d\nmodel: mock/a\0b")] == [
        "invalid-model"
    ]


def test_a_problem_repeated_many_times_is_reported_a_few_times_and_counted() -> None:
    repeated = "\n".join(["name: a", "description: d", *["effort: low"] * 50_000])
    unknown = "\n".join(f"key{n}: v" for n in range(30))

    definition, diagnostics = parse(f"---\n{repeated}\n{unknown}\n---\nbody\n")

    assert definition is None
    assert codes(diagnostics) == [
        *[("error", "duplicate-field")] * (MAX_DIAGNOSTICS_PER_CODE + 1),
        *[("warning", "unknown-field")] * (MAX_DIAGNOSTICS_PER_CODE + 1),
    ]
    assert diagnostics[0].message.endswith("field 'effort' appears twice (lines 4 and 5)")
    more = diagnostics[MAX_DIAGNOSTICS_PER_CODE].message
    assert more == (
        f"{PATH}: {49_999 - MAX_DIAGNOSTICS_PER_CODE} more 'duplicate-field' problems like "
        "these (not listed; 49999 in all)"
    )
    assert f"{30 - MAX_DIAGNOSTICS_PER_CODE} more 'unknown-field'" in diagnostics[-1].message
    assert {d.name for d in diagnostics} == {"a"}


def test_budgets_are_read_as_numbers() -> None:
    frugal = valid("name: frugal\ndescription: d\nmax_tokens: 20000\nmax_cost_usd: 0.25")
    assert (frugal.max_tokens, frugal.max_cost_usd) == (20000, 0.25)
    quoted = valid(
        "name: quoted\ndescription: d\nmax_tokens: '9007199254740991'\nmax_cost_usd: \"3\""
    )
    assert (quoted.max_tokens, quoted.max_cost_usd) == (2**53 - 1, 3.0)
    unset = valid("name: unset\ndescription: d\nmax_tokens:\nmax_cost_usd:")
    assert (unset.max_tokens, unset.max_cost_usd) == (None, None)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("max_tokens", "0"),
        ("max_tokens", "-5"),
        ("max_tokens", "1.5"),
        ("max_tokens", "9007199254740992"),
        ("max_tokens", "many"),
        ("max_cost_usd", "0"),
        ("max_cost_usd", "-1"),
        ("max_cost_usd", "nan"),
        ("max_cost_usd", "inf"),
        ("max_cost_usd", "cheap"),
    ],
)
def test_a_budget_that_is_no_positive_number_blocks_the_definition(field: str, value: str) -> None:
    [problem] = errors(f"name: bad\n{field}: {value}")
    assert problem.code == f"invalid-{field.replace('_', '-')}"
    assert repr(value) in problem.message and field in problem.message
