"""Approvals kept in the store: preflight ids and resume tokens. Store-thread functions.

Both are single-use and expire. A resume token is at least 128 random bits,
given to the client once and stored only as its SHA-256; it is consumed by one
conditional UPDATE inside an immediate transaction, so of two concurrent
resumes with one token exactly one gets it (RELIABILITY.md).

Neither is issued by a server whose history is in memory only (`Store.durable`
false): an approval is a promise about a stored launch that another server
may be asked to keep, so without durable storage `preflight` gives no
`preflightId`, and `spawn {preflightId}`, `preflight {resume}` and `resume`
are refused with PERSISTENCE_UNAVAILABLE.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from datetime import datetime, timedelta
from typing import Any, Final

import attrs

from subagent_host.runs.store import Store

TOKEN_BYTES: Final = 32  # 256 bits

PERSISTENCE_UNAVAILABLE: Final = "persistence-unavailable"


def persistence_problem(store: Store, needs: str) -> str | None:
    """Why `needs` cannot be had from this store (a sentence), or None when it can."""
    if store.durable:
        return None
    return (
        f"{needs} need durable storage, and this server keeps its run history in memory "
        "only: its state directory cannot be used (its log says why)"
    )


def new_secret(prefix: str) -> str:
    return prefix + secrets.token_urlsafe(TOKEN_BYTES)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


# --- preflight ids ---------------------------------------------------------------------


def save_preflight(
    store: Store,
    preflight_id: str,
    session_id: str,
    fingerprint: str,
    now: datetime,
    expires_at: datetime,
) -> None:
    with store.immediate() as db:
        db.execute(
            "INSERT INTO preflights (preflight_id, session_id, fingerprint, created_at,"
            " expires_at) VALUES (?, ?, ?, ?, ?)",
            (preflight_id, session_id, fingerprint, now.isoformat(), expires_at.isoformat()),
        )
        # Kept a day past expiry, so a late spawn hears "expired", not "unknown".
        db.execute(
            "DELETE FROM preflights WHERE expires_at < ?",
            ((now - timedelta(days=1)).isoformat(),),
        )


def take_preflight(
    store: Store, preflight_id: str, session_id: str, fingerprint: str, now: datetime
) -> str | None:
    """Consume the preflight if the launch matches it; else say why not (a diagnostic code)."""
    with store.immediate() as db:
        row = db.execute(
            "SELECT session_id, fingerprint, expires_at, consumed FROM preflights"
            " WHERE preflight_id = ?",
            (preflight_id,),
        ).fetchone()
        if row is None or row[0] != session_id:
            return "unknown-preflight"
        if row[3]:
            return "preflight-consumed"
        if datetime.fromisoformat(row[2]) <= now:
            return "preflight-expired"
        if row[1] != fingerprint:
            return "preflight-mismatch"
        db.execute(
            "UPDATE preflights SET consumed = 1 WHERE preflight_id = ? AND consumed = 0",
            (preflight_id,),
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
    overrides: dict[str, Any]
    expires_at: datetime
    consumed: bool


def save_token(store: Store, token: str, grant: ResumeGrant, now: datetime) -> None:
    with store.immediate() as db:
        db.execute(
            "INSERT INTO resume_tokens (token_hash, session_id, run_id, idx, contract_digest,"
            " follow_up_digest, message, overrides, created_at, expires_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                token_hash(token),
                grant.session_id,
                grant.run_id,
                grant.index,
                grant.contract_digest,
                grant.follow_up_digest,
                grant.message,
                json.dumps(grant.overrides, sort_keys=True),
                now.isoformat(),
                grant.expires_at.isoformat(),
            ),
        )


def find_token(store: Store, token: str) -> ResumeGrant | None:
    row = store.db.execute(
        "SELECT session_id, run_id, idx, contract_digest, follow_up_digest, message, overrides,"
        " expires_at, consumed FROM resume_tokens WHERE token_hash = ?",
        (token_hash(token),),
    ).fetchone()
    if row is None:
        return None
    return ResumeGrant(
        session_id=row[0],
        run_id=row[1],
        index=row[2],
        contract_digest=row[3],
        follow_up_digest=row[4],
        message=row[5],
        overrides=json.loads(row[6]),
        expires_at=datetime.fromisoformat(row[7]),
        consumed=bool(row[8]),
    )


def consume_token(store: Store, token: str, now: datetime) -> bool:
    """Mark the token used; False if it was already (one conditional update)."""
    with store.immediate() as db:
        cursor = db.execute(
            "UPDATE resume_tokens SET consumed = 1, consumed_at = ?"
            " WHERE token_hash = ? AND consumed = 0",
            (now.isoformat(), token_hash(token)),
        )
        return cursor.rowcount == 1
