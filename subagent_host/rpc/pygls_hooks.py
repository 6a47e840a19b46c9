"""Every place this server reaches inside pygls (tested with pygls 2.1.1, pinned `~=2.1.1`).

pygls's public surface (`handle_message`, `notify`, `set_writer`, `fm.feature`)
answers on its own terms: it serializes replies itself (non-strict JSON, a
traceback in an internal error's data), answers through a thread-safe future
per request, one loop turn after the handler returned, and reads
`$/cancelRequest` params as an object. This server needs to answer every
request exactly once, in its own batches and strict JSON, so it keeps pygls's
request bookkeeping (the table of running requests, cancellation, the request
id context) and takes over the edges through the hooks below. Nothing else in
the package names a pygls underscore; `tests/rpc/test_pygls_hooks.py` runs each
hook against the installed pygls, so a release that renames or re-plumbs one
fails a test named after it.

Called (pygls methods and attributes we use):
- `_handle_request(msg_id, method, params)`: enter pygls's request path for a
  request already validated, without `handle_message`'s runtime Protocol
  `isinstance` checks (measurably slow per message).
- `_handle_cancel_notification(msg_id)`: cancel a running request, as pygls does
  for `$/cancelRequest`.
- `_request_futures`: the table of running requests pygls cancels from; a
  request that answers from inside its own task is entered here by us.
- `JsonRPCProtocol._execute_handler`: pygls's own way to run a handler, for any
  handler that is not one of ours.

Overridden (pygls calls them; each forwards to a method the subclass defines):
- `_get_handler(name)` -> `handler_for`: our method table, our -32601 message,
  and a notification-only method refused as a request.
- `_execute_handler(msg_id, handler, callback, args, kwargs)` -> `execute(HandlerCall)`:
  synchronous handlers answered inline with a loop future; async ones answer
  from inside their task.
- `_send_handler_result(future, *, msg_id)` -> `send_outcome`: results and
  errors encoded by us (attrs unstructured, errors mapped in rpc/errors.py).
- `_send_response(msg_id, result, error)` -> `send_pygls_answer`: the answers
  pygls makes itself (a method it could not find).
- `_handle_notification(method, params)` -> `on_notification`: `$/cancelRequest`
  with a malformed id is ignored instead of raising; other notifications run
  with our error reporting.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, NamedTuple

from pygls.protocol import JsonRPCProtocol
from pygls.protocol.json_rpc import MsgId as PyglsMsgId
from pygls.server import JsonRPCServer

Outcome = Future[Any] | asyncio.Future[Any]


class HandlerCall(NamedTuple):
    """What pygls hands `_execute_handler`: a handler to run for a request, and the
    callback that sends its outcome (in pygls's argument order)."""

    msg_id: PyglsMsgId
    handler: Callable[..., Any]
    callback: Callable[[Any], None]
    args: tuple[Any, ...] | None = None
    kwargs: dict[str, Any] | None = None

    def run(self) -> Any:
        """The handler's result for the request's params."""
        return self.handler(*(self.args or ()), **(self.kwargs or {}))


class PyglsHooks(JsonRPCProtocol):
    """pygls's `JsonRPCProtocol` with its internals behind the names listed above."""

    def __init__(self, server: JsonRPCServer, converter: Any) -> None:
        super().__init__(server, converter)
        self.converter = converter  # pygls keeps it as `_converter`; ours is public

    # --- called ----------------------------------------------------------------------

    def start_request(self, msg_id: PyglsMsgId, method: str, params: Any) -> None:
        """Run a validated request through pygls (lookup, request id context, execution)."""
        self._handle_request(msg_id, method, params)

    def cancel_request(self, msg_id: PyglsMsgId) -> None:
        """Cancel a running request, as pygls does for `$/cancelRequest`."""
        self._handle_cancel_notification(msg_id)

    def track(self, msg_id: PyglsMsgId, running: asyncio.Future[Any]) -> None:
        """Enter a running request in pygls's table, so `cancel_request` reaches it."""
        # pygls types the table as concurrent futures; it only ever cancels them.
        self._request_futures[msg_id] = running  # type: ignore[assignment]

    def untrack(self, msg_id: PyglsMsgId) -> None:
        self._request_futures.pop(msg_id, None)

    def running(self) -> list[Outcome]:
        """Every request pygls counts as running."""
        return list(self._request_futures.values())

    def execute_by_pygls(self, call: HandlerCall) -> None:
        """pygls's own way to run a handler (a thread pool, a generator, a future)."""
        JsonRPCProtocol._execute_handler(self, *call)

    # --- what the subclass defines ---------------------------------------------------

    def handler_for(self, name: str) -> Callable[[Any], Any]:
        raise NotImplementedError

    def execute(self, call: HandlerCall) -> None:
        raise NotImplementedError

    def send_outcome(self, future: Outcome, msg_id: PyglsMsgId) -> None:
        raise NotImplementedError

    def send_pygls_answer(self, msg_id: PyglsMsgId, result: Any, error: Any) -> None:
        raise NotImplementedError

    def on_notification(self, method: str, params: Any) -> None:
        raise NotImplementedError

    # --- overridden: pygls calls these -----------------------------------------------

    def _get_handler(self, feature_name: str) -> Callable[[Any], Any]:
        return self.handler_for(feature_name)

    def _execute_handler(
        self,
        msg_id: PyglsMsgId,
        handler: Callable[..., Any],
        callback: Callable[[Any], None],
        args: tuple[Any, ...] | None = None,
        kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.execute(HandlerCall(msg_id, handler, callback, args, kwargs))

    def _send_handler_result(self, future: Outcome, *, msg_id: PyglsMsgId) -> None:
        self.send_outcome(future, msg_id)

    def _send_response(
        self, msg_id: PyglsMsgId, result: Any | None = None, error: Any | None = None
    ) -> None:
        self.send_pygls_answer(msg_id, result, error)

    def _handle_notification(self, method_name: str, params: Any) -> None:
        self.on_notification(method_name, params)
