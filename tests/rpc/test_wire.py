"""The wire's converter writes what runs report as the domain keeps it (values/facts.py)."""

from __future__ import annotations

import json
import typing
from datetime import UTC, datetime, timedelta

import attrs
import cattrs
import pytest

from subagent_host.planning.views import UNPROBED, ChildReceipt, to_json
from subagent_host.rpc.wire import (
    ChildSnapshot,
    EventWire,
    RunList,
    RunOutcome,
    RunSnapshot,
    StatusResult,
    StepSnapshot,
    WorkflowSnapshot,
    make_converter,
)
from subagent_host.values import ReportedStepKind, RunKind, RunStatus
from subagent_host.values.choices import AdmittedBy, StepStatus
from subagent_host.values.events import StatusEvent
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
        run_id="r1", kind=RunKind.SINGLE, status=RunStatus.RUNNING, created_at=MOMENT, label="live"
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
    ended = RunSummary(
        "r2", RunKind.CHAIN, RunStatus.COMPLETED, MOMENT, ended_at=MOMENT + timedelta(seconds=1)
    )
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
    child = ChildSnapshot(index=0, backend="command", status=RunStatus.FAILED, attempt=1, pid=7)
    written = CONVERTER.unstructure(attrs.evolve(child, outcome=went, step=2))
    assert list(written) == [
        "index", "backend", "status", "attempt", "pid",
        "startedAt", "durationMs", "error", "reason", "step",
    ]  # fmt: skip
    assert written["error"] == {"code": "timeout", "message": "too slow"}
    assert list(CONVERTER.unstructure(child)) == ["index", "backend", "status", "attempt", "pid"]


# --- reading results back (the client library structures what the server wrote) ---------

CLIENT = make_converter(forbid_extra_keys=False)
# Moments travel to the millisecond: one read back is the one written when it has no more.
AT_MS = MOMENT.replace(microsecond=123_000)
STATUS_RESULT: typing.Any = StatusResult  # a union, which mypy does not take for a type


def _snapshot() -> RunSnapshot:
    went = RunOutcome(
        started_at=AT_MS,
        ended_at=AT_MS + timedelta(seconds=1),
        duration_ms=1000,
        output=OutputInfo(text="hi\n", truncated=False, bytes=3, lines=1, partial=False),
    )
    return RunSnapshot(
        run_id="r1",
        session_id="s1",
        kind=RunKind.WORKFLOW,
        status=RunStatus.COMPLETED,
        created_at=AT_MS,
        fingerprint="sha256:v1:" + "0" * 64,
        last_seq=5,
        children=(
            ChildSnapshot(
                index=0,
                backend="command",
                status=RunStatus.COMPLETED,
                attempt=1,
                outcome=went,
                step=0,
            ),
        ),
        admitted_by=AdmittedBy.DIRECT,
        outcome=went,
        workflow=WorkflowSnapshot(
            name="w",
            steps=(
                StepSnapshot(
                    index=0,
                    kind=ReportedStepKind.PROMPT,
                    status=StepStatus.COMPLETED,
                    children=(0,),
                    output_name="a",
                ),
            ),
        ),
        events=(
            EventWire(run_id="r1", seq=5, at=AT_MS, event=StatusEvent(status=RunStatus.COMPLETED)),
        ),
    )


def test_a_snapshot_read_back_is_the_snapshot_written_inline_outcome_and_moments_included() -> None:
    snapshot = _snapshot()
    written = CONVERTER.unstructure(snapshot)
    assert "outcome" not in written and written["children"][0]["startedAt"]
    assert written["workflow"]["steps"][0]["as"] == "a"
    assert CONVERTER.structure(written, RunSnapshot) == snapshot
    assert CONVERTER.unstructure(CONVERTER.structure(written, RunSnapshot)) == written


def test_a_status_result_is_read_as_a_list_or_a_snapshot_by_its_keys() -> None:
    listing = RunList(
        runs=(
            RunSummary(run_id="r1", kind=RunKind.SINGLE, status=RunStatus.QUEUED, created_at=AT_MS),
        )
    )
    assert CONVERTER.structure(CONVERTER.unstructure(listing), STATUS_RESULT) == listing
    snapshot = _snapshot()
    assert CONVERTER.structure(CONVERTER.unstructure(snapshot), STATUS_RESULT) == snapshot


def test_a_receipts_version_reads_back_null_and_absent_apart() -> None:
    receipt = {"index": 0, "backend": "pi", "tools": [], "removedTools": [], "effects": []}
    receipt["restrictable"] = True
    receipt["egress"] = [{"kind": "model-provider", "backend": "pi"}]
    unprobed = CONVERTER.structure(receipt, ChildReceipt)
    assert unprobed.version is UNPROBED
    assert CONVERTER.structure({**receipt, "version": None}, ChildReceipt).version is None
    assert CONVERTER.structure({**receipt, "version": "1.2"}, ChildReceipt).version == "1.2"
    assert to_json(unprobed) == receipt


def test_a_client_reads_fields_a_newer_server_added_and_ignores_them() -> None:
    written = {**CONVERTER.unstructure(_snapshot()), "newField": 1}
    written["children"][0]["newChildField"] = {"x": 1}
    assert CLIENT.structure(written, RunSnapshot) == _snapshot()
    with pytest.raises(cattrs.ClassValidationError):
        CONVERTER.structure(written, RunSnapshot)


def test_a_moment_without_its_zone_is_refused() -> None:
    with pytest.raises(cattrs.ClassValidationError):
        CONVERTER.structure(
            {"runId": "r", "seq": 1, "type": "status", "at": "2026-11-30T02:40:00.123"}, EventWire
        )


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
    stored: dict[str, typing.Any] = to_json(contract)
    assert stored["projection"]["model"] is None  # the stored form keeps its nulls
    wire = CONVERTER.unstructure(PreflightResult(accepted=True, diagnostics=(), contract=contract))
    assert "null" not in json.dumps(wire)
    assert {"model", "thinking", "label", "agent", "access"}.isdisjoint(
        wire["contract"]["projection"]
    )
    assert fingerprint(wire["contract"]) == fingerprint(stored)
    assert fingerprint(wire["contract"]["projection"]) == fingerprint(to_json(projection))
