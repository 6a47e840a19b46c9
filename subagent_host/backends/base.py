"""The backend interface: what every adapter (command, pi, claude, codex, a configured
ACP agent) provides.

Given a resolved item, an adapter says what to execute (`Launch`); while the
child runs it turns output into normalized events (`OutputParser`); when the
child exits it turns the exit into a terminal outcome (`ParsedOutcome`). The
supervisor runs the process; the child runner (`runs/child_runner.py`) decides
what happens next.

What sets one backend apart from another is said here too, as facts of `Backend`
(which tools its CLI asks about, whether its catalog names tools or kinds, whether a
stop cancels its turn first, ...): planning and runs read these facts, never the
adapter's class.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final, Literal, Protocol

import attrs

from subagent_host.backends.events import AgentEvent
from subagent_host.backends.exits import ProcessExit
from subagent_host.values import FULL
from subagent_host.values.choices import Effect, ReachedLimit, ToolKind
from subagent_host.values.facts import Usage


@attrs.frozen
class ItemSpec:
    """One child's resolved request, as the child runner hands it to an adapter."""

    command: tuple[str, ...] | None
    """A `command` child's argv; None for an agent CLI."""
    prompt: str | None
    """The task text, given on stdin; None: none."""
    cwd: str
    """The resolved working directory."""
    env: Mapping[str, str]
    """The spawn's own `env` additions (the allowlist is applied by the caller)."""
    model: str | None = None
    """The model; None: the CLI's own default."""
    thinking: str | None = None
    """The thinking effort; None: the CLI's own default."""
    tools: tuple[str, ...] | None = None
    """The tools it gets; None: the backend's default ones."""
    resume_session: str | None = None
    """The CLI's own session to continue (a resume of an agent child)."""
    filesystem_access: str = "write"
    """The request's `access.filesystem` (`none`, `read`, `write`): a CLI with a
    sandbox of its own (codex) is told; others are narrowed through their tools."""
    network_access: bool = True
    """The request's `access.network`: a CLI with a sandbox of its own (codex) is told."""
    instructions: str | None = None
    """An agent definition's body: appended to the CLI's own system prompt."""
    session_resources: str = FULL
    """`lean` starts the CLI with its own switches for loading less; `full` without."""
    max_turns: int | None = None
    """Model responses the child may make: a CLI with a limit of its own is told (claude);
    the server counts them for every agent CLI (`OutputParser.turns`)."""
    env_names: frozenset[str] = frozenset()
    """The names (never the values) of the variables the child runs with, once the child
    runner built its whole environment: an ACP agent that asks to be authenticated is
    offered only a method whose variables are among them."""


@attrs.frozen
class Launch:
    """What to execute for one child."""

    argv: tuple[str, ...]
    """The program and its arguments, executed without a shell."""
    stdin: bytes | None
    """Written to the child's stdin, which is then closed; None: nothing is written."""
    env: Mapping[str, str]
    """Variables this adapter adds on top of the allowlisted environment."""
    cwd: str
    """The working directory it runs in."""


@attrs.frozen
class ParsedOutcome:
    """What the output parser made of a finished child: its output and its exit, read
    the way its CLI means them (completed or not, the final text, usage, errors)."""

    completed: bool
    """Whether the child completed, as its CLI means it."""
    final_text: str
    """The head of the final text (what the run reports), possibly cut."""
    final_bytes: int
    """Size of the whole final text, however much of it was kept."""
    final_lines: int
    """Lines of the whole final text, however much of it was kept."""
    error_code: str | None = None
    """A failure's stable code (e.g. `exit-status`); None when there is none."""
    error_message: str | None = None
    """A failure's sentence."""
    error_data: Mapping[str, object] | None = None
    """A failure's `data` (e.g. `exitCode`, `stderrTail`)."""
    usage: Usage | None = None
    """Tokens and cost, as the CLI reported them; None when it reported none."""
    backend_session_id: str | None = None
    """The CLI's own session id, which a resume continues."""
    reached_limit: ReachedLimit | None = None
    """Set when the CLI stopped at a limit of its own (e.g. max turns): `limit-reached`."""
    stderr_tail: str | None = None
    """A `command` child's last STDERR_TAIL_BYTES of stderr, however it ended (a failed
    one's is also in its error's data); None when it wrote none."""

    @classmethod
    def answer(
        cls, text: str, usage: Usage | None = None, backend_session_id: str | None = None
    ) -> ParsedOutcome:
        """A completed child's outcome: its whole final text, measured here."""
        ends_open = 1 if text and not text.endswith("\n") else 0
        return cls(
            completed=True,
            final_text=text,
            final_bytes=len(text.encode("utf-8")),
            final_lines=text.count("\n") + ends_open,
            usage=usage,
            backend_session_id=backend_session_id,
        )

    def failed(
        self,
        code: str | None,
        message: str,
        data: Mapping[str, object] | None = None,
        reached_limit: ReachedLimit | None = None,
    ) -> ParsedOutcome:
        """The same output, read as a failure: what the child printed is reported all the same."""
        return attrs.evolve(
            self,
            completed=False,
            error_code=code,
            error_message=message,
            error_data=data,
            reached_limit=reached_limit,
        )


