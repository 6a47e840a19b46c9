"""The MCP client's lines as the SDK's stdio transport reads them, so that every tool
call is answered.

The SDK parses each line with a JSON parser that refuses an escaped lone surrogate
(`"\\ud800"`, valid JSON and a string Python holds). It drops such a line with no
answer, so the call it carried would wait forever. The protocol refuses such a string
in its own words (`-32602`, an unpaired surrogate cannot be stored), so a `tools/call`
whose `arguments` hold one is handed on with its arguments kept aside here: the line the
SDK reads has empty `arguments` and a `_meta` key naming them, and the call's handler
takes them back (`take_arguments`) and calls the server with them as with any other.
The server's refusal is then the call's `isError` result. Every other line goes to the
SDK unchanged.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any, Final

HELD_KEY: Final = "subagent-host/heldArguments"
"""The `_meta` key of a call whose arguments were kept aside: its value names them."""
MAX_HELD: Final = 64
"""Calls whose arguments may wait at once: the SDK hands each call to its handler as
soon as it reads it, so a few are plenty; past this the oldest are forgotten."""
# Any escaped surrogate, paired or not: only such lines can hold a lone one.
_SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89a-fA-F]")


class HeldArguments:
    """The arguments of calls the SDK could not read, until their handler takes them."""

    def __init__(self) -> None:
        self._held: dict[str, dict[str, Any]] = {}
        self._names = (str(n) for n in itertools.count(1))

    def readable(self, line: str) -> str:
        """`line` as the SDK can read it: unchanged, unless it is a `tools/call` whose
        only unreadable strings are in its `arguments`."""
        if not _SURROGATE_ESCAPE.search(line):
            return line
        try:
            message = json.loads(line)
        except ValueError:
            return line  # the SDK says what is wrong with it
        if not isinstance(message, dict) or message.get("method") != "tools/call":
            return line
        params = message.get("params")
        if not isinstance(params, dict):
            return line
        arguments = params.get("arguments")
        if not isinstance(arguments, dict) or not _has_lone_surrogate(arguments):
            return line
        rest = {key: value for key, value in message.items() if key != "params"}
        meta = params.get("_meta")
        if _has_lone_surrogate(rest) or _has_lone_surrogate(
            {key: value for key, value in params.items() if key not in ("arguments", "_meta")}
        ):
            return line  # no request the SDK can read: nothing to hand on
        name = next(self._names)
        self._held[name] = arguments
        while len(self._held) > MAX_HELD:
            del self._held[next(iter(self._held))]
        kept_meta = meta if isinstance(meta, dict) and not _has_lone_surrogate(meta) else {}
        params = {**params, "arguments": {}, "_meta": {**kept_meta, HELD_KEY: name}}
        return json.dumps({**rest, "params": params})

    def take_arguments(
        self, meta: Mapping[str, Any] | None, given: dict[str, Any]
    ) -> dict[str, Any]:
        """The call's own arguments: those kept aside for it, else `given`."""
        name = meta.get(HELD_KEY) if meta is not None else None
        if not isinstance(name, str):
            return given
        return self._held.pop(name, given)

    async def lines(self, source: AsyncIterable[str]) -> AsyncIterator[str]:
        """Each line of `source`, made readable."""
        async for line in source:
            yield self.readable(line)


def _has_lone_surrogate(value: Any) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_has_lone_surrogate(item) for item in value)
    return False
