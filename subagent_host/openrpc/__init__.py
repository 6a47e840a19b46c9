"""The protocol's OpenRPC 1.3 document, generated from the wire types and the method table.

`subagent-host schema` prints it; `schema/openrpc.json` is that output, committed.
Nothing of the server imports this package: it is loaded by the `schema`
command, by the tests and by tools that check messages (`check.py`).
"""

from __future__ import annotations

import json
from typing import Any


def document() -> dict[str, Any]:
    """The document as JSON values."""
    # Imported here: the document needs the method table (and with it the server's
    # dispatch), which the MCP face's tool schemas (`schemas.py`) do not.
    from subagent_host.openrpc.builder import build_document

    return build_document()


def render() -> str:
    """The document as `subagent-host schema` prints it: indented by 2, one trailing newline."""
    return json.dumps(document(), indent=2, ensure_ascii=False) + "\n"
