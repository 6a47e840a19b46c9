"""Params as the wire carries them, refused at the call when the server would refuse them.

A wire type's fields are not checked when it is built: `SpawnParams(command="echo hi")`
holds a string where a sequence of strings is wanted, and unstructured as it is, the
string would go out split into letters (`["e", "c", ...]`), a command the server would
then try to start. So the params are written with strings kept whole and read back as
the server reads them (`make_converter`, unknown keys refused): whatever does not fit
is `InvalidParams` at once, with the server's own message and `data.errors` (-32602).
"""

from __future__ import annotations

from typing import Any

import attrs
import cattrs

from subagent_host.client.errors import InvalidParams
from subagent_host.rpc import codes
from subagent_host.rpc.param_problems import (
    STRUCTURE_ERRORS,
    ParamErrors,
    param_problems,
    summary,
)
from subagent_host.rpc.wire import make_converter

# The field types a bare string must not stand for: a string there is sent as a string,
# for the reading below to refuse.
_STRINGS: tuple[object, ...] = (tuple[str, ...], tuple[str, ...] | None)


class ParamsWriter:
    """One client's writer of params (its converters, built once)."""

    def __init__(self) -> None:
        self._writer = make_converter(forbid_extra_keys=False)
        self._writer.register_unstructure_hook_func(lambda t: t in _STRINGS, _strings)
        self._reader: cattrs.Converter = make_converter()

    def write(self, params: object) -> Any:
        """`params` as JSON; `InvalidParams` (nothing sent) if the server would refuse it."""
        raw = self._writer.unstructure(params)
        if attrs.has(type(params)):
            try:
                self._reader.structure(raw, type(params))
            except STRUCTURE_ERRORS as exc:
                problems = param_problems(exc)
                raise InvalidParams(
                    codes.INVALID_PARAMS,
                    summary(problems),
                    self._writer.unstructure(ParamErrors(tuple(problems))),
                ) from None
        return raw


def _strings(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    return list(value)
