"""The dispatcher in memory: frames in, exact wire dicts out, with a fake method table."""

from __future__ import annotations

import asyncio
import json
import math
from typing import Any

import attrs
import pytest

from subagent_host.errors import RunNotFound
from subagent_host.rpc.dispatch import HostProtocol, Method, make_protocol
from subagent_host.rpc.errors import method_suggestion
from subagent_host.rpc.framing import BadFrame, Parsed
from subagent_host.rpc.notifier import Notifier
from subagent_host.values.error_data import RunRef
from tests.waits import loop_turns


@attrs.frozen
class EchoParams:
    text: str
    repeat_count: int | None = None


@attrs.frozen
class EchoResult:
    text: str
    note: str | None = None


@attrs.frozen
class Empty:
    pass


@attrs.frozen
class NestedParams:
    text: str
    items: tuple[str, ...] | None = None
    env: dict[str, str] | None = None
    extra: dict[str, Any] | None = None


class Harness:
    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.release = asyncio.Event()
        self.slow_started = asyncio.Event()
        self.cancelled: list[str] = []
        self.echoed: list[EchoParams] = []
        self.protocol: HostProtocol = make_protocol()
        self.protocol.attach(
            {
                "echo": Method(EchoParams, self.echo),
                "slow": Method(Empty, self.slow),
                "missing": Method(Empty, self.missing),
                "crash": Method(Empty, self.crash),
                "nan": Method(Empty, self.nan),
                "nested": Method(NestedParams, self.nested),
                "length": Method(EchoParams, self.length),
            },
            lambda body: self.sent.append(json.loads(body)),
        )

    async def echo(self, params: EchoParams) -> EchoResult:
        self.echoed.append(params)
        return EchoResult(text=params.text * (params.repeat_count or 1))

    async def slow(self, _params: Empty) -> dict[str, bool]:
        self.slow_started.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled.append("slow")
            raise
        return {"released": True}

    async def missing(self, _params: Empty) -> None:
        raise RunNotFound("no run r-1 in this session", data=RunRef("r-1"))

    async def crash(self, _params: Empty) -> None:
        raise RuntimeError("secret internals /home/user/.token")

    async def nan(self, _params: Empty) -> float:
        return math.nan

    async def nested(self, params: NestedParams) -> EchoResult:
        self.cancelled.append("nested ran")  # must never happen with a bad string
        return EchoResult(text=params.text)

    def length(self, params: EchoParams) -> int:
        return len(params.text)

    def send(self, value: Any) -> None:
        self.protocol.receive(Parsed(value))

    async def settle(self) -> list[Any]:
        await asyncio.wait_for(self.protocol.wait_answered(), 5)
        sent, self.sent = self.sent, []
        return sent


def request(msg_id: Any, method: str, params: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


@pytest.fixture
def rpc() -> Harness:
    return Harness()


async def test_result_is_camel_case_with_none_omitted(rpc: Harness) -> None:
    rpc.send(request(1, "echo", {"text": "ab", "repeatCount": 2}))
    assert await rpc.settle() == [{"jsonrpc": "2.0", "id": 1, "result": {"text": "abab"}}]


async def test_string_ids_are_echoed_exactly(rpc: Harness) -> None:
    rpc.send(request("a-1", "echo", {"text": "x"}))
    assert (await rpc.settle())[0]["id"] == "a-1"


async def test_invalid_params_list_every_problem_with_camel_case_paths(rpc: Harness) -> None:
    rpc.send(request(2, "echo", {"repeatCount": "3", "extra": 1, "other": None}))
    assert await rpc.settle() == [
        {
            "jsonrpc": "2.0",
            "id": 2,
            "error": {
                "code": -32602,
                "message": "invalid params: text: required field missing; "
                "repeatCount: expected an integer, got a string; extra: unknown field",
                "data": {
                    "errors": [
                        {"path": "text", "message": "required field missing"},
                        {"path": "repeatCount", "message": "expected an integer, got a string"},
                        {"path": "extra", "message": "unknown field"},
                        {"path": "other", "message": "unknown field"},
                    ]
                },
            },
        }
    ]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (True, "expected an integer, got a boolean"),
        (3.7, "expected an integer, got a number"),
        (None, None),
    ],
)
async def test_primitives_are_checked_not_coerced(rpc: Harness, value: Any, message: Any) -> None:
    rpc.send(request(3, "echo", {"text": "x", "repeatCount": value}))
    [reply] = await rpc.settle()
    if message is None:
        assert reply["result"] == {"text": "x"}
    else:
        assert reply["error"]["data"]["errors"] == [{"path": "repeatCount", "message": message}]


