"""The plan types: what a checked request resolved to, child by child.

`check.py` makes them from a request, `resume.py` from a stored projection;
`runs/` carries them out. The views of a plan (what preflight shows, its
fingerprint, its receipts, each child's launch projection) are made from these
in `normalized.py`, `receipts.py` and `projection.py`. A workflow's steps are
`PlanStep`s (`views.py`): the plan holds them as its normalized view shows them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, TypedDict

import attrs

from subagent_host.backends.base import Backend, ItemSpec, Launch
from subagent_host.backends.interactive.drivers import driver_for
from subagent_host.planning.views import Access, AgentRef, ChildLimits, NormalizedPlan, PlanStep
from subagent_host.values import FULL, STEP_PROMPT, Isolation, RunKind, SessionResources
from subagent_host.values.choices import Approvals
from subagent_host.values.copying import shared
from subagent_host.values.placement import Placement


@attrs.frozen
class ChildPlan:
    """One child, resolved: the wire's item after defaults and validation."""

    backend: str
    """`command`, `pi`, `claude`, `codex` or a configured ACP agent's name (protocol.md §24.1)."""
    cwd: str
    """The resolved working directory."""
    timeout_ms: int
    """Milliseconds the child may run before it is ended (`timed-out`, `timeout`)."""
    stall_timeout_ms: int
    """Milliseconds it may go without output before it is ended (`timed-out`, `stall`)."""
    command: tuple[str, ...] | None = None
    """A `command` child's argv; None for an agent child."""
    prompt: str | None = None
    """The task text (a workflow item's is a template until its step fills it)."""
    env: Mapping[str, str] = attrs.field(factory=dict)
    """The request's `env` additions, an item's merged over the call's."""
    label: str | None = None
    """The item's label (a workflow item's is a template too)."""
    model: str | None = None
    """An agent child's model; None: the CLI's own default."""
    thinking: str | None = None
    """An agent child's thinking effort; None: the CLI's own default."""
    tools: tuple[str, ...] | None = None
    """The tools it gets; None: the backend's default ones."""
    resume_session: str | None = None
    """The agent CLI's own session a resumed attempt continues."""
    access: Access | None = None
    """The request's access, when it narrowed the default."""
    removed_tools: tuple[str, ...] = ()
    """The tools the request's access took away (`tools` holds what is left)."""
    instructions: str | None = None
    """The agent definition's body, given to the CLI as system-prompt instructions."""
    agent: AgentRef | None = None
    """The agent definition it was launched from, when it was."""
    output_name: str | None = None
    """A workflow item's `as`: the name its final text is known by in later steps."""
    session_resources: SessionResources | None = None
    """An agent child's `lean` or `full`; None for a command child, and for a child
    resumed from a projection recorded before the field existed (it ran `full`)."""
    max_turns: int | None = None
    """Model responses an agent child may make; the server counts them (None: no limit)."""
    max_tokens: int | None = None
    """Input and output tokens an agent child may spend; the server sums them (None: no limit)."""
    max_cost_usd: float | None = None
    """US dollars an agent child may spend; the server sums them (None: no limit)."""
    isolation: Isolation | None = None
    """`worktree`: it runs in a git worktree of its own (protocol.md §8.7); None: in `cwd`."""
    placement: Placement | None = None
    """Where on a cluster it runs (protocol.md §8.8); None: anywhere the executor likes."""
    redact: bool = True
    """Whether long base64-like runs of its output are redacted (its secrets always are)."""
    interactive: bool = False
    """It lives on after its first turn, taking live messages (protocol.md §23): started
    through its backend's machine protocol, stdin kept open."""
    approvals: Approvals = Approvals.CLI
    """Who answers the tool uses it asks permission for (`cli`: nobody, its CLI's own
    rules). Other than `cli`, it is started through its machine protocol even when not
    interactive (and closed when its first turn ends)."""
    idle_timeout_ms: int | None = None
    """An interactive child's: milliseconds it may wait for input after a turn ended
    before it is closed (`completed`); None when not interactive."""
    permission_timeout_ms: int | None = None
    """Milliseconds a permission it asks may go unanswered before the answer is reject;
    None when nothing but its CLI answers (`approvals: "cli"`)."""
    launch: Launch | None = attrs.field(default=None, init=False, eq=False, repr=False)
    """What the backend executes for it (argv, stdin, extra env, cwd), prepared once
    from the fields above by `prepare_child`. Not an init argument: any copy
    (`attrs.evolve`: a template filled, a field changed) starts unprepared, so a
    launch never outlives what it was rendered from. Never recorded: it is derived,
    and holds environment values."""

    @property
    def driven(self) -> bool:
        """Whether it is started through its backend's machine protocol (a `Conversation`,
        backends/interactive/): it is interactive, or someone but its CLI answers its
        permissions."""
        return self.interactive or self.approvals is not Approvals.CLI

    @property
    def limits(self) -> ChildLimits:
        """The child's own limits, as the plan, the projection and a resume spell them."""
        return shared(ChildLimits, self)

    def item(self, prompt: str | None = None) -> ItemSpec:
        """What the backend is given to launch this child (`prompt` replaces the plan's)."""
        return shared(
            ItemSpec,
            self,
            prompt=prompt if prompt is not None else self.prompt,
            filesystem_access=self.access.filesystem if self.access else "write",
            network_access=self.access.network if self.access else True,
            session_resources=self.session_resources or FULL,
        )


class Driving(TypedDict):
    """How a child's views (its normalized plan, its projection) show how it is driven."""

    interactive: bool | None
    approvals: Approvals | None


