"""Each pygls internal that rpc/pygls_hooks.py relies on, run against the installed pygls.

A pygls release that renames or re-plumbs one of them fails the test named
after it here, rather than the server misbehaving somewhere downstream.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import pytest
from pygls.exceptions import JsonRpcMethodNotFound
from pygls.protocol import JsonRPCNotification, JsonRPCRequestMessage
from pygls.server import JsonRPCServer

from subagent_host.rpc.pygls_hooks import HandlerCall, Outcome, PyglsHooks
from subagent_host.rpc.wire import make_converter


class Recorder(PyglsHooks):
    """Records what pygls calls; runs handlers the plain way."""

    def __init__(self, server: JsonRPCServer, converter: Any) -> None:
        super().__init__(server, converter)
        self.calls: list[tuple[Any, ...]] = []
        self.missing = False

    def handler_for(self, name: str) -> Callable[[Any], Any]:
        self.calls.append(("handler_for", name))
        if self.missing:
            raise JsonRpcMethodNotFound(message=f"no {name}")
        return lambda params: {"echo": params}

    def execute(self, call: HandlerCall) -> None:
        self.calls.append(("execute", call.msg_id, call.args, self.msg_id))
        self.execute_by_pygls(call)

    def send_outcome(self, future: Outcome, msg_id: Any) -> None:
        self.calls.append(("send_outcome", msg_id, future.result()))

    def send_pygls_answer(self, msg_id: Any, result: Any, error: Any) -> None:
        self.calls.append(("send_pygls_answer", msg_id, result, error))

    def on_notification(self, method: str, params: Any) -> None:
        self.calls.append(("on_notification", method, params))


@pytest.fixture
def hooks() -> Recorder:
    protocol = JsonRPCServer(Recorder, make_converter).protocol
    assert isinstance(protocol, Recorder)
    return protocol


def test_handle_request_looks_up_through_get_handler_and_runs_through_execute_handler(
    hooks: Recorder,
) -> None:
    hooks.start_request(7, "echo", {"a": 1})
    assert hooks.calls[:2] == [
        ("handler_for", "echo"),
        # pygls sets the request id in its context before running the handler.
        ("execute", 7, ({"a": 1},), 7),
    ]


def test_the_callback_pygls_hands_execute_handler_is_send_handler_result(
    hooks: Recorder,
) -> None:
    hooks.start_request("r-1", "echo", {"a": 1})
    assert hooks.calls[-1] == ("send_outcome", "r-1", {"echo": {"a": 1}})


def test_pygls_answers_a_method_it_cannot_find_through_send_response(hooks: Recorder) -> None:
    hooks.missing = True
    hooks.start_request(3, "nope", None)
    (_, msg_id, result, error) = hooks.calls[-1]
    assert (msg_id, result, error.code, error.message) == (3, None, -32601, "no nope")


def test_execute_handler_of_pygls_runs_a_plain_function_and_calls_back_with_its_future(
    hooks: Recorder,
) -> None:
    done: list[Future[Any]] = []
    hooks.execute_by_pygls(HandlerCall(1, lambda x: x + 1, done.append, (41,), None))
    assert [future.result() for future in done] == [42]


async def test_handle_cancel_notification_cancels_what_is_in_request_futures(
    hooks: Recorder,
) -> None:
    running: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    hooks.track(5, running)
    assert hooks.running() == [running]
    hooks.cancel_request(5)
    assert running.cancelled() and hooks.running() == []


async def test_request_futures_forgets_an_untracked_request(hooks: Recorder) -> None:
    running: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    hooks.track("a", running)
    hooks.untrack("a")
    hooks.cancel_request("a")  # unknown now: pygls logs and leaves it be
    assert hooks.running() == [] and not running.cancelled()


@pytest.mark.parametrize("method", ["run/detach", "$/cancelRequest"])
def test_pygls_routes_every_notification_through_handle_notification(
    hooks: Recorder, method: str
) -> None:
    # Even $/cancelRequest, whose params pygls itself would read as an object.
    hooks.handle_message(JsonRPCNotification(method=method, jsonrpc="2.0", params={"id": 1}))
    assert hooks.calls == [("on_notification", method, {"id": 1})]


def test_handle_message_takes_a_request_to_handle_request(hooks: Recorder) -> None:
    message = JsonRPCRequestMessage(id=9, method="echo", jsonrpc="2.0", params={})
    hooks.handle_message(message)
    assert hooks.calls[-1] == ("send_outcome", 9, {"echo": {}})


def test_the_protocol_keeps_the_converter_the_server_was_given(hooks: Recorder) -> None:
    assert hooks.converter.unstructure({"a": (1, 2)}) == {"a": [1, 2]}