POSITIONAL = "expected an object (this server takes them by name, not by position), got an array"


@pytest.mark.parametrize("params", [["x"], [None], [{}], [[]]])
async def test_positional_params_are_invalid_params_said_once(rpc: Harness, params: Any) -> None:
    rpc.send(request(4, "echo", params))
    assert await rpc.settle() == [
        {
            "jsonrpc": "2.0",
            "id": 4,
            "error": {
                "code": -32602,
                "message": f"invalid params: {POSITIONAL}",
                "data": {"errors": [{"path": "", "message": POSITIONAL}]},
            },
        }
    ]
    assert rpc.sent == [] and rpc.echoed == []


async def test_an_empty_params_array_means_no_params(rpc: Harness) -> None:
    # @open-rpc/client-js sends `"params": []` for every call without params.
    rpc.send(request(1, "slow", []))
    rpc.send(request(2, "echo", []))  # no params: its required field is missing
    rpc.send({"jsonrpc": "2.0", "method": "echo", "params": []})  # a notification alike
    await asyncio.wait_for(rpc.slow_started.wait(), 5)
    rpc.release.set()
    replies = sorted(await rpc.settle(), key=lambda reply: reply["id"])
    assert replies == [
        {"jsonrpc": "2.0", "id": 1, "result": {"released": True}},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "error": {
                "code": -32602,
                "message": "invalid params: text: required field missing",
                "data": {"errors": [{"path": "text", "message": "required field missing"}]},
            },
        },
    ]


async def test_unknown_method_is_method_not_found(rpc: Harness) -> None:
    rpc.send(request(5, "spawn"))
    assert await rpc.settle() == [
        {"jsonrpc": "2.0", "id": 5, "error": {"code": -32601, "message": "method not found: spawn"}}
    ]


@pytest.mark.parametrize(
    ("method", "hint"),
    [
        ("Echo", " (did you mean echo?)"),  # another case
        ("SLOW", " (did you mean slow?)"),
        ("misssing", " (did you mean missing?)"),  # a typo
        ("crash.", " (did you mean crash?)"),  # close enough
        ("frobnicate", ""),
    ],
)
async def test_an_unknown_method_says_which_known_one_was_meant(
    rpc: Harness, method: str, hint: str
) -> None:
    rpc.send(request(5, method))
    [reply] = await rpc.settle()
    assert reply["error"] == {"code": -32601, "message": f"method not found: {method}{hint}"}


def test_a_method_suggestion_reads_dots_and_underscores_as_slashes() -> None:
    known = ["agents/list", "spawn", "status", "run/detach"]
    assert method_suggestion("agents.list", known) == " (did you mean agents/list?)"
    assert method_suggestion("agents_list", known) == " (did you mean agents/list?)"
    assert method_suggestion("Spawn", known) == " (did you mean spawn?)"
    assert method_suggestion("stats", known) == " (did you mean status?)"
    assert method_suggestion("spawn", known) == ""


async def test_domain_errors_carry_their_contract_code_and_data(rpc: Harness) -> None:
    rpc.send(request(6, "missing"))
    assert await rpc.settle() == [
        {
            "jsonrpc": "2.0",
            "id": 6,
            "error": {
                "code": -32001,
                "message": "no run r-1 in this session",
                "data": {"runId": "r-1"},
            },
        }
    ]


async def test_unexpected_exceptions_are_internal_errors_without_a_traceback(
    rpc: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    rpc.send(request(7, "crash"))
    assert await rpc.settle() == [
        {
            "jsonrpc": "2.0",
            "id": 7,
            "error": {"code": -32603, "message": "internal error (RuntimeError)"},
        }
    ]
    assert "secret internals" in caplog.text  # the detail goes to the log only


async def test_a_result_that_is_not_json_becomes_an_internal_error(rpc: Harness) -> None:
    rpc.send(request(8, "nan"))
    assert await rpc.settle() == [
        {
            "jsonrpc": "2.0",
            "id": 8,
            "error": {"code": -32603, "message": "internal error (result is not valid JSON)"},
        }
    ]


async def test_cancel_request_answers_the_request_cancelled(rpc: Harness) -> None:
    rpc.send(request(9, "slow"))
    await asyncio.wait_for(rpc.slow_started.wait(), 5)
    rpc.send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 9}})
    assert await rpc.settle() == [
        {"jsonrpc": "2.0", "id": 9, "error": {"code": -32800, "message": "request cancelled"}}
    ]
    assert rpc.cancelled == ["slow"]


