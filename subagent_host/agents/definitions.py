"""Agent definitions: one markdown file, YAML-style frontmatter, then the instructions.

```
---
name: reviewer
description: Reviews a diff for bugs
tools: read, grep, find
model: anthropic/claude-sonnet-4-5
effort: high
subagent_mode: task
session_resources: lean
isolation: worktree
max_tokens: 200000
max_cost_usd: 0.50
interactive: true
approvals: policy
backend: pi
---
You review code. Be terse.
```

Only a small YAML subset is read, by hand, so a definition never needs PyYAML
and never executes tags: `key: value` lines (plain, 'single' or "double" quoted
values), whole-line `#` comments, blank lines, and for `tools` either an inline
list (`read, grep` or `[read, grep]`) or a block list of `- item` lines. Plain
values are taken verbatim: `#` after a value is text, not a comment.

`parse_definition` never raises on bad input: every problem becomes a
`DefinitionDiagnostic`, and any error means no definition. Discovery
(`agents/discovery.py`) decides what an error blocks.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Callable
from typing import Final

import attrs

from subagent_host.agents.delegation import WHY, without_delegation
from subagent_host.values import (
    DIGEST_PREFIX,
    EFFORTS,
    ISOLATIONS,
    MAX_SAFE_INTEGER,
    MODES,
    SESSION_RESOURCES,
)
from subagent_host.values.choices import AgentSource, Approvals, is_backend_name
from subagent_host.values.facts import Severity

USER: Final = AgentSource.USER
PROJECT: Final = AgentSource.PROJECT
SOURCES: Final = tuple(source.value for source in AgentSource)

ERROR: Final = "error"
WARNING: Final = "warning"
INFO: Final = "info"

FIELDS: Final = (
    "name",
    "description",
    "tools",
    "model",
    "effort",
    "subagent_mode",
    "session_resources",
    "isolation",
    "max_tokens",
    "max_cost_usd",
    "interactive",
    "approvals",
    "backend",
)

_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_TOOL: Final = re.compile(r"[A-Za-z0-9_.:-]+")
_MODEL: Final = re.compile(r"[^\s/\0]+/[^\s\0]+")  # provider/id; the id may contain '/'
_KEY_LINE: Final = re.compile(r"([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*:(?:[ \t]+(.*))?")
_ITEM_LINE: Final = re.compile(r"[ \t]*-(?:[ \t]+(.*))?")
_FENCE: Final = "---"
# The instructions reach the agent CLI as one argument of its command line, and the
# kernel takes at most 128 KiB in one argument (with its NUL); the rest is room for
# the option they are written into (`--append-system-prompt=`, TOML quoting).
MAX_INSTRUCTIONS_BYTES: Final = 128 * 1024 - 1024
# A file may repeat one problem thousands of times (a key on every line): that many
# diagnostics help nobody and weigh on every `agents/list`. The first few of each code
# are reported, then one more of that code saying how many were left out.
MAX_DIAGNOSTICS_PER_CODE: Final = 10


@attrs.frozen
class AgentDefinition:
    """A usable agent: what spawn needs to run it, and where it came from."""

    name: str  # as written
    description: str
    instructions: str
    source: AgentSource
    path: str  # realpath of the file
    digest: str  # DIGEST_PREFIX + sha256 of the file's exact bytes
    model: str | None = None
    effort: str | None = None
    tools: tuple[str, ...] | None = None
    """None: not listed; delegation tools already removed (agents/delegation.py)."""
    removed_tools: tuple[str, ...] = ()
    """The delegation tools its `tools` listed, which it does not get."""
    mode: str | None = None
    session_resources: str | None = None
    """`lean` or `full`; None when the definition does not say."""
    isolation: str | None = None
    """`worktree`: its children run in a git worktree of their own; None when it does not say."""
    max_tokens: int | None = None
    """Its children's `maxTokens` unless the spawn gives one; None when it does not say."""
    max_cost_usd: float | None = None
    """Its children's `maxCostUsd` unless the spawn gives one; None when it does not say."""
    interactive: bool | None = None
    """Its children live on after their first turn (protocol.md §23) unless the spawn says
    otherwise; None when it does not say."""
    approvals: str | None = None
    """`cli`, `client` or `policy`: who answers its children's permissions unless the spawn
    says; None when it does not say."""
    backend: str | None = None
    """The backend its children run on unless the spawn names one: a built-in agent backend
    or a configured ACP agent (a name no configuration has is refused at launch); None when
    it does not say."""

    @property
    def key(self) -> str:
        """The name agents are looked up by: names are case-insensitive."""
        return self.name.lower()


