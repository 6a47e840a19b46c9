"""What runs report, one type per fact: the domain keeps them and the wire sends them as is.

A child's usage, output, error and resources, a run's diagnostics and its
summary are the same fields in the run state machine (`runs/`), in the adapters
(`backends/`) and in a snapshot on the wire (`rpc/wire/`). They are defined
once, here, and the wire's converter writes them with camelCase keys like any
wire type (a field whose value is None is left out; one without a default is
always sent). Imports nothing of ours, so every layer may use them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Literal

import attrs

from subagent_host.values import RunKind, RunStatus
from subagent_host.values.choices import BackendName

Severity = Literal["error", "warning", "info"]
"""How much a `Diagnostic` weighs: a preflight with an `error` is not accepted."""


@attrs.frozen
class Usage:
    """Tokens summed over a child's attempt (or a run's attempts), and the cost where
    the CLI reports one."""

    input_tokens: int
    """Input tokens, as the CLI reports them."""
    output_tokens: int
    """Output tokens, as the CLI reports them."""
    cache_read_tokens: int
    """Tokens read from the prompt cache, as the CLI reports them."""
    cache_write_tokens: int
    """Tokens written to the prompt cache, as the CLI reports them."""
    cost_usd: float | None = None
    """Cost in US dollars; absent when the CLI reports none."""

    @classmethod
    def total(cls, parts: Iterable[Usage | None]) -> Usage | None:
        """The parts that reported usage, summed (protocol.md §12): None when none did;
        a cost only when every one of them has a cost, since a sum that leaves some
        out would read as the whole."""
        usages = [usage for usage in parts if usage is not None]
        if not usages:
            return None
        if len(usages) == 1:
            return usages[0]
        costs = [usage.cost_usd for usage in usages]
        return cls(
            input_tokens=sum(usage.input_tokens for usage in usages),
            output_tokens=sum(usage.output_tokens for usage in usages),
            cache_read_tokens=sum(usage.cache_read_tokens for usage in usages),
            cache_write_tokens=sum(usage.cache_write_tokens for usage in usages),
            cost_usd=None
            if None in costs
            else round(sum(cost for cost in costs if cost is not None), 6),
        )


def _data_or_none(data: Mapping[str, Any] | None) -> dict[str, Any] | None:
    return dict(data) if data else None


@attrs.frozen
class ErrorInfo:
    """A terminal `failed` status's error: a stable code, a sentence, optional data."""

    code: str
    """A stable code, e.g. `exit-status`, `spawn-failed`, `empty-prompt` or `internal`."""
    message: str
    """One sentence for a person."""
    data: dict[str, Any] | None = attrs.field(default=None, converter=_data_or_none)
    """A plain dict; empty data is None, so the wire never sends `data: {}`."""


@attrs.frozen
class Diagnostic:
    """Something a client should know that changed no status: a preflight's finding,
    a skipped write of a run, a note about an agent definition or a setting."""

    severity: Severity
    """`error`, `warning` or `info` (a preflight with an `error` is not accepted)."""
    code: str
    """A stable code, e.g. `invalid-cwd` or `snapshot-skipped`."""
    message: str
    """One sentence for a person."""
    path: str | None = None
    """Where it applies: a param's path (`tasks[0].prompt`) or a file; absent when it is about no
    one place."""
    data: dict[str, Any] | None = None
    """What a program needs to act on it, where a code has more to say (`launch-changed`:
    what changed); absent otherwise."""


@attrs.frozen
class OutputInfo:
    """A run's or child's final text as reported: possibly cut to the output caps."""

    text: str
    """The final text; when cut to the output caps, it ends with `[output truncated]`."""
    truncated: bool
    """True when `text` was cut."""
    bytes: int
    """UTF-8 bytes of the whole final text, however much of it `text` holds."""
    lines: int
    """Lines of the whole final text, however much of it `text` holds."""
    partial: bool
    """True when the child did not complete."""
    stderr_tail: str | None = None
    # Absent when it wrote none, and for an agent child (a failed one's is in `error.data`).
    """A `command` child's last 4 KiB of stderr, however it ended."""


@attrs.frozen
class Resources:
    cpu_seconds: float
    """CPU time of the child's whole process tree, in seconds."""
    peak_rss_bytes: int
    """The peak of the child's tree: its cgroup's memory.peak, else the largest sampled
    sum of its processes' RSS after exec; 0 if no sample saw it."""
    processes: int
    """The most processes of its tree seen at once."""
    leftovers_ended: int = 0
    """Processes of its tree (not the child itself) ended by the stop sequence."""