async def test_a_request_cancelled_twice_is_answered_once(rpc: Harness) -> None:
    rpc.send(request(9, "slow"))
    await asyncio.wait_for(rpc.slow_started.wait(), 5)
    cancel = {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 9}}
    rpc.send([cancel, cancel])
    rpc.send(cancel)
    assert [reply["id"] for reply in await rpc.settle()] == [9]
    rpc.send(request(10, "echo", {"text": "after"}))  # every task has ended by its answer
    assert await rpc.settle() == [{"jsonrpc": "2.0", "id": 10, "result": {"text": "after"}}]
    assert rpc.cancelled == ["slow"]


async def test_a_plain_function_is_answered_in_the_step_that_read_its_request(
    rpc: Harness,
) -> None:
    rpc.send(request(1, "length", {"text": "four"}))
    rpc.send(request(2, "length", {"text": 4}))
    assert rpc.sent[0] == {"jsonrpc": "2.0", "id": 1, "result": 4}
    assert [reply["error"]["code"] for reply in rpc.sent[1:]] == [-32602]
    assert rpc.protocol.in_flight == 0


async def test_cancel_of_an_unknown_or_finished_request_is_ignored(rpc: Harness) -> None:
    rpc.send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 404}})
    rpc.send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"nope": True}})
    rpc.send(request(10, "echo", {"text": "still here"}))
    assert (await rpc.settle())[0]["result"] == {"text": "still here"}


async def test_cancel_in_flight_answers_every_running_request(rpc: Harness) -> None:
    rpc.send(request(11, "slow"))
    rpc.send(request(12, "slow"))
    await asyncio.wait_for(rpc.slow_started.wait(), 5)
    rpc.protocol.cancel_in_flight()
    replies = await rpc.settle()
    assert sorted(r["id"] for r in replies) == [11, 12]
    assert {r["error"]["code"] for r in replies} == {-32800}


async def test_a_request_reusing_an_id_in_flight_is_refused_and_the_first_still_answers(
    rpc: Harness,
) -> None:
    rpc.send(request(13, "slow"))
    rpc.send(request(13, "echo", {"text": "dup"}))
    assert rpc.sent == [
        {
            "jsonrpc": "2.0",
            "id": 13,
            "error": {
                "code": -32600,
                "message": "invalid request: a request with id 13 is still in flight",
            },
        }
    ]
    rpc.release.set()
    assert (await rpc.settle())[-1] == {"jsonrpc": "2.0", "id": 13, "result": {"released": True}}


async def test_notifications_run_but_are_never_answered(rpc: Harness) -> None:
    rpc.send({"jsonrpc": "2.0", "method": "echo", "params": {"text": "x"}})
    rpc.send({"jsonrpc": "2.0", "method": "echo", "params": {"bad": 1}})
    rpc.send({"jsonrpc": "2.0", "method": "no-such-method"})
    rpc.send({"jsonrpc": "2.0", "method": "$/setTrace", "params": {"value": "off"}})
    # Handlers run as tasks in the order read, and echo never awaits: once this
    # request is answered, every notification above has run to its end.
    rpc.send(request(1, "echo", {"text": "after"}))
    assert await rpc.settle() == [{"jsonrpc": "2.0", "id": 1, "result": {"text": "after"}}]
    assert rpc.echoed == [EchoParams(text="x"), EchoParams(text="after")]


async def test_batch_answers_come_back_as_one_array_in_request_order(rpc: Harness) -> None:
    rpc.send(
        [
            request(1, "slow"),
            {"jsonrpc": "2.0", "method": "echo", "params": {"text": "n"}},
            request(2, "echo", {"text": "b"}),
            {"foo": "boo"},
            request(3, "nope"),
        ]
    )
    await loop_turns()
    assert rpc.sent == []  # nothing until the slowest member is done
    rpc.release.set()
    assert await rpc.settle() == [
        [
            {"jsonrpc": "2.0", "id": 1, "result": {"released": True}},
            {"jsonrpc": "2.0", "id": 2, "result": {"text": "b"}},
            {
                "jsonrpc": "2.0",
                "id": None,
                "error": {
                    "code": -32600,
                    "message": 'invalid request: "jsonrpc" must be exactly "2.0"',
                },
            },
            {
                "jsonrpc": "2.0",
                "id": 3,
                "error": {"code": -32601, "message": "method not found: nope"},
            },
        ]
    ]