class OutputParser(Protocol):
    """Receives the child's output; keeps what the adapter needs to judge the exit."""

    def on_stdout(self, data: bytes) -> None: ...

    def on_stderr(self, data: bytes) -> None: ...

    def activity(self) -> list[str]:
        """Short, safe summaries of what the child did since the last call (may be empty).

        Called after every chunk of output; never raw arguments or file contents.
        """
        ...

    def events(self) -> list[AgentEvent]:
        """The normalized events (text, tools, usage) since the last call (may be empty).

        Called after every chunk of output, like `activity` (backends/events.py).
        """
        ...

    def outcome(self, exit_status: ProcessExit) -> ParsedOutcome: ...

    @property
    def finished(self) -> bool:
        """True once the CLI printed its final event (it should exit now)."""
        ...

    @property
    def turns(self) -> int:
        """Model responses begun so far (0 for a plain command).

        A response counts from its first sign in the output, so `turns` exceeds a
        limit N as soon as the CLI starts response N + 1 (protocol.md §16).
        """
        ...

    @property
    def session_id(self) -> str | None:
        """The CLI's own session, once it said which (a resume continues it)."""
        ...

    @property
    def usage(self) -> Usage | None:
        """Tokens and cost the CLI reported so far, summed over the child's life (None
        until it reported any): what a child ended before its final event keeps."""
        ...


# The `reachedLimit` of a child that began more model responses than its `maxTurns`
# allows, whoever stopped it (claude's own `error_max_turns`, or the server's count).
MAX_TURNS_LIMIT: Final = ReachedLimit.MAX_TURNS

# What a tool can do (`Effect`, which plans and receipts show too). A request's `access`
# removes tools with effects beyond it.
FILESYSTEM_READ: Final = Effect.FILESYSTEM_READ
FILESYSTEM_WRITE: Final = Effect.FILESYSTEM_WRITE
PROCESS: Final = Effect.PROCESS
NETWORK: Final = Effect.NETWORK
EFFECTS: Final = tuple(Effect)

# What a tool does, by its kind, where the CLI's own catalog does not name the tool:
# a kind that says nothing (`other`) may do anything, and so may a command (`execute`):
# what it runs decides, and a command the CLI asks for may run outside its sandbox
# (codex runs an approved command unsandboxed).
KIND_EFFECTS: Final[Mapping[ToolKind, frozenset[Effect]]] = {
    ToolKind.READ: frozenset({Effect.FILESYSTEM_READ}),
    ToolKind.SEARCH: frozenset({Effect.FILESYSTEM_READ}),
    ToolKind.EDIT: frozenset({Effect.FILESYSTEM_WRITE}),
    ToolKind.DELETE: frozenset({Effect.FILESYSTEM_WRITE}),
    ToolKind.MOVE: frozenset({Effect.FILESYSTEM_WRITE}),
    ToolKind.EXECUTE: frozenset(Effect),
    ToolKind.FETCH: frozenset({Effect.NETWORK}),
    ToolKind.THINK: frozenset(),
    ToolKind.OTHER: frozenset(Effect),
}

NO_TOOLS: Final[Mapping[str, frozenset[Effect]]] = MappingProxyType({})
"""An empty tool table: a backend whose CLI asks about no tool, or keeps none under `policy`."""


