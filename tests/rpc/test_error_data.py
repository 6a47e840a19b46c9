"""An error's `data` is a typed value, written by the wire's converter as protocol.md §4 says."""

from __future__ import annotations

from typing import Any, Final

import pytest

from subagent_host.errors import (
    DOMAIN_ERRORS,
    JSONRPC_MEANINGS,
    AmbiguousRunId,
    BackendUnavailable,
    CapacityExceeded,
    HostError,
    LaunchRejected,
    RecordFailed,
    ResumeDenied,
    RunNotFound,
)
from subagent_host.rpc.codes import CODES, MEANINGS
from subagent_host.rpc.control import MAX_CONNECTIONS, busy_error
from subagent_host.rpc.errors import InvalidParams, error_for_exception
from subagent_host.rpc.json_codec import encode_json
from subagent_host.rpc.param_problems import ParamProblem
from subagent_host.rpc.wire import make_converter
from subagent_host.values.error_data import (
    QueueFull,
    Rejection,
    ResumeDenial,
    RunIdMatches,
    RunRef,
)
from subagent_host.values.facts import Diagnostic

CONVERTER: Final = make_converter()

# Each error as raised, and its `error` member as the wire has always carried it, key
# order included.
CASES: Final[list[tuple[Exception, dict[str, Any]]]] = [
    (
        RunNotFound("no run 'r-1' in this session", data=RunRef("r-1")),
        {"code": -32001, "message": "no run 'r-1' in this session", "data": {"runId": "r-1"}},
    ),
    (
        RunNotFound("not held", data=RunRef("r-1", reason="not-held-here")),
        {
            "code": -32001,
            "message": "not held",
            "data": {"runId": "r-1", "reason": "not-held-here"},
        },
    ),
    (
        AmbiguousRunId("two", data=RunIdMatches("abcd", ("abcd1", "abcd2"))),
        {
            "code": -32006,
            "message": "two",
            "data": {"runId": "abcd", "matches": ["abcd1", "abcd2"]},
        },
    ),
    (
        LaunchRejected(
            "launch rejected: gone",
            data=Rejection(
                (Diagnostic("error", "unknown-preflight", "gone", "preflightId"),), "fp"
            ),
        ),
        {
            "code": -32003,
            "message": "launch rejected: gone",
            "data": {
                "diagnostics": [
                    {
                        "severity": "error",
                        "code": "unknown-preflight",
                        "message": "gone",
                        "path": "preflightId",
                    }
                ],
                "fingerprint": "fp",
            },
        },
    ),
    (
        BackendUnavailable("no cluster", data=Rejection((Diagnostic("error", "c", "no cluster"),))),
        {
            "code": -32002,
            "message": "no cluster",
            "data": {"diagnostics": [{"severity": "error", "code": "c", "message": "no cluster"}]},
        },
    ),
    (
        ResumeDenied(
            "resume denied: changed",
            data=ResumeDenial(
                "launch-changed",
                code="launch-changed",
                changed=("version", "argv"),
                expected={"version": "1.0", "argv": ["pi", "-p"]},
                actual={"version": None, "argv": ["pi"]},
            ),
        ),
        {
            "code": -32004,
            "message": "resume denied: changed",
            "data": {
                "reason": "launch-changed",
                "code": "launch-changed",
                "changed": ["version", "argv"],
                "expected": {"version": "1.0", "argv": ["pi", "-p"]},
                "actual": {"version": None, "argv": ["pi"]},
            },
        },
    ),
    (
        ResumeDenied("resume denied: gone", data=ResumeDenial("mismatch", run_id="r-1")),
        {
            "code": -32004,
            "message": "resume denied: gone",
            "data": {"reason": "mismatch", "runId": "r-1"},
        },
    ),
    (
        ResumeDenied(
            "resume denied: other",
            data=ResumeDenial("mismatch", expected="sha256:a", actual="sha256:b"),
        ),
        {
            "code": -32004,
            "message": "resume denied: other",
            "data": {"reason": "mismatch", "expected": "sha256:a", "actual": "sha256:b"},
        },
    ),
    (
        CapacityExceeded("full", data=QueueFull(queued=2, limit=1)),
        {"code": -32005, "message": "full", "data": {"queued": 2, "limit": 1}},
    ),
    (
        RecordFailed("not written", data=RunRef("r-1")),
        {"code": -32603, "message": "not written", "data": {"runId": "r-1"}},
    ),
    (
        InvalidParams([ParamProblem("graceMs", "must be 0..86400000")]),
        {
            "code": -32602,
            "message": "invalid params: graceMs: must be 0..86400000",
            "data": {"errors": [{"path": "graceMs", "message": "must be 0..86400000"}]},
        },
    ),
]


@pytest.mark.parametrize("raised, wire", CASES)
def test_each_error_data_is_written_as_the_wire_carries_it(
    raised: Exception, wire: dict[str, Any]
) -> None:
    written = CONVERTER.unstructure(error_for_exception(raised))
    assert encode_json(written) == encode_json(wire)  # same keys, same order, same bytes


def test_a_control_socket_that_holds_enough_connections_says_how_many() -> None:
    busy = busy_error(MAX_CONNECTIONS)
    assert encode_json(busy) == encode_json(
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {
                "code": -32005,
                "message": f"busy: {MAX_CONNECTIONS} control connections are open, "
                f"at most {MAX_CONNECTIONS}",
                "data": {"connections": MAX_CONNECTIONS, "limit": MAX_CONNECTIONS},
            },
        }
    )


def test_every_domain_error_is_in_the_one_table_with_its_own_code_and_meaning() -> None:
    assert set(DOMAIN_ERRORS) == set(HostError.__subclasses__())
    assert CODES == {kind: kind.CODE for kind in DOMAIN_ERRORS}
    own = [kind for kind in DOMAIN_ERRORS if kind.CODE not in JSONRPC_MEANINGS]
    assert len({kind.CODE for kind in own}) == len(own)
    assert all(-32099 <= kind.CODE <= -32000 for kind in own)  # the range for servers' own
    for kind in DOMAIN_ERRORS:  # a JSON-RPC code keeps JSON-RPC's meaning
        assert MEANINGS[kind.CODE] == kind.MEANING