async def test_batch_of_notifications_gets_no_reply(rpc: Harness) -> None:
    rpc.send([{"jsonrpc": "2.0", "method": "echo", "params": {"text": "n"}}])
    rpc.send(request(1, "echo", {"text": "after"}))  # answered after the batch's handler ran
    assert await rpc.settle() == [{"jsonrpc": "2.0", "id": 1, "result": {"text": "after"}}]
    assert rpc.echoed == [EchoParams(text="n"), EchoParams(text="after")]


async def test_empty_batch_is_one_invalid_request(rpc: Harness) -> None:
    rpc.send([])
    assert rpc.sent == [
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "empty batch"}}
    ]


async def test_bad_frames_are_answered_with_a_null_id(rpc: Harness) -> None:
    rpc.protocol.receive(BadFrame("parse-error", "parse error: x"))
    rpc.protocol.receive(BadFrame("too-large", "message too large: y"))
    assert rpc.sent == [
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error: x"}},
        {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32600, "message": "message too large: y"},
        },
    ]


@pytest.mark.parametrize(
    ("message", "reply_id", "reason"),
    [
        ({"jsonrpc": "2.0", "id": 1, "method": 5}, 1, '"method" must be a string'),
        ({"jsonrpc": "1.0", "id": 1, "method": "echo"}, 1, '"jsonrpc" must be exactly "2.0"'),
        ({"id": "x", "method": "echo"}, "x", '"jsonrpc" must be exactly "2.0"'),
        (
            {"jsonrpc": "2.0", "id": 1.5, "method": "echo"},
            None,
            '"id" must be a string or an integer',
        ),
        (
            {"jsonrpc": "2.0", "id": None, "method": "echo"},
            None,
            '"id" must be a string or an integer',
        ),
        (
            {"jsonrpc": "2.0", "id": True, "method": "echo"},
            None,
            '"id" must be a string or an integer',
        ),
        (
            {"jsonrpc": "2.0", "id": 1, "method": "echo", "params": "x"},
            1,
            '"params" must be an object or an array',
        ),
        ({"jsonrpc": "2.0", "id": 1, "method": "echo", "extra": 1}, 1, "unknown members: extra"),
        (
            {"jsonrpc": "2.0", "id": 1, "result": 5},
            1,
            "responses are not accepted: this server sends no requests",
        ),
        ({"jsonrpc": "2.0", "method": 1, "params": "bar"}, None, '"method" must be a string'),
        ("just a string", None, "a request must be a JSON object"),
    ],
)
async def test_invalid_requests_are_answered_with_the_id_when_it_can_be_read(
    rpc: Harness, message: Any, reply_id: Any, reason: str
) -> None:
    rpc.send(message)
    assert rpc.sent == [
        {
            "jsonrpc": "2.0",
            "id": reply_id,
            "error": {"code": -32600, "message": f"invalid request: {reason}"},
        }
    ]


async def test_server_notifications_are_camel_case_json_texts(rpc: Harness) -> None:
    notify = Notifier(rpc.protocol.converter)
    notify.attach(lambda body: rpc.sent.append(json.loads(body)))
    notify("run/event", EchoResult(text="hi", note=None))
    notify("$/progress", {"token": 1, "value": {"kind": "end"}})
    assert rpc.sent == [
        {"jsonrpc": "2.0", "method": "run/event", "params": {"text": "hi"}},
        {
            "jsonrpc": "2.0",
            "method": "$/progress",
            "params": {"token": 1, "value": {"kind": "end"}},
        },
    ]


@pytest.mark.parametrize("params", [None, {}])
async def test_omitted_or_empty_params_still_report_required_fields(
    rpc: Harness, params: Any
) -> None:
    for msg_id in (30, 31):  # the second answer comes from the cached empty structuring
        rpc.send(request(msg_id, "echo", params))
        [reply] = await rpc.settle()
        assert reply["error"]["data"]["errors"] == [
            {"path": "text", "message": "required field missing"}
        ]


async def test_omitted_and_empty_params_are_the_same(rpc: Harness) -> None:
    rpc.send(request(32, "slow", {}))
    rpc.send(request(33, "slow"))
    rpc.release.set()
    replies = await rpc.settle()
    assert [r["result"] for r in replies] == [{"released": True}] * 2


NUL_MESSAGE = "the value contains U+0000 (NUL), which no string passed to a process can hold"
SURROGATE_MESSAGE = (
    "the value contains an unpaired surrogate (U+D800), which cannot be stored as UTF-8"
)


