"""The wire's converter writes what runs report as the domain keeps it (values/facts.py)."""

from __future__ import annotations

import json
import typing
from datetime import UTC, datetime, timedelta

import attrs

from subagent_host.rpc.wire import (
    ChildSnapshot,
    RunList,
    RunOutcome,
    RunSnapshot,
    make_converter,
)
from subagent_host.values.facts import (
    Diagnostic,
    ErrorInfo,
    OutputInfo,
    Resources,
    RunSummary,
    Usage,
)

CONVERTER = make_converter()
MOMENT = datetime(2026, 11, 30, 2, 40, 0, 123_999, tzinfo=UTC)


def test_snapshots_carry_the_domains_own_types_of_what_runs_report() -> None:
    child = typing.get_type_hints(ChildSnapshot)
    run = typing.get_type_hints(RunSnapshot)
    went = typing.get_type_hints(RunOutcome)
    assert child["usage"] == Usage | None
    assert child["outcome"] == run["outcome"] == RunOutcome
    assert went["output"] == OutputInfo | None
    assert went["error"] == ErrorInfo | None
    assert child["resources"] == Resources | None
    assert run["diagnostics"] == tuple[Diagnostic, ...] | None
    assert typing.get_type_hints(RunList)["runs"] == tuple[RunSummary, ...]


def test_every_moment_is_written_in_utc_to_the_millisecond_cut_not_rounded() -> None:
    assert CONVERTER.unstructure(MOMENT) == "2026-11-30T02:40:00.123Z"
    whole_second = MOMENT.replace(microsecond=0)
    assert CONVERTER.unstructure(whole_second) == "2026-11-30T02:40:00.000Z"


def test_a_summary_is_written_with_camel_case_keys_in_the_wire_order_and_no_absent_end() -> None:
    summary = RunSummary(
        run_id="r1", kind="single", status="running", created_at=MOMENT, label="live"
    )
    written = CONVERTER.unstructure(RunList(runs=(summary,)))
    assert written == {
        "runs": [
            {
                "runId": "r1",
                "kind": "single",
                "status": "running",
                "createdAt": "2026-11-30T02:40:00.123Z",
                "label": "live",
            }
        ]
    }
    ended = RunSummary("r2", "chain", "completed", MOMENT, ended_at=MOMENT + timedelta(seconds=1))
    assert list(CONVERTER.unstructure(ended)) == ["runId", "kind", "status", "createdAt", "endedAt"]


def test_what_a_child_reports_is_written_as_the_domain_keeps_it() -> None:
    assert CONVERTER.unstructure(Usage(1, 2, 3, 4)) == {
        "inputTokens": 1,
        "outputTokens": 2,
        "cacheReadTokens": 3,
        "cacheWriteTokens": 4,
    }
    # No leftovers is still said: the field has a default, but not None.
    assert CONVERTER.unstructure(Resources(0.5, 1024, 2)) == {
        "cpuSeconds": 0.5,
        "peakRssBytes": 1024,
        "processes": 2,
        "leftoversEnded": 0,
    }
    assert CONVERTER.unstructure(Diagnostic("warning", "w", "m")) == {
        "severity": "warning",
        "code": "w",
        "message": "m",
    }


def test_an_error_without_data_is_written_without_a_data_key() -> None:
    assert CONVERTER.unstructure(ErrorInfo("exit", "exited 1", {})) == {
        "code": "exit",
        "message": "exited 1",
    }
    assert CONVERTER.unstructure(ErrorInfo("exit", "exited 1", {"exitCode": 1})) == {
        "code": "exit",
        "message": "exited 1",
        "data": {"exitCode": 1},
    }


def test_a_snapshots_outcome_is_written_in_its_place_among_the_snapshots_own_keys() -> None:
    went = RunOutcome(
        started_at=MOMENT, duration_ms=5, error=ErrorInfo("timeout", "too slow"), reason="timeout"
    )
    child = ChildSnapshot(index=0, backend="command", status="failed", attempt=1, pid=7)
    written = CONVERTER.unstructure(attrs.evolve(child, outcome=went, step=2))
    assert list(written) == [
        "index", "backend", "status", "attempt", "pid",
        "startedAt", "durationMs", "error", "reason", "step",
    ]  # fmt: skip
    assert written["error"] == {"code": "timeout", "message": "too slow"}
    assert list(CONVERTER.unstructure(child)) == ["index", "backend", "status", "attempt", "pid"]


def test_a_contract_is_written_without_nulls_and_its_digest_is_the_stored_forms() -> None:
    from subagent_host.planning.fingerprint import fingerprint
    from subagent_host.planning.views import ChildLimits, Contract, Projection, to_json
    from subagent_host.rpc.wire import PreflightResult

    projection = Projection(
        backend="command", argv_template=("true",), model=None, thinking=None, tools=(),
        cwd="/", env_keys=(), limits=ChildLimits(timeout_ms=1, stall_timeout_ms=1),
        label=None, agent=None, access=None,
    )  # fmt: skip
    contract = Contract(
        run_id="r" * 32, index=0, attempt=2, projection=projection, projection_digest="d"
    )
    stored = to_json(contract)
    assert stored["projection"]["model"] is None  # the stored form keeps its nulls
    wire = CONVERTER.unstructure(PreflightResult(accepted=True, diagnostics=(), contract=contract))
    assert "null" not in json.dumps(wire)
    assert {"model", "thinking", "label", "agent", "access"}.isdisjoint(
        wire["contract"]["projection"]
    )
    assert fingerprint(wire["contract"]) == fingerprint(stored)
    assert fingerprint(wire["contract"]["projection"]) == fingerprint(to_json(projection))
