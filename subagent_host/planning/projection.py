"""Launch projections: what each child was launched as, kept so a resume runs exactly that.

Every child of every run gets one versioned projection when its run is launched:
backend, argv template, the file an agent child's program is (`executable`),
model, thinking, `sessionResources`, tools with their effects, cwd, the
names of its environment variables (their values are never stored, not even
hashed: they may be secrets), its limits, the agent it came from when there
was one, and, only when set, that it was interactive and who answered its
permissions (a resume drives it the same way). Its digest (`sha256:v1:`,
canonical JSON) is stored beside it; a resume rebuilds its contract from the
stored projection and refuses (fails closed) when the projection is missing, of
a version it does not know, or no longer matches its digest.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Final, TypeVar

import attrs
from cattrs.errors import BaseValidationError

from subagent_host.backends.base import Backend
from subagent_host.backends.budgets import MAX_COST_USD, MAX_TOKENS, unreported
from subagent_host.planning.access import default_tools
from subagent_host.planning.fingerprint import fingerprint
from subagent_host.planning.narrowing import narrow, narrowing_problems
from subagent_host.planning.plan import ChildPlan, driving, prepared
from subagent_host.planning.views import (
    PROJECTION_VERSION,
    ChildLimits,
    Contract,
    ContractWorkflow,
    PlannedPlacement,
    Projection,
    ToolEffects,
    from_json,
    to_json,
)
from subagent_host.values import MAX_SAFE_INTEGER
from subagent_host.values.choices import Approvals, SessionDigestSource
from subagent_host.values.copying import shared
from subagent_host.values.facts import Executable
from subagent_host.values.json_values import JsonValue

T = TypeVar("T")

VERSION: Final = PROJECTION_VERSION
# What a resume may change, only downwards: a limit lowered (a child launched without
# `maxTurns`, `maxTokens` or `maxCostUsd` had no such limit, so any one is lower),
# `access` narrowed (`narrowing.py`). Everything else would be a different launch.
LOWERED_LIMITS: Final = ("timeoutMs", "stallTimeoutMs", "maxTurns", MAX_TOKENS, MAX_COST_USD)
NARROWED: Final = ("access",)
ALLOWED_OVERRIDES: Final = (*LOWERED_LIMITS, *NARROWED)
# The overrides only an agent child can honour (its CLI's events are counted).
AGENT_ONLY_OVERRIDES: Final = ("maxTurns", MAX_TOKENS, MAX_COST_USD)
GUIDANCE: Final = (
    "launch a new run instead, and give it the prior result (status {runId}) in its task"
)
# Keys a projection stored before they existed lacks; read back as null, which the
# digest (it leaves nulls out) does not tell from absent.
ADDED_SINCE_V1: Final = ("agent", "access")


def project(child: ChildPlan, backend: Backend, executable: Executable | None = None) -> Projection:
    """The projection of one planned child: its prepared launch's argv, the file its
    program is (an agent child's, `executable.py`), and what it ran with."""
    tools = child.tools if child.tools is not None else default_tools(backend)
    return shared(
        Projection,
        child,
        argv_template=prepared(child, backend).argv,
        tools=tuple(ToolEffects(t, tuple(sorted(backend.tools.get(t, ())))) for t in tools),
        env_keys=tuple(sorted(child.env)),
        limits=child.limits,
        executable=executable,
        redact=None if child.redact else False,
        placement=PlannedPlacement.of(child.placement),
        **driving(child),
    )


def child_of(
    projection: Projection,
    *,
    prompt: str | None = None,
    resume_session: str | None = None,
    env: Mapping[str, str] | None = None,
) -> ChildPlan:
    """The child a projection describes, to be launched again: a resume's new attempt
    (with its prompt, the session it continues and the env values), or, without them,
    the launch the projection recorded, rendered anew."""
    # Its limits are the projection's; so are its other fields of the same names (a
    # projection from before `sessionResources` has none: that child ran `full`).
    is_command = projection.backend == "command"
    return shared(
        ChildPlan,
        projection,
        **attrs.asdict(projection.limits, recurse=False),
        command=projection.argv_template if is_command else None,
        prompt=prompt,
        resume_session=resume_session,
        env=dict(env or {}),
        tools=tuple(tool.name for tool in projection.tools),
        redact=projection.redact is not False,
        placement=None if projection.placement is None else projection.placement.requested(),
        interactive=projection.interactive is True,
        approvals=projection.approvals or Approvals.CLI,
    )


def seal(projection: Projection) -> tuple[str, str]:
    """The projection as stored (its JSON, keys sorted), and its digest."""
    data = to_json(projection)
    return json.dumps(data, sort_keys=True, separators=(",", ":")), fingerprint(data)


class ProjectionProblem(Exception):
    """A stored projection that cannot be trusted; `code` names why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def unseal(stored: str | None, digest: str | None) -> Projection:
    """The stored projection, checked; ProjectionProblem if it cannot be used."""
    if stored is None or digest is None:
        raise ProjectionProblem(
            "projection-missing", f"this child has no recorded launch projection; {GUIDANCE}"
        )
    try:
        data = json.loads(stored)
    except ValueError:
        raise ProjectionProblem(
            "projection-corrupt", f"the recorded launch projection is unreadable; {GUIDANCE}"
        ) from None
    if not isinstance(data, dict) or data.get("v") != VERSION:
        version = data.get("v") if isinstance(data, dict) else None
        raise ProjectionProblem(
            "projection-unsupported",
            f"the recorded launch projection has version {version!r}, this server "
            f"understands {VERSION}; {GUIDANCE}",
        )
    if fingerprint(data) != digest:  # the stored JSON itself, before anything reads it
        raise ProjectionProblem(
            "projection-mismatch",
            f"the recorded launch projection does not match its digest; {GUIDANCE}",
        )
    try:
        return from_json({**dict.fromkeys(ADDED_SINCE_V1), **data}, Projection)
    except (BaseValidationError, ValueError, TypeError):
        raise ProjectionProblem(
            "projection-unsupported",
            f"the recorded launch projection has fields this server does not know; {GUIDANCE}",
        ) from None


def contract(
    run_id: str,
    index: int,
    attempt: int,
    projection: Projection,
    overrides: Mapping[str, JsonValue],
    *,
    backend_session_id: str | None = None,
    session_digest: str | None = None,
    session_digest_source: SessionDigestSource | None = None,
    workflow: ContractWorkflow | None = None,
    launch_check: str | None = None,
) -> Contract:
    """What a resume would run: the projection with the allowed overrides applied.

    `backendSessionId` is the agent CLI's own session the new attempt continues
    (known only once a child has run, so it is not part of the projection).
    """
    access = overrides.get("access")
    narrowed, removed = narrow(projection, access if isinstance(access, dict) else None)
    return Contract(
        run_id=run_id,
        index=index,
        attempt=attempt,
        projection=attrs.evolve(narrowed, limits=_lowered(projection.limits, overrides)),
        projection_digest=fingerprint(to_json(projection)),
        backend_session_id=backend_session_id,
        session_digest=session_digest,
        session_digest_source=session_digest_source if session_digest is not None else None,
        workflow=workflow,
        removed_tools=removed,
        launch_check=launch_check,
    )


def check_overrides(
    projection: Projection, overrides: Mapping[str, JsonValue], budgets_of: str | None = None
) -> list[str]:
    """Why these overrides are refused (empty when they are allowed). `budgets_of`: whose
    budgets the child's are (budgets.py `unreported`) where that is not its backend's
    own name: every configured ACP agent's are the protocol's."""
    limits = to_json(projection.limits)
    problems = []
    for name, value in overrides.items():
        if name not in ALLOWED_OVERRIDES:
            problems.append(
                f"{name} cannot be changed on resume (only {', '.join(LOWERED_LIMITS)} "
                f"may be lowered, and access narrowed); to change it, launch anew"
            )
        elif name == "access":
            problems += narrowing_problems(projection, value)
        elif name in AGENT_ONLY_OVERRIDES and projection.backend == "command":
            problems.append(f"{name} cannot be honoured by the command backend")
        elif (reason := unreported(budgets_of or projection.backend, name)) is not None:
            problems.append(f"{name} cannot be enforced: {reason}")
        elif isinstance(limit := _limit(name, value), str):
            problems.append(limit)
        elif isinstance(launched := limits.get(name), int | float) and limit > launched:
            problems.append(f"{name} may only be lowered on resume ({limit} > {launched})")
    return problems


def _limit(name: str, value: JsonValue) -> int | float | str:
    """An override's value as a limit, or why it is no limit at all."""
    if name == MAX_COST_USD:
        # `type`, not isinstance: true and false are ints, and no cost.
        if (type(value) is int or type(value) is float) and math.isfinite(value) and value > 0:
            return value
        return f"{name} must be a number above 0"
    if type(value) is not int or not 1 <= value <= MAX_SAFE_INTEGER:
        return f"{name} must be a positive integer"
    return value


def _lowered(limits: ChildLimits, overrides: Mapping[str, JsonValue]) -> ChildLimits:
    """The launch's limits, each one an override names in its place (`check_overrides`
    allowed them: an integer, or a cost in dollars)."""
    cost = overrides.get(MAX_COST_USD)
    return attrs.evolve(
        limits,
        timeout_ms=_count(overrides.get("timeoutMs"), limits.timeout_ms),
        stall_timeout_ms=_count(overrides.get("stallTimeoutMs"), limits.stall_timeout_ms),
        max_turns=_count(overrides.get("maxTurns"), limits.max_turns),
        max_tokens=_count(overrides.get(MAX_TOKENS), limits.max_tokens),
        # A float: a client may write whole dollars as an integer.
        max_cost_usd=float(cost) if isinstance(cost, int | float) else limits.max_cost_usd,
    )


def _count(value: JsonValue, launched: T) -> int | T:
    """An integer override (not true or false), or the launch's own limit without one."""
    return value if type(value) is int else launched
