"""Launching and continuing: `spawn`, `preflight` and `resume` (protocol.md §8-§15)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

import attrs

from subagent_host.planning.request import LaunchRequest
from subagent_host.planning.views import Contract, NormalizedPlan, Receipts
from subagent_host.rpc.wire.basics import MsgToken
from subagent_host.values import Mode
from subagent_host.values.choices import OneOf
from subagent_host.values.facts import Diagnostic


@attrs.frozen
class SpawnParams(LaunchRequest):
    """A launch request (checked by `planning`), and what only `spawn` itself reads."""

    preflight_id: str | None = None
    """A preflight's id: the launch must be exactly what it approved (protocol.md §14.3). Required
    when the server runs with `--require-preflight`."""
    work_done_token: MsgToken | None = None
    """A string or an integer: LSP `$/progress` begin, report and end are sent under it."""


@attrs.frozen
class ResumeRequest:
    run_id: str
    """The run: its id, or a unique prefix of at least 8 characters."""
    message: str
    """The follow-up the new attempt is given (an agent child's must hold more than whitespace)."""
    index: int | None = None
    """The child to resume; absent: the first child that did not complete, else the last."""
    overrides: dict[str, Any] | None = None
    """Only `timeoutMs`, `stallTimeoutMs`, `maxTurns`, `maxTokens` and `maxCostUsd`, each
    lowered, never raised, and `access`, narrowed, never widened; anything else is
    `override-not-allowed`."""


@attrs.frozen
class PreflightParams(SpawnParams):
    """A launch to check (the fields of `spawn`), or `resume`: a resume to approve."""

    resume: ResumeRequest | None = None
    """Present: approve a resume of one child of a finished run (protocol.md §15) instead of
    checking a launch."""


@attrs.frozen
class PreflightResult:
    accepted: bool
    """True when the launch or the resume may go ahead; false with at least one `error`
    diagnostic."""
    diagnostics: tuple[Diagnostic, ...]
    """Every finding, each `error`, `warning` or `info`; always sent, empty when there is none."""
    # A launch:
    fingerprint: str | None = None
    """A launch's: `sha256:v1:` and the SHA-256 of its plan's canonical JSON; absent when no plan
    could be made."""
    plan: NormalizedPlan | None = None
    """A launch's normalized plan (protocol.md §14.1); absent when no plan could be made."""
    receipts: Receipts | None = None
    """A launch's: what its children may do and how each limit is enforced (protocol.md §14.2)."""
    preflight_id: str | None = None
    """An accepted launch's id for `spawn {preflightId}`; absent when rejected or when the server's
    history is in memory only."""
    # A resume:
    contract: Contract | None = None
    """An accepted resume's contract: what it would run (protocol.md §15)."""
    contract_digest: str | None = None
    """An accepted resume's: the contract's `sha256:v1:` digest, which the token is bound to."""
    follow_up_digest: str | None = None
    """An accepted resume's: the `sha256:v1:` digest of its `message`, which the token is bound
    to."""
    token: str | None = None
    """An accepted resume's single-use token for `resume {token}`."""
    # Either: when the preflight id or the token stops being accepted.
    expires_at: datetime | None = None
    """When the `preflightId` or the `token` stops being accepted (`--resume-token-ttl-ms` after it
    was issued); sent with either."""


@attrs.frozen
class ResumeParams:
    token: str
    """The single-use token a `preflight {resume}` issued."""
    mode: Annotated[str, OneOf(Mode)] | None = None
    """`background` or `task`; absent: the mode the run's `spawn` answered in (`background` for a
    background member of a mixed `tasks` run), else the configured `default_mode`, else
    `background`."""
