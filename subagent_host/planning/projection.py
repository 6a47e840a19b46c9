"""Launch projections: what each child was launched as, kept so a resume runs exactly that.

Every child of every run gets one versioned projection when its run is launched:
backend, argv template, model, thinking, `sessionResources`, tools with their
effects, cwd, the
names of its environment variables (their values are never stored, not even
hashed: they may be secrets), its limits, and the agent it came from when there
was one. Its digest (`sha256:v1:`, canonical JSON) is stored beside it; a
resume rebuilds its contract from the stored projection and refuses (fails
closed) when the projection is missing, of a version it does not know, or no
longer matches its digest.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

import attrs

from subagent_host.backends.base import Backend
from subagent_host.planning.fingerprint import fingerprint
from subagent_host.planning.plan import ChildPlan, default_tools

VERSION: Final = 1
# What a resume may change (only lower: a child launched without `maxTurns` had no
# turn limit, so any one is lower). Everything else would be a different launch.
ALLOWED_OVERRIDES: Final = ("timeoutMs", "stallTimeoutMs", "maxTurns")
GUIDANCE: Final = (
    "launch a new run instead, and give it the prior result (status {runId}) in its task"
)


def project(child: ChildPlan, backend: Backend) -> dict[str, Any]:
    """The projection of one planned child (JSON-able, camelCase like the wire)."""
    launch = backend.prepare(child.item())
    tools = child.tools if child.tools is not None else default_tools(backend)
    return {
        "v": VERSION,
        "backend": child.backend,
        "argvTemplate": list(launch.argv),
        "model": child.model,
        "thinking": child.thinking,
        "tools": [{"name": t, "effects": sorted(backend.tools.get(t, ()))} for t in tools],
        "cwd": child.cwd,
        "envKeys": sorted(child.env),
        # `maxTurns` only when it was set: projections stored before it existed stay valid.
        "limits": child.limits,
        "label": child.label,
        # The agent definition it came from: a resume refuses unless the definition
        # it would use now is the same file with the same digest.
        "agent": attrs.asdict(child.agent) if child.agent is not None else None,
        # The request's access, when it narrowed the default: a resume keeps it.
        "access": attrs.asdict(child.access) if child.access is not None else None,
        **({"instructions": child.instructions} if child.instructions is not None else {}),
        # Absent in projections recorded before it existed: those children ran `full`,
        # and a resume of them still does (`resumes.resumed_child`).
        **(
            {"sessionResources": child.session_resources}
            if child.session_resources is not None
            else {}
        ),
    }


def seal(projection: Mapping[str, Any]) -> tuple[str, str]:
    """The projection as stored, and its digest."""
    return json.dumps(projection, sort_keys=True, separators=(",", ":")), fingerprint(projection)


class ProjectionProblem(Exception):
    """A stored projection that cannot be trusted; `code` names why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def unseal(stored: str | None, digest: str | None) -> dict[str, Any]:
    """The stored projection, checked; ProjectionProblem if it cannot be used."""
    if stored is None or digest is None:
        raise ProjectionProblem(
            "projection-missing", f"this child has no recorded launch projection; {GUIDANCE}"
        )
    try:
        projection = json.loads(stored)
    except ValueError:
        raise ProjectionProblem(
            "projection-corrupt", f"the recorded launch projection is unreadable; {GUIDANCE}"
        ) from None
    if not isinstance(projection, dict) or projection.get("v") != VERSION:
        version = projection.get("v") if isinstance(projection, dict) else None
        raise ProjectionProblem(
            "projection-unsupported",
            f"the recorded launch projection has version {version!r}, this server "
            f"understands {VERSION}; {GUIDANCE}",
        )
    if fingerprint(projection) != digest:
        raise ProjectionProblem(
            "projection-mismatch",
            f"the recorded launch projection does not match its digest; {GUIDANCE}",
        )
    return projection


def contract(
    run_id: str,
    index: int,
    attempt: int,
    projection: Mapping[str, Any],
    overrides: Mapping[str, Any],
    backend_session_id: str | None = None,
) -> dict[str, Any]:
    """What a resume would run: the projection with the allowed overrides applied.

    `backendSessionId` is the agent CLI's own session the new attempt continues
    (known only once a child has run, so it is not part of the projection).
    """
    limits = dict(projection["limits"])
    limits.update({name: overrides[name] for name in ALLOWED_OVERRIDES if name in overrides})
    sealed = {
        "v": VERSION,
        "runId": run_id,
        "index": index,
        "attempt": attempt,
        "projection": {**projection, "limits": limits},
        "projectionDigest": fingerprint(projection),
    }
    if backend_session_id is not None:
        sealed["backendSessionId"] = backend_session_id
    return sealed


def check_overrides(projection: Mapping[str, Any], overrides: Mapping[str, Any]) -> list[str]:
    """Why these overrides are refused (empty when they are allowed)."""
    problems = []
    for name, value in overrides.items():
        if name not in ALLOWED_OVERRIDES:
            problems.append(
                f"{name} cannot be changed on resume (only {', '.join(ALLOWED_OVERRIDES)} may "
                f"be lowered); to change it, launch anew"
            )
        elif name == "maxTurns" and projection["backend"] == "command":
            problems.append("maxTurns cannot be honoured by the command backend")
        elif type(value) is not int or value < 1:
            problems.append(f"{name} must be a positive integer")
        elif name in projection["limits"] and value > projection["limits"][name]:
            problems.append(
                f"{name} may only be lowered on resume ({value} > {projection['limits'][name]})"
            )
    return problems
