"""Which driver talks to which backend: a backend's id to its interactive launch and
its `Conversation`, so the supervision starts any of them the one way.

Every driver has the same two entry points: `interactive_launch(backend, item,
approvals)` (the program's argv/env/cwd, stdin left open) and `for_item(item,
approvals)` (its conversation's state). Both refuse approvals the backend cannot ask
for (`approvals-unsupported`: pi and a plain command take only `cli`). The agent CLIs
speak their own machine protocols; a plain command speaks lines
(command_lines.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final, Generic, TypeVar

import attrs

from subagent_host.backends import claude, codex, command, pi
from subagent_host.backends.acp import AcpBackend
from subagent_host.backends.base import Backend, ItemSpec, Launch
from subagent_host.backends.interactive import claude_stream, codex_app, command_lines, pi_rpc
from subagent_host.backends.interactive.base import Approvals, Conversation, approvals_supported

BackendT = TypeVar("BackendT", bound=Backend)


@attrs.frozen
class Driver(Generic[BackendT]):
    """One CLI's interactive driver: its launch (from the backend's one-shot adapter)
    and the conversation that talks to the process it starts."""

    backend: type[BackendT]
    launch: Callable[[BackendT, ItemSpec, Approvals], Launch]
    conversation: Callable[[ItemSpec, Approvals], Conversation]

    def start(
        self, backend: Backend, item: ItemSpec, approvals: Approvals
    ) -> tuple[Launch, Conversation]:
        """The launch of `item`'s interactive child and its conversation (ValueError,
        `approvals-unsupported`: the CLI cannot ask as `approvals` says; TypeError: a
        backend of another CLI)."""
        if not isinstance(backend, self.backend):
            raise TypeError(f"the {self.backend.id} driver cannot launch {backend.id}")
        return self.launch(backend, item, approvals), self.conversation(item, approvals)


def command_launch(backend: command.CommandBackend, item: ItemSpec, approvals: Approvals) -> Launch:
    """A command's launch with nothing written at start: its prompt is the conversation's
    first line, and its stdin stays open for the next ones."""
    approvals_supported(backend.id, approvals, command_lines.APPROVALS)
    return attrs.evolve(backend.prepare(attrs.evolve(item, prompt=None)), stdin=None)


def acp_launch(backend: AcpBackend, item: ItemSpec, approvals: Approvals) -> Launch:
    """A configured ACP agent's launch: the same for every approvals (each is taken)."""
    del approvals
    return backend.prepare(item)


def acp_conversation(item: ItemSpec, approvals: Approvals) -> Conversation:
    """An ACP child's conversation. The ACP client (and the SDK and pydantic it reads the
    protocol with) is imported here, when the first ACP child is driven, so that a server
    that runs none never loads them."""
    from subagent_host.backends.interactive.acp_client import AcpConversation  # noqa: PLC0415

    return AcpConversation.for_item(item, approvals)


ACP_DRIVER: Final[Driver[AcpBackend]] = Driver(AcpBackend, acp_launch, acp_conversation)
"""The driver of every configured ACP agent, whatever its name."""


def driver_for(backend: Backend) -> Driver[Any]:
    """The driver that talks to `backend`'s children (KeyError: none does)."""
    return ACP_DRIVER if isinstance(backend, AcpBackend) else DRIVERS[backend.id]


DRIVERS: Final[Mapping[str, Driver[Any]]] = {
    command.CommandBackend.id: Driver(
        command.CommandBackend, command_launch, command_lines.CommandConversation.for_item
    ),
    pi.PiBackend.id: Driver(
        pi.PiBackend, pi_rpc.interactive_launch, pi_rpc.PiRpcConversation.for_item
    ),
    claude.ClaudeBackend.id: Driver(
        claude.ClaudeBackend,
        claude_stream.interactive_launch,
        claude_stream.ClaudeConversation.for_item,
    ),
    codex.CodexBackend.id: Driver(
        codex.CodexBackend, codex_app.interactive_launch, codex_app.CodexAppConversation.for_item
    ),
}
"""The built-in backends' drivers, by id (every configured ACP agent has ACP_DRIVER)."""
