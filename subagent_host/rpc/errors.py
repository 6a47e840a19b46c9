"""JSON-RPC error objects: the one place a failure becomes a wire error.

Domain code raises the code-free exceptions of `subagent_host.errors`; `CODES`
(`rpc/codes.py`, the one table of codes) maps each to its protocol.md §4 code.
Anything unmapped is an internal error: the client gets a short message, the
traceback goes to the log only.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Iterable
from typing import Any

import attrs
from cattrs.errors import (
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
)
from pygls.exceptions import JsonRpcException

from subagent_host.errors import HostError
from subagent_host.rpc.codes import CODES, INTERNAL_ERROR, INVALID_PARAMS
from subagent_host.rpc.wire import WireValueError, camel_case

logger = logging.getLogger(__name__)


@attrs.frozen
class ParamProblem:
    """One entry of `data.errors` in a -32602 answer: where (camelCase) and what."""

    path: str
    """Where, relative to `params` (`""` is `params` itself), e.g. `tasks[2].timeoutMs`."""
    message: str
    """What is wrong there, for a person."""


class InvalidParams(JsonRpcException):
    """Params that do not fit the method; `problems` lists every one found."""

    CODE = INVALID_PARAMS
    MESSAGE = "invalid params"

    def __init__(self, problems: list[ParamProblem]) -> None:
        summary = "; ".join(f"{p.path or 'params'}: {p.message}" for p in problems[:3])
        super().__init__(
            message=f"invalid params: {summary}",
            data={"errors": [attrs.asdict(p) for p in problems]},
        )


def error_object(code: int, message: str, data: Any = None) -> dict[str, Any]:
    """The `error` member of a response."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return error


def error_for_exception(exc: BaseException) -> dict[str, Any]:
    """Map anything a handler raised to an `error` member, never leaking a traceback."""
    if isinstance(exc, HostError):
        for kind, code in CODES.items():
            if isinstance(exc, kind):
                return error_object(code, exc.message, exc.data)
    if isinstance(exc, JsonRpcException):
        return error_object(exc.code, exc.message, exc.data)
    logger.error("internal error", exc_info=exc)
    return error_object(INTERNAL_ERROR, f"internal error ({type(exc).__name__})")


def param_problems(exc: BaseException, path: str = "") -> list[ParamProblem]:
    """Flatten a cattrs structuring failure into camelCase-path problems."""
    if isinstance(exc, ClassValidationError):
        problems: list[ParamProblem] = []
        with_notes, without = exc.group_exceptions()
        for inner, note in with_notes:
            problems += param_problems(inner, _join(path, camel_case(note.name)))
        for inner in without:
            problems += param_problems(inner, path)
        return problems
    if isinstance(exc, IterableValidationError):
        problems = []
        with_index, without = exc.group_exceptions()
        for inner, index_note in with_index:
            problems += param_problems(inner, f"{path}[{index_note.index}]")
        for inner in without:
            problems += param_problems(inner, path)
        return problems
    if isinstance(exc, ForbiddenExtraKeysError):
        known = [camel_case(a.name) for a in attrs.fields(exc.cl)] if attrs.has(exc.cl) else []
        return [
            ParamProblem(_join(path, key), "unknown field" + _did_you_mean(key, known))
            for key in sorted(exc.extra_fields)
        ]
    if isinstance(exc, WireValueError):
        return [ParamProblem(path, str(exc))]
    if isinstance(exc, KeyError):
        return [ParamProblem(path, "required field missing")]
    if isinstance(exc, AttributeError | TypeError):
        return [ParamProblem(path, "expected an object")]
    return [ParamProblem(path, "invalid value")]


def method_suggestion(method: str, known: Iterable[str]) -> str:
    """` (did you mean spawn?)` for a method named in another case or with `.` or `_`
    for `/` (`Spawn`, `agents.list`), or close to a known one; else empty."""
    names = sorted(name for name in known if name != method)
    by_shape = {_method_shape(name): name for name in names}
    if (same := by_shape.get(_method_shape(method))) is not None:
        return f" (did you mean {same}?)"
    return _did_you_mean(method, names)


def _method_shape(name: str) -> str:
    return name.lower().replace(".", "/").replace("_", "/")


def _did_you_mean(key: str, known: list[str]) -> str:
    close = difflib.get_close_matches(key, known, n=2, cutoff=0.75)
    return f" (did you mean {' or '.join(close)}?)" if close else ""


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name
