"""How runs read for a person: short ids, durations, token counts, plurals.

Every terminal subcommand words these the same way, so they live here once.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Final

from subagent_host.runs.state import ChildRun, Run
from subagent_host.values.facts import Usage

# The server counts things in its messages too: the word lives in values, shared.
from subagent_host.values.words import plural as plural

SHORT_ID: Final = 8
"""Characters of a run id shown: the shortest prefix `show`, `logs` and `stop` accept."""


def short_id(run_id: str) -> str:
    return run_id[:SHORT_ID]


def elapsed(start: datetime | None, end: datetime | None, now: datetime | None = None) -> str:
    """From start to end (or to now while it goes on): `0.4s`, `12s`, `3m04s`, `2h05m`;
    `-` when it never started."""
    if start is None:
        return "-"
    seconds = max(0.0, ((end or now or datetime.now(UTC)) - start).total_seconds())
    return duration(seconds)


def duration(seconds: float) -> str:
    if seconds < 10:
        return f"{seconds:.1f}s"
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def count(value: int) -> str:
    """`950`, `12.3k`, `4.1M`: a token count in a column."""
    if value < 1000:
        return str(value)
    if value < 1_000_000:
        return f"{value / 1000:.1f}k"
    return f"{value / 1_000_000:.1f}M"


def total_usage(children: Iterable[ChildRun]) -> Usage | None:
    """The usage of these children summed (None when none reported any); a cost only when
    every child that reported usage reported one."""
    usages = [child.usage for child in children if child.usage is not None]
    if not usages:
        return None
    costs = [usage.cost_usd for usage in usages]
    return Usage(
        input_tokens=sum(usage.input_tokens for usage in usages),
        output_tokens=sum(usage.output_tokens for usage in usages),
        cache_read_tokens=sum(usage.cache_read_tokens for usage in usages),
        cache_write_tokens=sum(usage.cache_write_tokens for usage in usages),
        cost_usd=None if None in costs else sum(cost for cost in costs if cost is not None),
    )


def tokens(usage: Usage | None) -> str:
    """`1.2k in, 340 out` (`-` when unknown)."""
    if usage is None:
        return "-"
    return f"{count(usage.input_tokens)} in, {count(usage.output_tokens)} out"


def cost(usage: Usage | None) -> str:
    """`$0.0123` (`-` when unknown)."""
    if usage is None or usage.cost_usd is None:
        return "-"
    return f"${usage.cost_usd:.4f}"


def run_tokens(run: Run) -> str:
    return tokens(total_usage(run.children))
