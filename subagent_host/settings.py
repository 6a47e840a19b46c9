"""What a `--config` file says about backends: which program each one runs.

    {"backends": {"pi": {"executable": "/opt/pi/bin/pi"}, "claude": {"executable": "claude"}}}

The server reads the file once at start and never writes it. A problem (an
unreadable file, bad JSON, an unknown backend, a value that is not a non-empty
string) is a warning naming the file and the field, and that entry keeps its
default: a bad line in a config file never stops the server. (The rest of the
configuration files, `subagents.json`, lands with agent definitions.)
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Final

AGENT_BACKENDS: Final = ("pi", "claude", "codex")


def backend_executables(path: Path | None) -> tuple[dict[str, str], list[str]]:
    """The executables the file sets, by backend id, and a warning per problem."""
    if path is None:
        return {}, []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        return {}, [f"{path}: cannot read it ({exc}); its settings are ignored"]
    if not isinstance(data, Mapping):
        return {}, [f"{path}: not a JSON object; its settings are ignored"]
    backends = data.get("backends")
    if backends is None:
        return {}, []
    if not isinstance(backends, Mapping):
        return {}, [f"{path}: backends must be an object; ignored"]
    found: dict[str, str] = {}
    warnings: list[str] = []
    for name, entry in backends.items():
        where = f"{path}: backends.{name}"
        if name not in AGENT_BACKENDS:
            warnings.append(f"{where}: unknown backend (known: {', '.join(AGENT_BACKENDS)})")
            continue
        executable = entry.get("executable") if isinstance(entry, Mapping) else None
        if not isinstance(executable, str) or not executable or "\0" in executable:
            warnings.append(f"{where}.executable: must be a non-empty string; default kept")
            continue
        found[name] = executable
    return found, warnings
