"""Each ending type carries exactly the facts protocol.md's table of statuses gives it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import get_args

import attrs
import pytest

from subagent_host.runs.endings import ChildEnding, ChildExit, RunEnding
from subagent_host.values import TERMINAL, RunStatus

PROTOCOL = Path(__file__).parents[2] / "protocol.md"


def _documented() -> dict[RunStatus, tuple[set[str], set[str]]]:
    """protocol.md §12's table of statuses: what each terminal status carries besides
    `output`, in wire names — a run's, then a child's (only the facts a ChildSnapshot has:
    a child carries no run-only fact)."""
    text = PROTOCOL.read_text()
    snapshot = re.search(r"^\*\*ChildSnapshot:\*\*(.*?)^\*\*", text, re.M | re.S)
    assert snapshot is not None
    child_fields = set(re.findall(r"`([a-zA-Z]+)\??`", snapshot[1]))
    table: dict[RunStatus, tuple[set[str], set[str]]] = {}
    statuses = text[text.index("| status | carries | output |") :].split("\n\n")[0]
    for name, carries in re.findall(r"^\| `([a-z-]+)` \| (.*) \| .* \|$", statuses, re.M):
        carries = re.sub(r"\([^)]*\)", "", carries)  # the values a fact takes
        both, run_also, child_also = carries, "", ""
        if "; the run also " in carries:
            both, run_also = carries.split("; the run also ")
        if "; the child also " in carries:
            both, child_also = carries.split("; the child also ")
        named = [set(re.findall(r"`([a-zA-Z]+)", part)) for part in (both, run_also, child_also)]
        table[RunStatus(name)] = (named[0] | named[1], (named[0] | named[2]) & child_fields)
    return table


CARRIES = _documented()
# Facts a child's ending keeps with the child for its run, never on a ChildSnapshot: a
# timed-out child's enforced timeout, which its run reports whenever it settles from it
# (also after a resume of another child, protocol.md §15).
KEPT_FOR_THE_RUN: dict[RunStatus, set[str]] = {RunStatus.TIMED_OUT: {"enforcedTimeoutMs"}}

RUN_ENDINGS: dict[RunStatus, type[RunEnding]] = {cls.status: cls for cls in get_args(RunEnding)}
CHILD_ENDINGS: dict[RunStatus, type[ChildEnding]] = {
    cls.status: cls for cls in get_args(ChildEnding)
}


def wire_name(field: str) -> str:
    head, *rest = field.split("_")
    return head + "".join(word.capitalize() for word in rest)


def facts(cls: type[RunEnding] | type[ChildEnding]) -> tuple[set[str], set[str]]:
    """The ending's facts in wire names, and those it cannot be made without."""
    fields = attrs.fields(cls)
    every = {wire_name(f.name) for f in fields}
    required = {wire_name(f.name) for f in fields if f.default is attrs.NOTHING}
    return every, required


def test_every_terminal_status_has_one_run_and_one_child_ending() -> None:
    assert set(RUN_ENDINGS) == set(CHILD_ENDINGS) == set(CARRIES) == set(TERMINAL)


@pytest.mark.parametrize("status", sorted(CARRIES))
def test_a_run_ending_carries_exactly_its_documented_facts(status: RunStatus) -> None:
    every, required = facts(RUN_ENDINGS[status])
    assert every == CARRIES[status][0] | {"output"}
    assert required == CARRIES[status][0]  # output may be absent


@pytest.mark.parametrize("status", sorted(CARRIES))
def test_a_child_ending_carries_exactly_its_documented_facts(status: RunStatus) -> None:
    every, required = facts(CHILD_ENDINGS[status])
    kept = KEPT_FOR_THE_RUN.get(status, set())
    assert kept <= CARRIES[status][0]  # the run's own fact, as the run carries it
    # `exit`: how its process ended (exitCode, signal, stoppedBy, usage, backendSessionId).
    assert every == CARRIES[status][1] | kept | {"output", "exit"}
    assert required == CARRIES[status][1] | kept


def test_a_childs_exit_holds_the_process_facts_of_its_snapshot() -> None:
    names = {wire_name(f.name) for f in attrs.fields(ChildExit)}
    assert names == {"exitCode", "signal", "stoppedBy", "usage", "backendSessionId"}


def test_the_documented_table_reads_as_expected() -> None:
    """The reading of protocol.md above finds what its table says."""
    assert CARRIES[RunStatus.TIMED_OUT] == ({"reason", "enforcedTimeoutMs"}, {"reason"})
    assert CARRIES[RunStatus.LIMIT_REACHED] == ({"reachedLimit"}, {"reason"})
    assert CARRIES[RunStatus.FAILED] == ({"error"}, {"error"})
    assert CARRIES[RunStatus.COMPLETED] == (set(), set())
