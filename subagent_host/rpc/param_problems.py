"""What is wrong with params, as `data.errors` says it: `{path, message}` with camelCase paths.

Plain values and a cattrs failure flattened into them; no pygls, so a face that reads
arguments as the server reads params (the MCP face) says what is wrong in the same
words without loading the server's dispatch. `rpc/errors.py` wraps them in the -32602
error.
"""

from __future__ import annotations

import difflib
from typing import Final

import attrs
from cattrs.errors import (
    BaseValidationError,
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
)

from subagent_host.rpc.wire import WireValueError
from subagent_host.values.wire_names import wire_name, wire_name_of

# What reading params as a wire type raises for params that do not fit it.
STRUCTURE_ERRORS: Final = (BaseValidationError, ForbiddenExtraKeysError, WireValueError)


@attrs.frozen
class ParamProblem:
    """One entry of `data.errors` in a -32602 answer: where (camelCase) and what."""

    path: str
    """Where, relative to `params` (`""` is `params` itself), e.g. `tasks[2].timeoutMs`."""
    message: str
    """What is wrong there, for a person."""


@attrs.frozen
class ParamErrors:
    """A -32602 answer's `data`: every problem found in the params."""

    errors: tuple[ParamProblem, ...]
    """Each problem, in the order found."""


def summary(problems: list[ParamProblem]) -> str:
    """The first few problems in one line: `invalid params: tasks[2].timeoutMs: ...`.

    A problem of params as a whole (path "") is said as it is: "invalid params: params:
    ..." would name them twice."""
    return "invalid params: " + "; ".join(
        f"{p.path}: {p.message}" if p.path else p.message for p in problems[:3]
    )


def param_problems(exc: BaseException, path: str = "") -> list[ParamProblem]:
    """Flatten a cattrs structuring failure into camelCase-path problems."""
    if isinstance(exc, ClassValidationError):
        problems: list[ParamProblem] = []
        with_notes, without = exc.group_exceptions()
        for inner, note in with_notes:
            problems += param_problems(inner, _join(path, wire_name_of(exc.cl, note.name)))
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
        known = [wire_name(a) for a in attrs.fields(exc.cl)] if attrs.has(exc.cl) else []
        return [
            ParamProblem(_join(path, key), "unknown field" + did_you_mean(key, known))
            for key in sorted(exc.extra_fields)
        ]
    if isinstance(exc, WireValueError):
        return [ParamProblem(path, str(exc))]
    if isinstance(exc, KeyError):
        return [ParamProblem(path, "required field missing")]
    if isinstance(exc, AttributeError | TypeError):
        return [ParamProblem(path, "expected an object")]
    return [ParamProblem(path, "invalid value")]


def did_you_mean(key: str, known: list[str]) -> str:
    """` (did you mean cwd?)` when `key` is close to one or two of `known`; else empty."""
    close = difflib.get_close_matches(key, known, n=2, cutoff=0.75)
    return f" (did you mean {' or '.join(close)}?)" if close else ""


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name
