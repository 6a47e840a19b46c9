"""`ping`'s result: the same object while nothing it reports has changed, else a new one."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import attrs

from subagent_host.config import ServerConfig
from subagent_host.handlers import ping
from subagent_host.handlers.context import HandlerContext
from subagent_host.rpc.wire import PingParams, SessionId
from subagent_host.values.choices import Persistence, TrackingMode


def context(tmp_path: Path, **changes: Any) -> HandlerContext:
    ctx = HandlerContext(
        config=ServerConfig(state_dir=tmp_path),
        session_id="s-1",
        orchestrator=cast(Any, None),  # ping reads neither runs nor progress
        store=cast(Any, SimpleNamespace(persistence=Persistence.SQLITE)),
        progress=cast(Any, None),
        methods=("ping", "status"),
    )
    return attrs.evolve(ctx, **changes)


def test_ping_answers_the_very_same_result_while_nothing_it_reports_changes(
    tmp_path: Path,
) -> None:
    ctx = context(tmp_path)
    first = ping.handle(PingParams(), ctx)
    assert first.pong and first.session_id == "s-1" and first.methods == ("ping", "status")
    assert ping.handle(PingParams(), ctx) is first


def test_ping_answers_anew_once_the_session_persistence_or_context_differs(
    tmp_path: Path,
) -> None:
    store = SimpleNamespace(persistence=Persistence.SQLITE)
    ctx = context(tmp_path, store=store)
    first = ping.handle(PingParams(), ctx)
    bound = ping.handle(PingParams(session_id=SessionId("s-2")), ctx)
    assert bound.session_id == "s-2" and ctx.session_id == "s-2"
    assert ping.handle(PingParams(), ctx) is bound
    store.persistence = Persistence.MEMORY  # the state directory became unusable
    assert ping.handle(PingParams(), ctx).persistence == "memory"
    other = context(tmp_path, methods=("ping",), process_tracking=lambda: TrackingMode.SUBREAPER)
    answer = ping.handle(PingParams(), other)
    assert (answer.session_id, answer.methods, answer.process_tracking) == (
        "s-1",
        ("ping",),
        "subreaper",
    )
    assert ping.handle(PingParams(), ctx).session_id == "s-2"
    assert first.session_id == "s-1" and first.persistence == "sqlite"  # never changed