@attrs.frozen
class DiffStat:
    """How much a child's worktree differs from where it began (commits and uncommitted
    changes together, new untracked files included)."""

    files: int
    """Files changed, added or deleted."""
    insertions: int
    """Lines added (0 for a binary file)."""
    deletions: int
    """Lines removed (0 for a binary file)."""


@attrs.frozen(kw_only=True)
class Workspace:
    """An isolated child's git worktree as its attempt left it (protocol.md §8.7)."""

    path: str
    """The worktree's root: `<state>/worktrees/<runId>-<index>`."""
    branch: str
    """Its branch: `subagent/<first 8 of runId>-<index>`."""
    base_commit: str
    """The commit it was made from (the repository's `HEAD` then)."""
    head_commit: str
    """The branch's commit when the attempt ended."""
    commits: int
    """Commits on the branch since `baseCommit`."""
    changed_files: tuple[str, ...]
    """The changed files (at most 200, sorted), relative to the worktree's root."""
    diff_stat: DiffStat
    """Commits and uncommitted changes against `baseCommit`, together."""
    uncommitted: int
    """Files with changes not committed, new untracked files included (a rename counts once)."""
    kept: bool
    """False: no commits and no changes, so the worktree and its branch were removed."""


@attrs.frozen(kw_only=True)
class Executable:
    """The file an agent child's program resolves to, and what it is (protocol.md §15): a
    launch records it, a resume refuses another."""

    path: str
    """Its absolute real path (symlinks followed)."""
    digest: str
    """`sha256:v1:` and the SHA-256 of its bytes."""
    version: str | None = None
    """The first line its `--version` printed; absent when it printed none (or failed)."""


@attrs.frozen
class RunSummary:
    """One run of `status` without a run id: read from the store, its status and end
    taken from memory while it is live (fields in the order the wire sends them)."""

    run_id: str
    """The run's id."""
    kind: RunKind
    """`single`, `parallel`, `chain` or `workflow`."""
    status: RunStatus
    """A live run's status as it is in memory: the store's record may lag behind it."""
    created_at: datetime
    """When the run was created."""
    label: str | None = None
    """The call's label, when it has one."""
    ended_at: datetime | None = None
    """None while the run goes on (and for a run reopened by a resume)."""
    usage: Usage | None = None
    """Every attempt of every child that reported usage, summed as in the run's snapshot;
    absent when none did."""


@attrs.frozen
class AcpAgentInfo:
    """An ACP agent's own name for itself, from its answer to `initialize` (`agentInfo`)."""

    name: str
    """Its programmatic name (e.g. `qwen-code`)."""
    version: str
    """Its version."""
    title: str | None = None
    """Its name for people, when it gives one."""


@attrs.frozen
class AcpPromptCapabilities:
    """What an ACP agent takes in a prompt beside text (`promptCapabilities`)."""

    image: bool
    """Image content blocks."""
    audio: bool
    """Audio content blocks."""
    embedded_context: bool
    """Embedded resources (file contents given in the prompt)."""


@attrs.frozen
class AcpAgentCapabilities:
    """What an ACP agent declared it can do (a subset of its `agentCapabilities`)."""

    load_session: bool
    """It continues an earlier session (`session/load`): only then can its children be
    resumed."""
    prompt_capabilities: AcpPromptCapabilities
    """What its prompts may carry beside text."""


@attrs.frozen
class BackendInfo:
    """Whether a backend can run here, and its CLI's version when it was probed; for a
    configured ACP agent, what it answered to `initialize`."""

    id: BackendName
    """`command`, `pi`, `claude`, `codex` or a configured ACP agent's name (protocol.md §24.1)."""
    available: bool
    """Whether the backend can run here."""
    version: str | None = None
    """Its CLI's version as probed (an ACP agent's `agentInfo.version`); absent when it was
    not probed or gave none."""
    reason: str | None = None
    """Why the backend is unavailable, when it is."""
    tested_version: str | None = None
    """The CLI version the project's tests run against; for an ACP agent, the version of the
    agent its `agentInfo.name` says it is, where the tests run one of that name; absent for
    `command` and any other."""
    protocol: Literal["acp"] | None = None
    """`acp` for an agent configured as an ACP backend; absent for the built-in ones."""
    protocol_version: int | None = None
    """The ACP version the agent answered `initialize` with; absent until it answered."""
    agent_info: AcpAgentInfo | None = None
    """The ACP agent's `agentInfo`, when it gave one."""
    agent_capabilities: AcpAgentCapabilities | None = None
    """What the ACP agent declared it can do, once it answered."""
    auth_methods: tuple[str, ...] | None = None
    """The ids of the ACP agent's `authMethods`, once it answered (its launch may already
    satisfy them: the server never authenticates on its behalf)."""