class Backend(Protocol):
    """An adapter: a name, its tools and their effects, how to launch an item, a parser."""

    id: str
    tools: Mapping[str, frozenset[Effect]]
    """The tool catalog: each tool's effects (a subset of EFFECTS)."""
    restrictable: bool
    """Whether removing tools actually narrows what a child can do (false for a
    plain command, which is one program with the user's permissions)."""
    tools_required: bool
    """Whether a child always has tools, whatever it is given (codex: its sandboxed
    shell): an empty tool list cannot be honoured and is refused."""
    env_allowed: frozenset[str]
    """Variables of the server's environment this backend's children also get."""
    executable: str
    """The program it runs (looked up on the child's PATH)."""
    thinking_levels: tuple[str, ...]
    """The `thinking` values it takes (empty: none)."""
    always_driven: bool
    """Whether every child of it is driven through its machine protocol, interactive or
    not (an ACP agent's: backends/acp.py); else only an interactive one, or one whose
    permissions someone answers (planning/plan.py `ChildPlan.driven`)."""
    asked_tools: Mapping[str, frozenset[Effect]]
    """Per tool of its catalog (by name, or by kind where `tools_by_kind`), the effects its
    CLI asks before every use of when someone but the CLI answers its permissions
    (approvals `client` or `policy`); a tool or effect not listed may run unasked. Empty:
    it asks about nothing (pi, a command). Receipts say `host-hard` or `best-effort` from
    it (planning/approvals.py)."""
    policy_kept_tools: Mapping[str, frozenset[Effect]]
    """Per tool, the effects beyond a child's access it may have and still be kept under
    approvals `policy`, because the host answers each use of them from the access
    (planning/access.py `negotiate`). Empty: narrowing removes every tool beyond access."""
    tools_by_kind: bool
    """Whether its catalog lists tool kinds (ACP's `ToolKind` values), not tools: its
    tools are the agent's own, known only by the kind each call says (an ACP agent's), so
    a tool's own name (say, one called `read` that runs commands) is never looked up in it."""
    configures_itself: bool
    """Whether the agent's own configuration decides its model, thinking effort, tools and
    what it loads (an ACP agent's): a request's `model`, `thinking`, `tools` and
    `sessionResources` are not honoured, no CLI default reaches it, and its tools cannot
    be narrowed on resume."""
    cancels_turn_first: bool
    """Whether a stop or a timeout first cancels a driven child's running turn in its
    protocol (ACP's `session/cancel`), so that the agent ends its turn's tools itself,
    before its input is closed and its tree stopped (runs/child_runner.py)."""
    protocol: Literal["acp"] | None
    """The open protocol of an agent configured by name (`acp`: `backends.<name>` in the
    configuration, protocol.md §24.1), as `ping` lists it; None for a built-in adapter.
    Such an agent's version is what it answered the server's `initialize` probe with,
    never `--version` (backends/identity.py), and its budgets are those of every agent of
    its protocol (backends/budgets.py)."""

    def prepare(self, item: ItemSpec) -> Launch: ...

    def parser(self) -> OutputParser: ...


class BuiltInBackend:
    """What a built-in adapter (command, pi, claude, codex) is unless it says otherwise:
    a CLI that asks about no tool and keeps none under `policy`, with its tools named in
    its catalog, that takes the request's model, tools and the like, is stopped without
    a cancel first, and is known here by name (no configured protocol)."""

    always_driven = False
    asked_tools: Mapping[str, frozenset[Effect]] = NO_TOOLS
    policy_kept_tools: Mapping[str, frozenset[Effect]] = NO_TOOLS
    tools_by_kind = False
    configures_itself = False
    cancels_turn_first = False
    protocol: Literal["acp"] | None = None


class AgentCLI(BuiltInBackend):
    """What the adapters of the agent CLIs share: tools that can be narrowed, a program
    found on PATH under its own name unless told another, the prompt on stdin."""

    id: str
    executable: str
    """The program's usual name (a subclass sets it); an instance may be given another."""
    tools_required = False
    restrictable = True
    env_allowed: frozenset[str] = frozenset()

    def __init__(self, executable: str | None = None) -> None:
        if executable is not None:
            self.executable = executable

    def launch(self, argv: list[str], item: ItemSpec) -> Launch:
        """Run `argv` for the item: the CLI reads the prompt on stdin, to its end."""
        stdin = (item.prompt or "").encode("utf-8")
        return Launch(argv=tuple(argv), stdin=stdin, env=dict(item.env), cwd=item.cwd)
