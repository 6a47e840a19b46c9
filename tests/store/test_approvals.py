"""Preflight ids and resume tokens through `RunStore`: the domain's rules, kept on disk."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from subagent_host.backends.supervisor import Supervisor
from subagent_host.runs.approvals import (
    PreflightApproval,
    Refusal,
    ResumeGrant,
    preflight_refusal,
    token_refusal,
)
from subagent_host.runs.state import RunStateMachine, utc_now
from subagent_host.store.run_store import RunStore
from tests.store.test_store import make_run, ticking

TTL = timedelta(minutes=10)
# The moment the rules are checked at: fixed when the module loads, before the cases
# below are made, so that a slow suite never lets a case's approval expire meanwhile.
NOW = utc_now()
FINGERPRINT = "sha256:v1:" + "1" * 64


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[RunStore]:
    """A started store on disk holding one ended run, `r1` of session `s1`."""
    opened = await RunStore.open(tmp_path / "state", history_limit=10)
    assert opened.durable
    supervisor = Supervisor()
    try:
        await (await opened.start(supervisor, grace_ms=0))  # nothing to recover here
        state_machine = RunStateMachine(clock=ticking(), listener=opened.record)
        state_machine.created(make_run("r1"))
        await opened.written()
        yield opened
        await opened.end()
    finally:
        await opened.close()
        supervisor.close()


def grant(session_id: str = "s1", expires_in: timedelta = TTL) -> ResumeGrant:
    return ResumeGrant(
        session_id=session_id,
        run_id="r1",
        index=0,
        contract_digest="sha256:v1:" + "2" * 64,
        follow_up_digest="sha256:v1:" + "3" * 64,
        message="again",
        overrides={"model": "m"},
        expires_at=utc_now() + expires_in,
        consumed=False,
    )


# --- the rules ---------------------------------------------------------------------------


def approval(**changes: object) -> PreflightApproval:
    fields: dict[str, object] = {
        "session_id": "s1",
        "fingerprint": FINGERPRINT,
        "expires_at": NOW + TTL,
        "consumed": False,
        **changes,
    }
    return PreflightApproval(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("found", "code"),
    [
        (None, "unknown-preflight"),
        (approval(session_id="s2"), "unknown-preflight"),
        (approval(consumed=True), "preflight-consumed"),
        (approval(expires_at=NOW - timedelta(seconds=1)), "preflight-expired"),
        (approval(fingerprint="sha256:v1:" + "9" * 64), "preflight-mismatch"),
        (approval(), None),
    ],
)
def test_a_preflight_id_is_refused_for_each_rule_it_breaks(
    found: PreflightApproval | None, code: str | None
) -> None:
    refusal = preflight_refusal(found, "s1", FINGERPRINT, NOW)
    assert (refusal.code if refusal else None) == code


@pytest.mark.parametrize(
    ("found", "code"),
    [
        (None, "unknown-token"),
        (grant(session_id="s2"), "wrong-session"),
        (grant(expires_in=-timedelta(seconds=1)), "expired"),
        (grant(), None),
    ],
)
def test_a_resume_token_is_refused_for_each_rule_it_breaks(
    found: ResumeGrant | None, code: str | None
) -> None:
    refusal = token_refusal(found, "s1", NOW)
    assert (refusal.code if refusal else None) == code


# --- through the store -------------------------------------------------------------------


async def test_a_preflight_id_is_taken_once_by_its_session_for_its_launch(
    store: RunStore,
) -> None:
    preflight_id, expires = await store.save_preflight("s1", FINGERPRINT, TTL)
    assert preflight_id.startswith("pf-") and expires > utc_now()

    other = await store.take_preflight(preflight_id, "s2", FINGERPRINT)
    mismatch = await store.take_preflight(preflight_id, "s1", "sha256:v1:" + "9" * 64)
    taken = await store.take_preflight(preflight_id, "s1", FINGERPRINT)
    again = await store.take_preflight(preflight_id, "s1", FINGERPRINT)

    assert other is not None and other.code == "unknown-preflight"
    assert mismatch is not None and mismatch.code == "preflight-mismatch"
    assert taken is None
    assert again is not None and again.code == "preflight-consumed"


async def test_an_expired_preflight_id_is_refused_as_expired(store: RunStore) -> None:
    preflight_id, _ = await store.save_preflight("s1", FINGERPRINT, -timedelta(seconds=1))

    refusal = await store.take_preflight(preflight_id, "s1", FINGERPRINT)

    assert refusal is not None and refusal.code == "preflight-expired"


async def test_a_resume_token_grants_what_it_was_issued_for_and_is_redeemed_once(
    store: RunStore,
) -> None:
    issued = grant()
    token = await store.save_token(issued)
    assert token.startswith("rt-")

    found = await store.check_token(token, "s1")
    elsewhere = await store.check_token(token, "s2")
    first = await store.redeem_token(token, "s1")
    second = await store.redeem_token(token, "s1")
    after = await store.check_token(token, "s1")

    assert found == issued
    assert elsewhere == Refusal("wrong-session", "the token was issued to another session")
    assert first is None
    assert second is not None and second.code == "consumed"
    assert isinstance(after, Refusal) and after.code == "consumed"


async def test_an_unknown_token_grants_nothing(store: RunStore) -> None:
    refusal = await store.check_token("rt-unknown", "s1")

    assert isinstance(refusal, Refusal) and refusal.code == "unknown-token"