@attrs.frozen
class DefinitionDiagnostic:
    """One problem (or note) about one definition file."""

    severity: Severity
    code: str
    message: str  # a sentence naming the file and, when relevant, the field
    path: str
    name: str | None = None  # the agent name concerned, when known


@attrs.define
class _Field:
    """One frontmatter key: its raw inline value and any block-list items after it."""

    key: str
    line: int
    raw: str | None  # text after the colon; None when there was none
    items: list[tuple[int, str]] | None = None  # (line, raw item text)


class _BadValue(ValueError):
    """A quoted value that does not parse; the message says why."""


@attrs.define
class _Report:
    """Problems found so far; turned into diagnostics once the name is known."""

    path: str
    problems: list[tuple[Severity, str, str]] = attrs.Factory(list)

    def add(self, severity: Severity, code: str, message: str) -> None:
        self.problems.append((severity, code, f"{self.path}: {message}"))

    @property
    def has_errors(self) -> bool:
        return any(severity == ERROR for severity, _, _ in self.problems)

    def diagnostics(self, name: str | None) -> list[DefinitionDiagnostic]:
        """The problems as diagnostics, at most MAX_DIAGNOSTICS_PER_CODE of each code and
        then one that counts the rest of that code (where the last one shown was)."""
        shown: list[tuple[Severity, str, str]] = []
        left_out: dict[str, Severity] = {}  # code -> its severity
        counts: dict[str, int] = {}
        for severity, code, message in self.problems:
            counts[code] = counts.get(code, 0) + 1
            if counts[code] <= MAX_DIAGNOSTICS_PER_CODE:
                shown.append((severity, code, message))
            elif counts[code] == MAX_DIAGNOSTICS_PER_CODE + 1:
                left_out[code] = severity
        for code, severity in left_out.items():
            more = counts[code] - MAX_DIAGNOSTICS_PER_CODE
            last = max(i for i, (_, c, _) in enumerate(shown) if c == code)
            summary = (
                severity,
                code,
                f"{self.path}: {more} more {code!r} problems like these "
                f"(not listed; {counts[code]} in all)",
            )
            shown.insert(last + 1, summary)
        return [
            DefinitionDiagnostic(severity, code, message, self.path, name)
            for severity, code, message in shown
        ]


