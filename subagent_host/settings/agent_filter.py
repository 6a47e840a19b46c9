"""Which agent definitions may be delegated to: the `agents` setting's `enabled` and
`disabled` lists of names and globs, merged from the files, and the one question asked
of them (is this agent disabled, and by what?).

The user's files (global, then `--config`) set each list as any field: a later file's
list replaces an earlier one's. A trusted project's lists only narrow: its `enabled`
list is one more list an agent must match, its `disabled` list one more it must not.
An agent matching both an enabled and a disabled pattern is disabled.
"""

from __future__ import annotations

import fnmatch

import attrs

from subagent_host.values.choices import DisabledBy


@attrs.frozen
class AgentLists:
    """One file's `agents`: each list as written (None: that file does not set it)."""

    enabled: tuple[str, ...] | None = None
    disabled: tuple[str, ...] | None = None


@attrs.frozen
class PatternList:
    """One file's `agents.enabled` or `agents.disabled` list, as the merge kept it."""

    member: DisabledBy
    """`agents.enabled` or `agents.disabled`."""
    patterns: tuple[str, ...]
    """Agent names or fnmatch globs (`*`, `?`, `[...]`), matched case-insensitively."""
    file: str
    """The file that set it."""

    def first_match(self, name: str) -> str | None:
        key = name.lower()
        return next((p for p in self.patterns if fnmatch.fnmatchcase(key, p.lower())), None)


@attrs.frozen
class AgentDisabled:
    """Why an agent may not be delegated to."""

    by: DisabledBy
    """`agents.disabled` (a pattern of that list matches it) or `agents.enabled` (that
    list does not name it)."""
    file: str
    """The file whose list decided."""
    pattern: str | None = None
    """The disabled pattern that matches; None for `agents.enabled`."""

    def describe(self) -> str:
        if self.pattern is not None:
            return f"{self.by} pattern {self.pattern!r} of {self.file}"
        return f"{self.by} of {self.file}, which does not name it"


@attrs.frozen
class AgentFilter:
    """The lists every agent is held to; empty: every agent is enabled."""

    enabled: tuple[PatternList, ...] = ()
    """An agent must match a pattern of each of these."""
    disabled: tuple[PatternList, ...] = ()
    """An agent matching a pattern of any of these is disabled (whatever `enabled` says)."""

    def disabled_by(self, name: str) -> AgentDisabled | None:
        """Why `name` (any case) may not be delegated to; None when it may."""
        for patterns in self.disabled:
            if (pattern := patterns.first_match(name)) is not None:
                return AgentDisabled(DisabledBy.DISABLED, patterns.file, pattern)
        for patterns in self.enabled:
            if patterns.first_match(name) is None:
                return AgentDisabled(DisabledBy.ENABLED, patterns.file)
        return None


def merge_agent_lists(
    user: list[tuple[AgentLists, str]], project: list[tuple[AgentLists, str]]
) -> AgentFilter:
    """The filter of the user's files (a later file's list replaces an earlier one's) and
    the project's (each list one more restriction), each given as (lists, file)."""
    kept: dict[DisabledBy, PatternList] = {}
    for lists, file in user:
        for member, patterns in (
            (DisabledBy.ENABLED, lists.enabled),
            (DisabledBy.DISABLED, lists.disabled),
        ):
            if patterns is not None:
                kept[member] = PatternList(member, patterns, file)
    enabled = [kept[DisabledBy.ENABLED]] if DisabledBy.ENABLED in kept else []
    disabled = [kept[DisabledBy.DISABLED]] if DisabledBy.DISABLED in kept else []
    for lists, file in project:
        if lists.enabled is not None:
            enabled.append(PatternList(DisabledBy.ENABLED, lists.enabled, file))
        if lists.disabled is not None:
            disabled.append(PatternList(DisabledBy.DISABLED, lists.disabled, file))
    return AgentFilter(enabled=tuple(enabled), disabled=tuple(disabled))
