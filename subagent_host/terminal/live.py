"""Talk to a running run's interactive children from another process (protocol.md §23,
§10.1): what `subagent-host send`, `interrupt`, `close` and `permit` do, and `watch`'s
`a`/`r` keys.

Each finds the run by id or prefix in every session and asks the live server that owns
it, on its control socket, the very method its own client would (`run/send`,
`run/interrupt`, `run/close`, `run/permit`), with the run's full id
(`terminal/owners.py`). A permission answered this way is answered by `client:terminal`.

Exit statuses of the commands (`finish`): 0 done, 1 not done (the run is unknown, has
ended, its server is gone, or the server refused: not interactive, not running, no such
permission; the reason on stderr in one line), 3 the server was busy (at its bound of
control connections: try again), as `subagent-host stop`'s.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any, Final, TypeVar

from subagent_host import SERVER_NAME
from subagent_host.client import Host
from subagent_host.handlers.snapshots import run_snapshot
from subagent_host.options import add_number
from subagent_host.rpc.wire import (
    CloseParams,
    InterruptParams,
    InterruptResult,
    PermitParams,
    PermitResult,
    RunSnapshot,
    SendParams,
    SendResult,
)
from subagent_host.terminal.interaction import NoSuchAnswer, choose_option
from subagent_host.terminal.options import subcommand_parser
from subagent_host.terminal.owners import Action, OwnerBusy, OwnerFailed, ask_owner, ended, locate
from subagent_host.terminal.views import short_id
from subagent_host.values import MAX_SAFE_INTEGER
from subagent_host.values.choices import Delivery
from subagent_host.values.interaction import PendingPermission

R = TypeVar("R")

EXIT_FAILED: Final = 1
EXIT_BUSY: Final = 3
"""Distinct from 1 (not done): the same command may work in a moment."""


async def send(
    state_dir: Path, reference: str, text: str, index: int | None, steer: bool
) -> SendResult:
    """`run/send` the message to the run's interactive child (`index`, or its one)."""
    delivery = Delivery.STEER if steer else None
    return await _ask_live(
        state_dir,
        reference,
        Action("sending to", "send it"),
        lambda run_id: host_call(
            "run/send",
            SendParams(run_id=run_id, text=text, index=index, delivery=delivery),
            SendResult,
        ),
    )


async def interrupt(state_dir: Path, reference: str, index: int | None) -> InterruptResult:
    """`run/interrupt` the current turn of the run's interactive child."""
    return await _ask_live(
        state_dir,
        reference,
        Action("interrupting", "interrupt it"),
        lambda run_id: host_call(
            "run/interrupt", InterruptParams(run_id=run_id, index=index), InterruptResult
        ),
    )


async def _ask_live(
    state_dir: Path,
    reference: str,
    action: Action,
    call: Callable[[str], Callable[[Host], Awaitable[R]]],
) -> R:
    """`call(full run id)` on the owner of the run `reference` names, a run still going
    (one that ended takes nothing more: OwnerFailed)."""
    run, owner = await locate(state_dir, reference)
    if run.is_terminal:
        raise ended(run)
    return await ask_owner(state_dir, run, owner, action, call(run.run_id))


def host_call(method: str, params: object, result: type[R]) -> Callable[[Host], Awaitable[R]]:
    """What asks `method` with `params` of a host, its result read as `result`."""
    return lambda host: host.call(method, params, result)


async def close(state_dir: Path, reference: str, index: int | None) -> RunSnapshot:
    """`run/close` the run's interactive children (or child `index`): their snapshot once
    they ended. A run that had already ended comes back as recorded, `already_terminal`
    (closing what ended is nothing to do, as the method says); one with no interactive
    child is OwnerFailed."""
    run, owner = await locate(state_dir, reference)
    if run.is_terminal:
        return run_snapshot(run, already_terminal=True)
    if index is None and all(child.turn is None for child in run.children):
        # The method closes none and answers the run as it goes on: said plainly here.
        raise OwnerFailed(
            f"run {short_id(run.run_id)} has no interactive child: there is nothing to close"
        )
    params = CloseParams(run_id=run.run_id, index=index)
    return await ask_owner(
        state_dir,
        run,
        owner,
        Action("closing", "close it"),
        host_call("run/close", params, RunSnapshot),
    )


async def permit(
    state_dir: Path, reference: str, permission_id: str, allow: bool, always: bool
) -> tuple[PendingPermission, PermitResult]:
    """Answer the run's pending permission `permission_id`: the option of the kind asked
    for (`choose_option`) among those it offers, as the server lists it now
    (`pendingPermissions`), then `run/permit`. The permission and the answer."""
    run, owner = await locate(state_dir, reference)
    if run.is_terminal:
        raise ended(run)

    async def answer(host: Host) -> tuple[PendingPermission, PermitResult]:
        snapshot = await host.status(run.run_id)
        waiting = snapshot.pending_permissions or ()
        pending = next((p for p in waiting if p.permission_id == permission_id), None)
        if pending is None:
            ids = ", ".join(p.permission_id for p in waiting) or "none"
            raise OwnerFailed(
                f"run {short_id(run.run_id)} has no pending permission {permission_id!r}"
                f" (pending: {ids})"
            )
        try:
            option = choose_option(pending, allow, always)
        except NoSuchAnswer as exc:
            raise OwnerFailed(str(exc)) from None
        params = PermitParams(
            run_id=run.run_id, permission_id=permission_id, option_id=option.option_id
        )
        return pending, await host.call("run/permit", params, PermitResult)

    return await ask_owner(state_dir, run, owner, Action("answering for", "answer it"), answer)


def live_parser(name: str, description: str, *, index: str | None) -> argparse.ArgumentParser:
    """`subagent-host NAME RUN ...`'s parser: RUN, and `--index N` helped by `index`."""
    parser = subcommand_parser(name, description)
    parser.add_argument("run", metavar="RUN", help="a run id, or its first 8 or more characters")
    if index is not None:
        add_number(parser, "--index", 0, MAX_SAFE_INTEGER, index)
    return parser


def finish(name: str, work: Coroutine[Any, Any, R], say: Callable[[R], str]) -> int:
    """Run `work`; on success print `say(result)` and return 0, else the failure's one
    line on stderr (`subagent-host NAME: …`) and EXIT_FAILED or EXIT_BUSY."""
    try:
        result = asyncio.run(work)
    except OwnerFailed as exc:
        print(f"{SERVER_NAME} {name}: {exc}", file=sys.stderr)
        return EXIT_BUSY if isinstance(exc, OwnerBusy) else EXIT_FAILED
    print(say(result))
    return 0
