"""What leaves the machine: each child's own connection, apart from what its tools may do.

`access.network` narrows tools; it never stops an agent CLI from sending its prompt,
the files it reads and its tools' output to its model provider, which is how it
works at all. A receipt says so: an agent child's `egress` is its provider
(`model-provider`, with the endpoint its environment or configuration names, as
`backends/endpoints.py` finds it in the environment the child will get). A
`command` child is one program the server cannot see into: `unknown`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from subagent_host.backends.base import Backend
from subagent_host.backends.endpoints import provider_endpoint
from subagent_host.backends.environment import allowed_environment
from subagent_host.planning.plan import ChildPlan, LaunchPlan, prepared
from subagent_host.planning.views import Egress, EgressKind
from subagent_host.values.facts import Diagnostic


def declared_egress(backend: str) -> tuple[Egress, ...]:
    """A child's egress as its backend alone says it (no endpoint looked up)."""
    if backend == "command":
        return (Egress(EgressKind.UNKNOWN),)
    return (Egress(EgressKind.MODEL_PROVIDER, backend=backend),)


def child_egress(
    child: ChildPlan, backend: Backend, server_env: Mapping[str, str]
) -> tuple[Egress, ...]:
    """The child's egress with its provider's endpoint, from the environment it will run
    with: the server's allowed variables, then the request's `env`, then the adapter's.

    Reads the CLI's configuration files: call it off the event loop.
    """
    if child.backend == "command":
        return declared_egress(child.backend)
    launch = prepared(child, backend)
    env = allowed_environment(server_env, backend.env_allowed)
    env.update(child.env)
    env.update(launch.env)
    endpoint = provider_endpoint(child.backend, env, launch.argv)
    return (Egress(EgressKind.MODEL_PROVIDER, backend=child.backend, endpoint=endpoint),)


def plan_egress(
    plan: LaunchPlan, backends: Mapping[str, Backend], server_env: Mapping[str, str]
) -> list[tuple[Egress, ...]]:
    """Each child's egress, by index."""
    return [child_egress(c, backends[c.backend], server_env) for c in plan.children]


def has_agent_child(plan: LaunchPlan) -> bool:
    """Whether any child talks to a model provider (what egress consent is about)."""
    return any(child.backend != "command" for child in plan.children)


# The admission policy (`--require-egress-consent`): nothing goes to a model provider
# unless the caller said it may.
EGRESS_CONSENT_REQUIRED: Final = "egress-consent-required"


def consent_missing(plan: LaunchPlan, required: bool) -> Diagnostic | None:
    """The error a launch gets when the server requires egress consent, the launch has an
    agent child, and the request did not give `egressConsent: true`."""
    if not required or plan.egress_consent or not has_agent_child(plan):
        return None
    return Diagnostic(
        "error",
        EGRESS_CONSENT_REQUIRED,
        "this server runs an agent child only with the caller's consent to send its prompt, "
        "the files it reads and its tools' output to its model provider (receipts "
        "`egress`): pass egressConsent: true",
        "egressConsent",
    )
