"""Asking the human, through MCP elicitation, the permissions of the runs the face started.

A child run with `approvals: "client"` asks before its tools run (a `permission` event,
stage `asked`; protocol.md §23.4), and waits for a client of its session to answer with
`run/permit`. The face is that client for the runs it started, and the human behind its
MCP client is who answers: each permission is put to them as one form elicitation
(`elicitation/create`, form mode) naming the child, the tool's kind, name and one-line
summary, with the permission's options as a single choice. The option chosen is the
answer; a declined or cancelled elicitation, or one the client could not show, answers
the permission's reject option.

An MCP client can be asked only if it declared the `elicitation` capability (form mode)
and speaks a protocol version that lets a server send requests of its own (those before
2026-07-28; from then on a server may not). When it cannot, the face never starts a child
whose permissions would wait for it: `approvals: "client"` in spawn's arguments is sent
as `policy` (the server answers from the child's `access`), and the tool's text says so,
its refusal's too (render.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Final, TypeVar, cast

import attrs
import mcp_types as types
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from subagent_host.client import Host, HostConnectionError, HostError
from subagent_host.rpc.wire import PermitParams, PermitResult, RunSnapshot
from subagent_host.values import TERMINAL
from subagent_host.values.choices import Approvals, OptionKind, PermissionStage
from subagent_host.values.events import PermissionEvent
from subagent_host.values.interaction import PendingPermission, PermissionOption

logger = logging.getLogger(__name__)

ANSWER: Final = "answer"
"""The one field of the elicitation's form: the option chosen (its `optionId`)."""
REJECTS: Final = (OptionKind.REJECT_ONCE, OptionKind.REJECT_ALWAYS)
"""The options a refusal answers, in order of preference: the narrowest first."""

Elicit = Callable[[str, types.ElicitRequestedSchema], Awaitable[types.ElicitResult]]
"""Sends one form elicitation to the MCP client (`ServerSession.elicit_form`)."""

T = TypeVar("T")


def can_elicit(capabilities: types.ClientCapabilities | None, protocol_version: str) -> bool:
    """Whether an MCP client can be asked, at any time, to fill in a form: it declared form
    elicitation (an empty `elicitation` means form), and its protocol version lets the
    server send requests of its own."""
    elicitation = capabilities.elicitation if capabilities is not None else None
    if elicitation is None or protocol_version in MODERN_PROTOCOL_VERSIONS:
        return False
    return elicitation.form is not None or elicitation.url is None


def by_policy(value: T) -> T:
    """`value` (spawn's arguments) with every `approvals: "client"` in it, the call's and
    each item's, made `policy`: the same value when it has none."""
    if attrs.has(type(value)):
        changes: dict[str, Any] = {}
        for field in attrs.fields(cast(Any, type(value))):
            current = getattr(value, field.name)
            if field.name == "approvals" and current == Approvals.CLIENT:
                changes[field.name] = Approvals.POLICY.value
            elif (changed := by_policy(current)) is not current:
                changes[field.name] = changed
        return attrs.evolve(value, **changes) if changes else value  # type: ignore[misc]
    if isinstance(value, tuple):
        items = tuple(by_policy(item) for item in value)
        if any(new is not old for new, old in zip(items, value, strict=True)):
            return items  # type: ignore[return-value]
    return value


def question(run_id: str, permission: PendingPermission) -> tuple[str, types.ElicitRequestedSchema]:
    """The elicitation for one permission: its message, and a form of one required choice
    among the permission's options (a titled single-select enum)."""
    message = (
        f"Run {run_id}, child {permission.index}, asks to use the tool {permission.name} "
        f"({permission.kind}): {permission.summary}"
    )
    choice = {
        "type": "string",
        "title": "Answer",
        "description": "Allow or reject this use of the tool.",
        "oneOf": [
            {"const": option.option_id, "title": f"{option.name} ({option.kind})"}
            for option in permission.options
        ],
    }
    return message, {"type": "object", "properties": {ANSWER: choice}, "required": [ANSWER]}