def driving(child: ChildPlan) -> Driving:
    """`interactive` and `approvals` as a view shows them: only when set (interactive, not
    `cli`), so the fingerprints and digests of every other child are what they always were."""
    return Driving(
        interactive=True if child.interactive else None,
        approvals=None if child.approvals is Approvals.CLI else child.approvals,
    )


# An agent CLI given no text to work on would only spend a model call on nothing;
# a `command` child's prompt is just its stdin, and may be empty.
EMPTY_PROMPT: Final = "empty-prompt"


def is_empty_prompt(backend: str, prompt: str | None) -> bool:
    """An agent backend's prompt that is empty or only whitespace (never `command`'s)."""
    return backend != "command" and prompt is not None and not prompt.strip()


@attrs.frozen
class WorkflowPlan:
    name: str
    """The workflow's name."""
    task: str
    """What `{task}` stands for in the templates."""
    steps: tuple[PlanStep, ...]
    """Its steps, in order: which of the plan's children are each one's items, and how they
    run (a `forEach` step's one item once per element of the array its `over` yields). Item
    prompts (and labels) are templates, filled when the step starts."""
    snapshot_path: str | None = None
    """The file its snapshot is rewritten to, when the request names one."""


@attrs.frozen
class RunPlan:
    """What a launch request resolved to: its kind and its children (a workflow's record
    in the store is this, without environment values)."""

    kind: RunKind
    """`single`, `parallel`, `chain` or `workflow`."""
    children: tuple[ChildPlan, ...]
    """The children to run; for a workflow, its item templates (children are made per step)."""
    label: str | None = None
    """The call's label, when it has one."""
    stream: bool = False
    """True: the children's events are sent as they happen (a command's output, an agent's
    `message`, `tool` and `usage` events)."""
    raw_output: bool = False
    """With `stream`: an agent's raw output lines are sent as `output` events (its stderr as
    `stderr` events) too."""
    access: Access | None = None
    """The request's access, when it narrowed the default."""
    workflow: WorkflowPlan | None = None
    """A workflow's name, task and steps."""
    egress_consent: bool = False
    """True: the request gave `egressConsent: true` (kept with the run)."""


def command_steps(plan: RunPlan) -> frozenset[int]:
    """The workflow's `prompt` steps whose item runs a command: the steps a RunSnapshot
    reports as kind `command` (`STEP_COMMAND`)."""
    if plan.workflow is None:
        return frozenset()
    return frozenset(
        step.index
        for step in plan.workflow.steps
        if step.kind == STEP_PROMPT
        and all(plan.children[item].command is not None for item in step.items)
    )


@attrs.frozen
class ServerLimits:
    """The server-wide limits a receipt reports beside each child's own."""

    output_cap_bytes: int
    """Bytes of a child's output text kept."""
    output_cap_lines: int
    """Lines of a child's output text kept."""
    previous_cap_bytes: int
    """Bytes of `{previous}` (and `{outputs.NAME}`, `{item}`) put into a prompt."""
    max_concurrency: int
    """Children of the server running at once; more wait queued."""
    max_depth: int
    """The delegation depth at which a child's own spawns are refused."""
    max_parallel: int = 8
    """The most items of a `tasks` spawn or a `parallel` step."""
    workflow_parallelism: int = 4
    """Children of one workflow step running at once."""


@attrs.frozen(kw_only=True)
class LaunchPlan(RunPlan):
    """A launch, planned: a single item, tasks, a chain or a workflow, whose children
    carry their prepared launch. Made once per request (`prepare.launch_plan`); the
    normalized plan and the fingerprint are computed from it then, and what preflight
    shows, what a preflight id and the run are bound to, each child's projection and
    what is started are views of this one object. Only `launch_plan` makes one: a
    changed plan is planned anew, never copied with `attrs.evolve` (its fingerprint
    would no longer be its own)."""

    normalized: NormalizedPlan
    """What preflight shows and the fingerprint seals, computed once from this plan."""
    fingerprint: str
    """`sha256:v1:` and the SHA-256 of the normalized plan's canonical JSON."""


def prepare_child(child: ChildPlan, backend: Backend) -> ChildPlan:
    """The child with its launch prepared (the one place a planned child is prepared)."""
    if child.launch is not None:
        return child
    ready = attrs.evolve(child)
    # Set once, on a copy no one else holds yet: `launch` is derived, never an input.
    object.__setattr__(ready, "launch", render_launch(child, backend))
    return ready


def render_launch(child: ChildPlan, backend: Backend, prompt: str | None = None) -> Launch:
    """What the backend executes for the child (`prompt` replaces its planned one): its
    one-shot launch, or, for a child driven through its machine protocol, its driver's
    (stdin kept open; the prompt is the conversation's first message). ValueError
    (`approvals-unsupported`): approvals its backend cannot ask (checked when planned)."""
    item = child.item(prompt)
    if not is_driven(child, backend):
        return backend.prepare(item)
    return driver_for(backend).launch(backend, item, child.approvals)


def is_driven(child: ChildPlan, backend: Backend) -> bool:
    """Whether the child is started through its backend's machine protocol: it asks to
    be (`ChildPlan.driven`), or every child of its backend is (an ACP agent's)."""
    return child.driven or backend.always_driven


def prepared(child: ChildPlan, backend: Backend) -> Launch:
    """The child's launch: the one prepared when it was planned, else prepared now (a
    workflow child whose templates were just filled)."""
    return child.launch if child.launch is not None else render_launch(child, backend)
