"""Plain values that configuration, planning and the wire all name: the session-id rule, the
framings, how a field is spelled on the wire.

Imports nothing of ours (an import-linter contract keeps it so), so
`settings/` and `config.py` can check a session id or name a framing without
importing the wire layer (`rpc/`), and `rpc/` uses the very same values.
"""

from __future__ import annotations

import enum
import re
from typing import Final

# Session ids are chosen by clients, stored, and shown in logs: keep them plain.
SESSION_ID_PATTERN: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
SESSION_ID_RULE: Final = "1-128 characters of A-Z a-z 0-9 . _ : -, starting with a letter or digit"


class Framing(enum.StrEnum):
    """A concrete framing of messages on stdio (protocol.md §2); `auto` is not one:
    the server resolves it from the first byte a client sends (rpc/framing.py)."""

    LSP = "lsp"
    NDJSON = "ndjson"


def camel_case(name: str) -> str:
    """`enforced_timeout_ms` -> `enforcedTimeoutMs`; `as_` -> `as` (a Python keyword)."""
    head, *rest = name.removesuffix("_").split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)