async def test_a_nul_or_lone_surrogate_anywhere_in_params_is_invalid_params_with_every_path(
    rpc: Harness,
) -> None:
    rpc.send(
        request(
            1,
            "nested",
            {
                "text": "a\ud800b",
                "items": ["ok", "x\x00", "\udfff"],
                "env": {"GOOD": "v", "BAD\x00NAME": "v", "FOO": "\ud800"},
                "extra": {"deep": [{"value": "\x00"}], "pair": "\U0001f600"},
            },
        )
    )
    [reply] = await rpc.settle()
    assert reply["error"]["code"] == -32602
    assert reply["error"]["data"]["errors"] == [
        {"path": "text", "message": SURROGATE_MESSAGE},
        {"path": "items[1]", "message": NUL_MESSAGE},
        {"path": "items[2]", "message": SURROGATE_MESSAGE.replace("D800", "DFFF")},
        {
            "path": "env.BAD\\u0000NAME",
            "message": "the name contains U+0000 (NUL), which no string passed to a process "
            "can hold",
        },
        {"path": "env.FOO", "message": SURROGATE_MESSAGE},
        {"path": "extra.deep[0].value", "message": NUL_MESSAGE},
    ]
    assert rpc.cancelled == []  # the handler never ran


async def test_a_paired_surrogate_and_control_characters_are_ordinary_text(rpc: Harness) -> None:
    text = "\U0001f600 \x01\x1b[31m\x7f\t\r"
    rpc.send(request(1, "nested", {"text": text, "extra": {"k": [text]}}))
    assert await rpc.settle() == [{"jsonrpc": "2.0", "id": 1, "result": {"text": text}}]


async def test_a_lone_surrogate_in_an_id_or_method_name_gets_one_well_formed_answer(
    rpc: Harness,
) -> None:
    rpc.send(request("id-\ud800", "echo", {"text": "x"}))
    rpc.send(request(2, "no-\ud800"))
    rpc.send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": "\ud800"}})
    replies = await rpc.settle()
    assert sorted(replies, key=lambda reply: str(reply["id"])) == [
        {
            "jsonrpc": "2.0",
            "id": 2,
            # Quoted escaped, so the message is UTF-8 a strict parser takes; the id
            # goes back exactly as it came, for the client to match.
            "error": {"code": -32601, "message": "method not found: no-\\ud800"},
        },
        {"jsonrpc": "2.0", "id": "id-\ud800", "result": {"text": "x"}},
    ]


async def test_params_may_carry_a_meta_object_which_is_ignored(rpc: Harness) -> None:
    rpc.send(request(1, "echo", {"text": "ab", "_meta": {"traceId": "t-1", "n": [1]}}))
    rpc.send(request(2, "slow", {"_meta": {}}))
    await loop_turns(3)
    rpc.release.set()
    assert await rpc.settle() == [
        {"jsonrpc": "2.0", "id": 1, "result": {"text": "ab"}},
        {"jsonrpc": "2.0", "id": 2, "result": {"released": True}},
    ]
    assert rpc.echoed == [EchoParams(text="ab")]


@pytest.mark.parametrize("meta", [None, "x", 1, [], True])
async def test_a_meta_that_is_not_an_object_is_invalid_params(rpc: Harness, meta: Any) -> None:
    rpc.send(request(1, "echo", {"text": "ab", "_meta": meta}))
    [reply] = await rpc.settle()
    assert reply["error"]["code"] == -32602
    assert reply["error"]["data"]["errors"][0]["path"] == "_meta"
    assert reply["error"]["data"]["errors"][0]["message"].startswith("expected an object, got ")
    assert rpc.echoed == []


async def test_meta_does_not_make_other_unknown_fields_welcome(rpc: Harness) -> None:
    rpc.send(request(1, "echo", {"text": "ab", "_meta": {}, "repeatCont": 2, "meta": {}}))
    [reply] = await rpc.settle()
    assert reply["error"]["data"]["errors"] == [
        {"path": "meta", "message": "unknown field"},
        {"path": "repeatCont", "message": "unknown field (did you mean repeatCount?)"},
    ]


async def test_meta_is_read_only_at_the_top_of_params(rpc: Harness) -> None:
    rpc.send(request(1, "nested", {"text": "a", "extra": {"_meta": 1}}))
    assert (await rpc.settle())[0]["result"] == {"text": "a"}  # a free-form object holds it