def chosen(
    permission: PendingPermission, result: types.ElicitResult | None
) -> PermissionOption | None:
    """The option the elicitation's `result` answers: the one chosen when the human
    accepted with one of the options, else (declined, cancelled, an answer not offered, or
    no result) the narrowest reject option; None when the permission offers none."""
    if result is not None and result.action == "accept" and result.content is not None:
        answer = result.content.get(ANSWER)
        for option in permission.options:
            if option.option_id == answer:
                return option
    return reject_option(permission.options)


def reject_option(options: Iterable[PermissionOption]) -> PermissionOption | None:
    by_kind = {option.kind: option for option in reversed(tuple(options))}  # the first of each
    return next((by_kind[kind] for kind in REJECTS if kind in by_kind), None)


async def ask(
    host: Host, elicit: Elicit, run_id: str, permission: PendingPermission
) -> PermitResult | None:
    """Put one permission to the human, then answer it with `run/permit`; None when it
    could not be answered (it offers no reject option to refuse with, or it was answered
    by someone else, withdrawn, or its child ended first: the server says `not-pending`)."""
    message, schema = question(run_id, permission)
    result: types.ElicitResult | None
    try:
        result = await elicit(message, schema)
    except Exception as exc:  # the client failed or refused to show it: nobody said yes
        logger.warning("elicitation for permission %s failed: %s", permission.permission_id, exc)
        result = None
    option = chosen(permission, result)
    if option is None:
        return None
    params = PermitParams(
        run_id=run_id, permission_id=permission.permission_id, option_id=option.option_id
    )
    # Shielded: once sent, the answer stands. Its `answered` event may arrive before its
    # reply, and ends the question: that must not take the answer back.
    permit = asyncio.ensure_future(host.call("run/permit", params, PermitResult))
    permit.add_done_callback(_retrieved)
    try:
        return await asyncio.shield(permit)
    except HostError as exc:
        logger.info("permission %s not answered: %s", permission.permission_id, exc.message)
    except HostConnectionError:
        pass  # the server is gone: so are the run and its permissions
    return None


def _retrieved(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()  # read, so that an answer nobody waits for any more logs nothing


class PermissionAsker:
    """Follows each run the face started for its client that can elicit, and asks each
    permission one of them asks; everything ends with `aclose()`."""

    def __init__(self, host: Host) -> None:
        self._host = host
        self._followers: set[asyncio.Task[None]] = set()

    def follow(self, run: RunSnapshot, elicit: Elicit) -> None:
        """Ask the permissions `run` waits on now, and each it asks from `run.last_seq` on,
        until it is terminal."""
        if run.status in TERMINAL:
            return
        follower = asyncio.create_task(self._follow(run, elicit))
        self._followers.add(follower)
        follower.add_done_callback(self._followers.discard)

    async def aclose(self) -> None:
        """Stop following: elicitations still open are cancelled (their runs end with the face)."""
        await _ended(list(self._followers))

    async def _follow(self, run: RunSnapshot, elicit: Elicit) -> None:
        asking: dict[str, asyncio.Task[PermitResult | None]] = {}

        def start(permission: PendingPermission) -> None:
            if permission.permission_id not in asking:
                asking[permission.permission_id] = asyncio.create_task(
                    ask(self._host, elicit, run.run_id, permission)
                )

        try:
            for permission in run.pending_permissions or ():
                start(permission)
            async for wire in self._host.events(run.run_id, since=run.last_seq):
                match wire.event:
                    case PermissionEvent(stage=PermissionStage.ASKED) as event:
                        start(event.pending())
                    case PermissionEvent(permission_id=permission_id):
                        # Answered (by the face, another client, its timeout) or withdrawn:
                        # a question still open is moot.
                        if (question := asking.pop(permission_id, None)) is not None:
                            question.cancel()
        except HostConnectionError:
            pass  # the server is gone: so are the run and its permissions
        finally:
            await _ended(list(asking.values()))


async def _ended(tasks: list[asyncio.Task[Any]]) -> None:
    """Cancel `tasks` and wait for each to end. What one raised on its way out (the SDK
    telling a client that is gone that a question is cancelled) is logged: nobody is
    left to tell."""
    for task in tasks:
        task.cancel()
    for task in tasks:
        try:
            await task
        except asyncio.CancelledError:
            pass
        except Exception as exc:
            logger.warning("asking a permission ended with %r", exc)
