"""The JSON-RPC error codes (protocol.md §4), as the wire layer reads them.

Derived from the one table, `subagent_host.errors` (each domain error class carries
its code and meaning): `CODES` maps each domain error to its code; `MEANINGS` says
in a few words what each code means. Plain values only: no pygls, no lsprotocol,
so the client library (`client/errors.py`) reads the very same table as the
server's error mapping (`rpc/errors.py`) without loading the server.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from subagent_host.errors import (
    DOMAIN_ERRORS,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    JSONRPC_MEANINGS,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    REQUEST_CANCELLED,
    HostError,
)

__all__ = [
    "CODES",
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "MEANINGS",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "REQUEST_CANCELLED",
]

CODES: Final[Mapping[type[HostError], int]] = {kind: kind.CODE for kind in DOMAIN_ERRORS}

# What each code means, in a few words (protocol.md §4; the schema's error `message`s).
MEANINGS: Final[Mapping[int, str]] = {
    **JSONRPC_MEANINGS,
    **{kind.CODE: kind.MEANING for kind in DOMAIN_ERRORS},
}
