"""JSON-RPC error objects: the one place a failure becomes a wire error.

Domain code raises the exceptions of `subagent_host.errors`: each class carries its
protocol.md §4 code (`CODE`), and its `data` is a typed value the dispatcher's
converter writes. Anything else is an internal error: the client gets a short
message, the traceback goes to the log only.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from pygls.exceptions import JsonRpcException

from subagent_host.errors import HostError
from subagent_host.rpc.codes import INTERNAL_ERROR, INVALID_PARAMS
from subagent_host.rpc.param_problems import ParamErrors, ParamProblem, did_you_mean, summary
from subagent_host.rpc.unsafe_text import escape_unsafe

logger = logging.getLogger(__name__)


class InvalidParams(JsonRpcException):
    """Params that do not fit the method; `problems` lists every one found."""

    CODE = INVALID_PARAMS
    MESSAGE = "invalid params"

    def __init__(self, problems: list[ParamProblem]) -> None:
        super().__init__(
            message=summary(problems),
            data=ParamErrors(tuple(problems)),
        )


def error_object(code: int, message: str, data: Any = None) -> dict[str, Any]:
    """The `error` member of a response.

    A message may quote the request (an unknown method's name, unknown members):
    its lone surrogates and NULs are escaped, so the reply stays valid UTF-8.
    """
    error: dict[str, Any] = {"code": code, "message": escape_unsafe(message)}
    if data is not None:
        error["data"] = data
    return error


def error_for_exception(exc: BaseException) -> dict[str, Any]:
    """Map anything a handler raised to an `error` member, never leaking a traceback."""
    if isinstance(exc, HostError):  # each class carries its code (subagent_host/errors.py)
        return error_object(exc.CODE, exc.message, exc.data)
    if isinstance(exc, JsonRpcException):
        return error_object(exc.code, exc.message, exc.data)
    logger.error("internal error", exc_info=exc)
    return error_object(INTERNAL_ERROR, f"internal error ({type(exc).__name__})")


def method_suggestion(method: str, known: Iterable[str]) -> str:
    """` (did you mean spawn?)` for a method named in another case or with `.` or `_`
    for `/` (`Spawn`, `agents.list`), or close to a known one; else empty."""
    names = sorted(name for name in known if name != method)
    by_shape = {_method_shape(name): name for name in names}
    if (same := by_shape.get(_method_shape(method))) is not None:
        return f" (did you mean {same}?)"
    return did_you_mean(method, names)


def _method_shape(name: str) -> str:
    return name.lower().replace(".", "/").replace("_", "/")
