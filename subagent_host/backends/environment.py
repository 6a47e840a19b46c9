"""The environment a child gets: an allowlist of the server's own, plus what it is given.

CONTRACT §7: PATH, HOME, LANG, LC_*, TERM, TMPDIR, USER, SHELL (and what each
backend documents it needs), then the spawn's `env`, then the markers the
supervisor relies on. Nothing else of the server's environment (tokens, keys)
reaches a child unless the spawn passes it explicitly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from subagent_host.backends.supervisor import RUN_MARKER

ALLOWED: Final = frozenset({"PATH", "HOME", "LANG", "TERM", "TMPDIR", "USER", "SHELL"})
ALLOWED_PREFIXES: Final = ("LC_",)
DEPTH_VARIABLE: Final = "SUBAGENT_HOST_DEPTH"
LEAF_VARIABLE: Final = "PI_AGENT_LEAF"


def child_environment(
    server_env: Mapping[str, str],
    *,
    backend_allowed: Iterable[str] = (),
    extra: Mapping[str, str],
    run_id: str,
    depth: int,
) -> dict[str, str]:
    """Build a child's whole environment; the markers always win over `extra`."""
    allowed = ALLOWED | frozenset(backend_allowed)
    env = {
        name: value
        for name, value in server_env.items()
        if name in allowed or name.startswith(ALLOWED_PREFIXES)
    }
    env.update(extra)
    env[RUN_MARKER] = run_id
    env[DEPTH_VARIABLE] = str(depth + 1)
    env[LEAF_VARIABLE] = "1"
    return env
