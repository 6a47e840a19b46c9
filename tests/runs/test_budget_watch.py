"""A child's budget is watched on the usage its parser has summed so far: input and output
tokens (never the cache's) and the cost, checked after every chunk of output, reached at
the first chunk whose running total meets it (streams recorded from the real CLIs)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from subagent_host.backends.base import OutputParser
from subagent_host.backends.budgets import (
    MAX_COST_LIMIT,
    MAX_TOKENS_LIMIT,
    Budget,
    tokens_of,
    unreported,
)
from subagent_host.backends.claude import ClaudeParser
from subagent_host.backends.codex import CodexParser
from subagent_host.backends.pi import PiParser
from subagent_host.runs.child_sink import ChildSink
from subagent_host.values.facts import Usage

FIXTURES = Path(__file__).resolve().parents[1] / "backends" / "fixtures"
PARSERS: dict[str, Callable[[], OutputParser]] = {"pi": PiParser, "claude": ClaudeParser}


def lines_of(cli: str, name: str = "tool_then_answer.jsonl") -> list[bytes]:
    return (FIXTURES / cli / name).read_bytes().splitlines(keepends=True)


def running_totals(cli: str) -> list[Usage | None]:
    """The usage a fresh parser holds after each line of the recording."""
    parser = PARSERS[cli]() if cli in PARSERS else CodexParser()
    totals = []
    for line in lines_of(cli):
        parser.on_stdout(line)
        totals.append(parser.usage)
    return totals


def test_a_budget_counts_input_and_output_tokens_and_the_reported_cost() -> None:
    usage = Usage(
        input_tokens=100, output_tokens=20, cache_read_tokens=5000, cache_write_tokens=900
    )
    assert tokens_of(usage) == 120  # the cache's tokens are not counted
    assert Budget(max_tokens=121).reached(usage) is None
    assert Budget(max_tokens=120).reached(usage) == MAX_TOKENS_LIMIT
    assert Budget(max_tokens=10**9, max_cost_usd=0.01).reached(usage) is None  # no cost
    costly = Usage(1, 1, 0, 0, cost_usd=0.02)
    assert Budget(max_cost_usd=0.03).reached(costly) is None
    assert Budget(max_cost_usd=0.02).reached(costly) == MAX_COST_LIMIT
    assert Budget(max_tokens=2, max_cost_usd=0.02).reached(costly) == MAX_TOKENS_LIMIT
    assert Budget(max_tokens=1).reached(None) is None
    assert not Budget().is_set and Budget(max_cost_usd=1).is_set


@pytest.mark.parametrize("cli", sorted(PARSERS))
def test_usage_is_reported_response_by_response_and_summed(cli: str) -> None:
    """pi and claude report each response's usage as it ends: the total rises more than
    once while the child runs, which is what lets a budget stop it."""
    totals = [tokens_of(usage) for usage in running_totals(cli) if usage is not None]
    rises = sorted(set(totals))
    assert len(rises) >= 2, totals
    assert totals == sorted(totals)  # a running sum never falls


def test_codex_reports_its_usage_only_with_its_final_event() -> None:
    """Why a budget is refused for codex: nothing is reported until its turn ends."""
    totals = running_totals("codex")
    assert all(usage is None for usage in totals[:-1]) and totals[-1] is not None
    assert unreported("codex", "maxTokens") is not None
    assert unreported("claude", "maxCostUsd") is not None
    assert unreported("pi", "maxTokens") is None and unreported("pi", "maxCostUsd") is None


def first_total_above(cli: str, tokens: int) -> int:
    return next(
        i for i, usage in enumerate(running_totals(cli)) if usage and tokens_of(usage) > tokens
    )


@pytest.mark.parametrize("cli", sorted(PARSERS))
async def test_the_watch_fires_once_at_the_first_chunk_whose_total_reaches_the_budget(
    cli: str,
) -> None:
    first = next(usage for usage in running_totals(cli) if usage is not None)
    budget = tokens_of(first) + 1  # more than the first response spent
    reached_at = first_total_above(cli, tokens_of(first))
    sink = ChildSink(PARSERS[cli](), None, lambda _: None)
    reached: list[tuple[int, str]] = []
    lines = lines_of(cli)
    sink.watch_budget(Budget(max_tokens=budget), lambda limit: reached.append((len(fed), limit)))
    fed: list[bytes] = []
    for line in lines:
        fed.append(line)
        sink.on_stdout(line)
    assert reached == [(reached_at + 1, MAX_TOKENS_LIMIT)]  # fired while that line was read


async def test_a_cost_budget_is_watched_on_pis_summed_cost() -> None:
    costs = [usage.cost_usd for usage in running_totals("pi") if usage and usage.cost_usd]
    assert costs and len(set(costs)) >= 2, costs  # pi prices each response
    sink = ChildSink(PiParser(), None, lambda _: None)
    reached: list[str] = []
    sink.watch_budget(Budget(max_cost_usd=costs[-1]), reached.append)
    for line in lines_of("pi"):
        sink.on_stdout(line)
    assert reached == [MAX_COST_LIMIT]


async def test_usage_read_before_the_watch_began_counts_and_a_budget_not_reached_never_fires() -> (
    None
):
    sink = ChildSink(PiParser(), None, lambda _: None)
    lines = iter(lines_of("pi"))
    while sink.parser.usage is None:  # up to the first response's end
        sink.on_stdout(next(lines))
    total = sink.parser.usage
    assert not sink.parser.finished
    reached: list[str] = []
    sink.watch_budget(Budget(max_tokens=tokens_of(total) + 1), reached.append)
    assert reached == []
    sink.unwatch_limits()
    sink.watch_budget(Budget(max_tokens=tokens_of(total)), reached.append)
    assert reached == [MAX_TOKENS_LIMIT]


@pytest.mark.parametrize("cli", sorted(PARSERS))
async def test_a_budget_reached_with_the_clis_final_event_leaves_its_answer_standing(
    cli: str,
) -> None:
    sink = ChildSink(PARSERS[cli](), None, lambda _: None)
    reached: list[str] = []
    sink.watch_budget(Budget(max_tokens=1), reached.append)
    sink.on_stdout(b"".join(lines_of(cli)))  # the whole answer in one chunk
    assert sink.parser.finished and reached == []
