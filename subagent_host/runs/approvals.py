"""The rules of approvals: preflight ids and resume tokens, and why one is refused.

Both are single-use, expire, and belong to the session they were issued to; a
preflight id also binds the fingerprint of the launch it approved. These rules
are the domain's: the store reads and marks approvals inside one immediate
transaction and asks this module whether to honour one; handlers only map a
`Refusal` to their reply.

Neither is issued by a server whose history is in memory only: an approval is
a promise about a stored launch that another server may be asked to keep, so
without durable storage `preflight` gives no `preflightId`, and
`spawn {preflightId}`, `preflight {resume}` and `resume` are refused with
PERSISTENCE_UNAVAILABLE.
"""

from __future__ import annotations

import secrets
from datetime import datetime
from typing import Final

import attrs

from subagent_host.values.json_values import JsonValue

TOKEN_BYTES: Final = 32  # 256 bits

PERSISTENCE_UNAVAILABLE: Final = "persistence-unavailable"


@attrs.frozen
class Refusal:
    """Why an approval is not honoured: a code the client sees, and a sentence."""

    code: str
    message: str


def persistence_problem(durable: bool, needs: str) -> str | None:
    """Why `needs` cannot be had without durable storage (a sentence), or None."""
    if durable:
        return None
    return (
        f"{needs} need durable storage, and this server keeps its run history in memory "
        "only: its state directory cannot be used (its log says why)"
    )


def new_secret(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(TOKEN_BYTES)


# --- preflight ids ---------------------------------------------------------------------


@attrs.frozen
class PreflightApproval:
    """What a preflight id was issued for, as stored."""

    session_id: str
    fingerprint: str
    expires_at: datetime
    consumed: bool


def preflight_refusal(
    found: PreflightApproval | None, session_id: str, fingerprint: str, now: datetime
) -> Refusal | None:
    """Why this spawn may not use the preflight id (None: it may, once)."""
    if found is None or found.session_id != session_id:
        return Refusal("unknown-preflight", "no preflight of this session has that id")
    if found.consumed:
        return Refusal("preflight-consumed", "that preflight was already used by a spawn")
    if found.expires_at <= now:
        return Refusal("preflight-expired", "that preflight has expired: run preflight again")
    if found.fingerprint != fingerprint:
        return Refusal(
            "preflight-mismatch",
            "this spawn would run something else than the preflight approved",
        )
    return None


# --- resume tokens ---------------------------------------------------------------------


@attrs.frozen
class ResumeGrant:
    """What a resume token was issued for."""

    session_id: str
    run_id: str
    index: int
    contract_digest: str
    follow_up_digest: str
    message: str
    overrides: dict[str, JsonValue]
    expires_at: datetime
    consumed: bool


def token_refusal(found: ResumeGrant | None, session_id: str, now: datetime) -> Refusal | None:
    """Why the token cannot be used by this session now (None: it may, once).

    The codes are `resume`'s `data.reason` values (protocol.md §4).
    """
    if found is None:
        return Refusal("unknown-token", "no such token")
    if found.session_id != session_id:
        return Refusal("wrong-session", "the token was issued to another session")
    if found.consumed:
        return Refusal("consumed", "the token was already used")
    if found.expires_at <= now:
        return Refusal("expired", "the token has expired: run preflight {resume} again")
    return None