def parse_definition(
    data: bytes, *, path: str, source: str
) -> tuple[AgentDefinition | None, list[DefinitionDiagnostic]]:
    """Read one definition file's bytes; discovery calls this for each `*.md` it finds.

    `path` is recorded as given (discovery passes the realpath). Returns the
    definition, or None when any error diagnostic was produced, plus every
    diagnostic. When the frontmatter name is valid, every diagnostic carries it.
    Raises ValueError only for a `source` that is not USER or PROJECT.
    """
    if source not in SOURCES:
        raise ValueError(f"source must be one of {SOURCES}, not {source!r}")
    report = _Report(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        report.add(ERROR, "unreadable", f"not UTF-8 text (bad byte at offset {exc.start})")
        return None, report.diagnostics(None)
    text = text.removeprefix("\ufeff")  # editors on some systems write a BOM
    split = _split(text)
    if split is None:
        report.add(
            ERROR,
            "no-frontmatter",
            "no frontmatter: the file must start with a '---' line and close it with another",
        )
        return None, report.diagnostics(None)
    frontmatter, instructions = split
    fields = _read_fields(frontmatter, report)
    _check_instructions(instructions, report)

    name = _name(fields, report)
    description = _description(fields, report)
    tools, removed_tools = _tools(fields.get("tools"), report)
    chosen = {choice.field: _choice(fields, choice, report) for choice in _CHOICES}
    interactive = _choice(fields, _INTERACTIVE, report)
    max_tokens, max_cost_usd = (_budget(fields, budget, report) for budget in _BUDGETS)
    for key, field in fields.items():
        if key not in FIELDS:
            report.add(
                WARNING, "unknown-field", f"unknown field {key!r} (line {field.line}) ignored"
            )

    diagnostics = report.diagnostics(name)
    if report.has_errors or name is None:
        return None, diagnostics
    definition = AgentDefinition(
        name=name,
        description=description,
        instructions=instructions,
        source=AgentSource(source),
        path=path,
        digest=DIGEST_PREFIX + hashlib.sha256(data).hexdigest(),
        tools=tools,
        max_tokens=None if max_tokens is None else int(max_tokens),  # read as a whole number
        max_cost_usd=max_cost_usd,
        removed_tools=removed_tools,
        interactive=None if interactive is None else interactive == "true",
        **chosen,
    )
    return definition, diagnostics


def _split(text: str) -> tuple[list[tuple[int, str]], str] | None:
    """The numbered frontmatter lines and the trimmed body, or None without frontmatter."""
    lines = text.split("\n")
    if lines[0].rstrip() != _FENCE:
        return None
    for end in range(1, len(lines)):
        if lines[end].rstrip() == _FENCE:
            frontmatter = [(number + 1, lines[number].rstrip("\r")) for number in range(1, end)]
            body = lines[end + 1 :]
            while body and not body[0].strip():
                body.pop(0)
            while body and not body[-1].strip():
                body.pop()
            return frontmatter, "\n".join(body).removesuffix("\r")
    return None


def _check_instructions(instructions: str, report: _Report) -> None:
    """Instructions no agent CLI could be started with are an error now, not at every
    spawn: a NUL ends a command-line argument, and one argument has a size limit."""
    if "\0" in instructions:
        report.add(
            ERROR,
            "invalid-instructions",
            "the instructions contain U+0000 (NUL), which no command line can hold",
        )
    size = len(instructions.encode("utf-8", "surrogatepass"))
    if size > MAX_INSTRUCTIONS_BYTES:
        report.add(
            ERROR,
            "instructions-too-large",
            f"the instructions are {size} bytes, more than the {MAX_INSTRUCTIONS_BYTES} an "
            "agent CLI can be given (one command-line argument holds at most 128 KiB)",
        )


def _read_fields(lines: list[tuple[int, str]], report: _Report) -> dict[str, _Field]:
    """Group the frontmatter into fields, reporting lines that fit no form."""
    fields: dict[str, _Field] = {}
    current: _Field | None = None  # the field that list items belong to
    reported_mixed: set[int] = set()  # fields already reported for value-plus-items
    for number, line in lines:
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if key_match := _KEY_LINE.fullmatch(line.rstrip()):
            key, raw = key_match.group(1), key_match.group(2)
            current = _Field(key, number, raw)
            if key in fields:
                report.add(
                    ERROR,
                    "duplicate-field",
                    f"field {key!r} appears twice (lines {fields[key].line} and {number})",
                )
            else:
                fields[key] = current
        elif item_match := _ITEM_LINE.fullmatch(line.rstrip()):
            if current is None:
                report.add(
                    ERROR, "invalid-frontmatter", f"line {number}: a list item belongs to no field"
                )
            elif current.raw is not None:
                if current.line not in reported_mixed:
                    reported_mixed.add(current.line)
                    if current.key == "tools":
                        report.add(
                            ERROR,
                            "ambiguous-tools",
                            f"field 'tools' has both an inline value (line {current.line}) "
                            f"and list items (line {number}): use one form",
                        )
                    else:
                        report.add(
                            ERROR,
                            "invalid-frontmatter",
                            f"line {number}: field {current.key!r} already has a value "
                            f"(line {current.line}) and cannot also take list items",
                        )
            else:
                if current.items is None:
                    current.items = []
                current.items.append((number, item_match.group(1) or ""))
        else:
            report.add(
                ERROR,
                "invalid-frontmatter",
                f"line {number}: expected 'key: value', a '- item' or a '#' comment, "
                f"got {line.strip()!r}",
            )
    return fields


def _scalar_text(field: _Field | None, report: _Report) -> tuple[bool, str | None]:
    """A single-valued field's text: (True, None) when absent or empty; (False, None) on error."""
    if field is None:
        return True, None
    if field.items is not None:
        line = field.items[0][0]
        report.add(
            ERROR,
            "invalid-frontmatter",
            f"line {line}: field {field.key!r} takes a single value, not a list",
        )
        return False, None
    if field.raw is None:
        return True, None
    try:
        return True, _unquote(field.raw)
    except _BadValue as exc:
        report.add(ERROR, "invalid-frontmatter", f"line {field.line}: field {field.key!r}: {exc}")
        return False, None


def _name(fields: dict[str, _Field], report: _Report) -> str | None:
    """The agent's name when present and valid; errors otherwise."""
    ok, name = _scalar_text(fields.get("name"), report)
    if not ok:
        return None
    if not name:
        report.add(ERROR, "missing-name", "no 'name' field: every agent needs one")
        return None
    if not _NAME.fullmatch(name):
        report.add(
            ERROR,
            "invalid-name",
            f"field 'name' is {name!r}: use 1 to 64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit",
        )
        return None
    return name


def _description(fields: dict[str, _Field], report: _Report) -> str:
    ok, description = _scalar_text(fields.get("description"), report)
    if ok and not description:
        # Only a warning: the caller's model picks agents by description, but the
        # agent itself still runs.
        report.add(WARNING, "missing-description", "no 'description' field")
    return description or ""


@attrs.frozen
class _Choice:
    """A single-valued field that must be one of a set or of a form: its frontmatter
    key, the definition's field it fills, and the problem's code and wording."""

    key: str
    field: str
    code: str
    accepts: Callable[[str], object]
    expected: str


APPROVALS: Final = tuple(approvals.value for approvals in Approvals)
FLAGS: Final = ("true", "false")


def _one_of(values: tuple[str, ...]) -> str:
    return "one of " + ", ".join(values)


def _agent_backend(value: str) -> bool:
    """A backend's name that can run an agent: `command` takes no prompt."""
    return is_backend_name(value) and value != "command"


# In the order their problems are reported.
_CHOICES: Final = (
    _Choice("model", "model", "invalid-model", _MODEL.fullmatch, "provider/id"),
    _Choice("effort", "effort", "invalid-effort", EFFORTS.__contains__, _one_of(EFFORTS)),
    _Choice("subagent_mode", "mode", "invalid-mode", MODES.__contains__, _one_of(MODES)),
    _Choice(
        "session_resources",
        "session_resources",
        "invalid-session-resources",
        SESSION_RESOURCES.__contains__,
        _one_of(SESSION_RESOURCES),
    ),
    _Choice(
        "isolation", "isolation", "invalid-isolation", ISOLATIONS.__contains__, _one_of(ISOLATIONS)
    ),
    _Choice(
        "approvals", "approvals", "invalid-approvals", APPROVALS.__contains__, _one_of(APPROVALS)
    ),
    _Choice(
        "backend",
        "backend",
        "invalid-backend",
        _agent_backend,
        "pi, claude, codex or a configured ACP agent's name (1 to 32 of a-z, 0-9 and '-', "
        "starting with a letter), not command, which runs no agent",
    ),
)
# `interactive` is a flag: read as one of two words, then made a bool.
_INTERACTIVE: Final = _Choice(
    "interactive", "interactive", "invalid-interactive", FLAGS.__contains__, "true or false"
)


def _choice(fields: dict[str, _Field], choice: _Choice, report: _Report) -> str | None:
    """An optional single-valued field checked by `accepts`; absent or empty means unset."""
    field = fields.get(choice.key)
    ok, value = _scalar_text(field, report)
    if not ok or field is None or field.raw is None:
        return None
    assert value is not None  # raw was present and parsed
    if not choice.accepts(value):
        report.add(
            ERROR, choice.code, f"field {choice.key!r} is {value!r}: expected {choice.expected}"
        )
        return None
    return value


@attrs.frozen
class _BudgetField:
    """A budget's frontmatter key (also the definition's field), how its text is read
    (ValueError when it is not a number), and the range it must fall in, as words."""

    key: str
    parse: Callable[[str], float]
    accepts: Callable[[float], bool]
    expected: str


def _whole(text: str) -> int:
    if not re.fullmatch(r"[0-9]+", text):
        raise ValueError(text)
    return int(text)


_BUDGETS: Final = (
    _BudgetField(
        "max_tokens",
        _whole,
        lambda value: 1 <= value <= MAX_SAFE_INTEGER,
        f"a whole number of tokens, 1..{MAX_SAFE_INTEGER}",
    ),
    _BudgetField(
        "max_cost_usd",
        float,
        lambda value: math.isfinite(value) and value > 0,
        "a number of US dollars above 0",
    ),
)


def _budget(fields: dict[str, _Field], budget: _BudgetField, report: _Report) -> float | None:
    """An optional budget; absent or empty means unset."""
    field = fields.get(budget.key)
    ok, text = _scalar_text(field, report)
    if not ok or field is None or field.raw is None or text is None:
        return None
    try:
        value = budget.parse(text.strip())
    except ValueError:
        value = None
    if value is None or not budget.accepts(value):
        report.add(
            ERROR,
            f"invalid-{budget.key.replace('_', '-')}",
            f"field {budget.key!r} is {text!r}: expected {budget.expected}",
        )
        return None
    return value


def _tools(field: _Field | None, report: _Report) -> tuple[tuple[str, ...] | None, tuple[str, ...]]:
    """The listed tools, minus delegation tools (None when no tools are listed), and the
    delegation tools it listed."""
    if field is None or (field.raw is None and field.items is None):
        return None, ()
    if field.raw is not None and field.items is not None:
        return None, ()  # already reported as ambiguous-tools
    try:
        if field.items is not None:
            names = [_unquote(raw.strip()) for _, raw in field.items]
        else:
            assert field.raw is not None
            names = _inline_list(field.raw)
    except _BadValue as exc:
        report.add(ERROR, "invalid-frontmatter", f"field 'tools' (line {field.line}): {exc}")
        return None, ()
    names = [name for name in names if name]
    invalid = [name for name in names if not _TOOL.fullmatch(name)]
    if invalid:
        report.add(
            ERROR,
            "invalid-tools",
            f"field 'tools' lists invalid tool names {invalid!r}: "
            "use letters, digits, '_', '.', ':' or '-'",
        )
        return None, ()
    kept, removed = without_delegation(dict.fromkeys(names))
    if removed:
        report.add(INFO, "tools-removed", f"field 'tools': removed {', '.join(removed)}: {WHY}")
    return kept, removed


def _inline_list(raw: str) -> list[str]:
    """`read, grep`, `[read, grep]` or `"read, grep"` as a list of (unquoted) items."""
    if raw.startswith("["):
        if not raw.endswith("]"):
            raise _BadValue("a '[' list must end with ']'")
        raw = raw[1:-1]
    elif raw[:1] in ("'", '"'):
        try:
            raw = _unquote(raw)  # the whole list quoted as one string
        except _BadValue:
            pass  # quoted items instead: 'read', 'grep'
    return [_unquote(item.strip()) for item in raw.split(",")]


def _unquote(raw: str) -> str:
    """A scalar's value: quotes removed, `\\"` and `\\\\` unescaped in double quotes."""
    if not raw or raw[0] not in ("'", '"'):
        return raw
    quote = raw[0]
    out: list[str] = []
    index = 1
    while index < len(raw):
        char = raw[index]
        nxt = raw[index + 1 : index + 2]
        if quote == '"' and char == "\\" and nxt in ('"', "\\"):
            out.append(nxt)
            index += 2
        elif quote == "'" and char == "'" and nxt == "'":
            out.append("'")  # YAML's only escape in single quotes
            index += 2
        elif char == quote:
            if raw[index + 1 :].strip():
                raise _BadValue(f"unexpected text after the closing {quote}")
            return "".join(out)
        else:
            out.append(char)
            index += 1
    raise _BadValue(f"unterminated {quote} quote")
