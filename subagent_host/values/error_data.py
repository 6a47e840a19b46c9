"""What an error's `data` holds, one type per shape (protocol.md §4).

Raised with the domain errors of `subagent_host.errors` (by handlers, runs and the
store) and written by the wire's one converter (`rpc/wire/`) like any wire type:
camelCase keys, a field whose value is None left out. Imports nothing of ours but
the diagnostics, so every layer may build them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from subagent_host.values.facts import Diagnostic


@attrs.frozen
class RunRef:
    """The run an error is about: -32001 (run not found), -32603 for a run the store
    could not write."""

    run_id: str
    """The run id (or prefix) as the request gave it, or the run's id."""
    reason: str | None = None
    """Why a `stop` cannot reach a run it found: `not-held-here`, `owned-by-another-server`,
    `server-gone`; absent otherwise."""


@attrs.frozen
class RunIdMatches:
    """-32006: a run id prefix that more than one run id starts with."""

    run_id: str
    """The prefix as the request gave it."""
    matches: tuple[str, ...]
    """The run ids it starts."""


@attrs.frozen
class Rejection:
    """-32003 (launch rejected) or -32002 (backend unavailable): every problem found."""

    diagnostics: tuple[Diagnostic, ...]
    """The problems, each an `error` diagnostic."""
    fingerprint: str | None = None
    """The launch's fingerprint, for a `spawn` whose `preflightId` was refused."""


@attrs.frozen
class Refusal:
    """-32003 for a request about a running run (`run/send`, `run/interrupt`, `run/close`,
    `run/permit`) that its state refuses."""

    reason: str
    """`not-interactive`, `not-running` or `not-pending`."""
    run_id: str
    """The run's id."""
    index: int | None = None
    """The child, when the request concerns one."""
    permission_id: str | None = None
    """`run/permit`'s permission."""


@attrs.frozen
class ResumeDenial:
    """-32004: why a resume is refused; nothing was spawned."""

    reason: str
    """`unknown-token`, `expired`, `consumed`, `wrong-session`, `mismatch`, `not-resumable`,
    `override-not-allowed` or `launch-changed`."""
    code: str | None = None
    """Why, where one applies (e.g. `egress-consent-required`, `still-running`)."""
    run_id: str | None = None
    """The run the token was issued for, when it is gone."""
    changed: tuple[str, ...] | None = None
    """`launch-changed`: the items that differ (`executable`, `digest`, `version`, `argv`)."""
    expected: str | Mapping[str, Any] | None = None
    """The approved value: of each changed item (`launch-changed`), or the contract's
    digest (`mismatch`)."""
    actual: str | Mapping[str, Any] | None = None
    """The value now, in the same form as `expected`."""


@attrs.frozen
class QueueFull:
    """-32005 for a `spawn` or `resume`: the children a launch would leave waiting."""

    queued: int
    """Children waiting for a slot now."""
    limit: int
    """At most this many may wait (`--max-queue`)."""


@attrs.frozen
class ConnectionsFull:
    """-32005 on a control socket: the server holds as many connections as it takes."""

    connections: int
    """Control connections open now."""
    limit: int
    """At most this many are held."""
