"""The environment a child gets: an allowlist of the server's own, plus what it is given.

protocol.md §8.3: PATH, HOME, LANG, the locale categories, TERM, TMPDIR, USER, SHELL
(and what each backend documents it needs), then the spawn's `env`, then the
markers the supervisor relies on. Nothing else of the server's environment
(tokens, keys) reaches a child unless the spawn passes it explicitly.

The locale variables are named one by one, not as `LC_*`: any name can start
with `LC_` (`LC_SECRET=...`), and a prefix would pass it to every child.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from subagent_host.backends.supervisor import RUN_MARKER
from subagent_host.values import DEPTH_VARIABLE

# POSIX's categories and LC_ALL, then glibc's own.
LOCALE_CATEGORIES: Final = frozenset(
    {
        "LC_ALL",
        "LC_CTYPE",
        "LC_NUMERIC",
        "LC_TIME",
        "LC_COLLATE",
        "LC_MONETARY",
        "LC_MESSAGES",
        "LC_PAPER",
        "LC_NAME",
        "LC_ADDRESS",
        "LC_TELEPHONE",
        "LC_MEASUREMENT",
        "LC_IDENTIFICATION",
    }
)
ALLOWED: Final = (
    frozenset({"PATH", "HOME", "LANG", "TERM", "TMPDIR", "USER", "SHELL"}) | LOCALE_CATEGORIES
)
LEAF_VARIABLE: Final = "PI_AGENT_LEAF"


def allowed_environment(
    server_env: Mapping[str, str], backend_allowed: Iterable[str] = ()
) -> dict[str, str]:
    """The part of the server's environment a child (or a version probe) may see."""
    allowed = ALLOWED | frozenset(backend_allowed)
    return {name: value for name, value in server_env.items() if name in allowed}


def child_environment(
    server_env: Mapping[str, str],
    *,
    backend_allowed: Iterable[str] = (),
    extra: Mapping[str, str],
    run_id: str,
    depth: int,
) -> dict[str, str]:
    """Build a child's whole environment; the markers always win over `extra`."""
    env = allowed_environment(server_env, backend_allowed)
    env.update(extra)
    env[RUN_MARKER] = run_id
    env[DEPTH_VARIABLE] = str(depth + 1)
    env[LEAF_VARIABLE] = "1"
    return env
