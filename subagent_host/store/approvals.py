"""Approvals in SQL: preflight ids and resume tokens. Store-thread functions.

A resume token is at least 128 random bits, given to the client once and
stored only as its SHA-256. Taking a preflight id or redeeming a token reads
it, asks the domain's rules (runs/approvals.py) and marks it used in one
immediate transaction, with a conditional UPDATE: of two concurrent uses
exactly one gets it (RELIABILITY.md).
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timedelta

from subagent_host.runs.approvals import (
    PreflightApproval,
    Refusal,
    ResumeGrant,
    preflight_refusal,
    token_refusal,
)
from subagent_host.store.database import Database

# A used or expired preflight row is kept this long, so a late spawn hears
# "expired", not "unknown".
PREFLIGHT_KEPT = timedelta(days=1)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


# --- preflight ids ---------------------------------------------------------------------


def save_preflight(
    store: Database,
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
        db.execute(
            "DELETE FROM preflights WHERE expires_at < ?", ((now - PREFLIGHT_KEPT).isoformat(),)
        )


def take_preflight(
    store: Database, preflight_id: str, session_id: str, fingerprint: str, now: datetime
) -> Refusal | None:
    """Consume the preflight if the rules allow this launch; else say why not."""
    with store.immediate() as db:
        row = db.execute(
            "SELECT session_id, fingerprint, expires_at, consumed FROM preflights"
            " WHERE preflight_id = ?",
            (preflight_id,),
        ).fetchone()
        found = (
            PreflightApproval(row[0], row[1], datetime.fromisoformat(row[2]), bool(row[3]))
            if row is not None
            else None
        )
        refusal = preflight_refusal(found, session_id, fingerprint, now)
        if refusal is None:
            db.execute(
                "UPDATE preflights SET consumed = 1 WHERE preflight_id = ? AND consumed = 0",
                (preflight_id,),
            )
    return refusal


# --- resume tokens ---------------------------------------------------------------------


def save_token(store: Database, token: str, grant: ResumeGrant, now: datetime) -> None:
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


def find_token(store: Database, token: str) -> ResumeGrant | None:
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


def check_token(
    store: Database, token: str, session_id: str, now: datetime
) -> ResumeGrant | Refusal:
    """What the token grants this session now, or why it grants nothing."""
    found = find_token(store, token)
    refusal = token_refusal(found, session_id, now)
    if refusal is not None:
        return refusal
    assert found is not None
    return found


def redeem_token(store: Database, token: str, session_id: str, now: datetime) -> Refusal | None:
    """Mark the token used if the rules still allow it (one conditional update)."""
    with store.immediate() as db:
        refusal = token_refusal(find_token(store, token), session_id, now)
        if refusal is not None:
            return refusal
        cursor = db.execute(
            "UPDATE resume_tokens SET consumed = 1, consumed_at = ?"
            " WHERE token_hash = ? AND consumed = 0",
            (now.isoformat(), token_hash(token)),
        )
    # Under the write lock nobody can have taken it since the read: kept as a guard.
    return None if cursor.rowcount == 1 else Refusal("consumed", "the token was already used")
