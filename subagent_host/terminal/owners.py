"""Reach the server that runs a run, from another process (protocol.md §10.1).

What `subagent-host stop`, `send`, `interrupt`, `close` and `permit` (and `watch`'s keys)
share: the run is found by id or prefix in every session of the state directory
(store/browse.py), and the live server that owns it is asked on its control socket, with
the run's full id. Every way this can fail is one line for a person (`OwnerFailed`);
`OwnerBusy` is the one worth trying again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import attrs

from subagent_host.backends.liveness import process_is_alive
from subagent_host.client import Host
from subagent_host.client.control import ControlBusy, ControlUnreachable, call_at
from subagent_host.client.errors import HostError
from subagent_host.rpc.control_socket import UntrustedSocket, socket_path
from subagent_host.runs.state import Run
from subagent_host.store.browse import BrowseError, Owner, StateBrowser
from subagent_host.terminal.views import short_id

R = TypeVar("R")


class OwnerFailed(Exception):
    """The run's server could not do what was asked; the message is one line for a person."""


class OwnerBusy(OwnerFailed):
    """The run's server holds as many control connections as it takes: trying again
    once one of them closes can work."""


@attrs.frozen
class Action:
    """How a failure names what was being done: `stop` says `not stopping 1a2b3c4d: …`
    and `stop it through that server's client`."""

    doing: str
    """`stopping`, `sending to`: what `not … <run>` says was not done."""
    instead: str
    """`stop it`: what to do through the owning server's client instead."""


async def locate(state_dir: Path, reference: str) -> tuple[Run, Owner | None]:
    """The run `reference` names (id or prefix of >= 8, any session) and the server
    instance that recorded it; OwnerFailed when it is unknown or ambiguous."""
    try:
        # Off the loop: `watch` calls this from its own loop, which must keep drawing.
        return await asyncio.to_thread(_find, state_dir, reference)
    except BrowseError as exc:
        raise OwnerFailed(str(exc)) from exc


def ended(run: Run) -> OwnerFailed:
    """What a request to a live child of a run that has ended says."""
    return OwnerFailed(f"run {short_id(run.run_id)} is not running: it has ended: {run.status}")


async def ask_owner(
    state_dir: Path,
    run: Run,
    owner: Owner | None,
    action: Action,
    call: Callable[[Host], Awaitable[R]],
) -> R:
    """`call(host)` on the control socket of the live server that owns `run` (a run that
    is not terminal). OwnerFailed when that server is gone (that run is no longer running:
    the next server on this state directory marks it `interrupted` and ends what it left),
    cannot be reached or trusted, or refuses; OwnerBusy when it is at its bound of
    control connections."""
    name = short_id(run.run_id)
    if owner is None or owner.ended_at is not None:
        raise OwnerFailed(f"run {name} is not running: {_gone(None)}")
    if not process_is_alive(owner.pid, owner.create_time):
        raise OwnerFailed(f"run {name} is not running: {_gone(owner.pid)}")
    try:
        return await call_at(socket_path(state_dir, owner.instance_id), pid=owner.pid, call=call)
    except ControlUnreachable as exc:
        raise OwnerFailed(
            f"the server that runs {name} (pid {owner.pid}) does not answer on its control "
            f"socket ({exc}); {action.instead} through that server's client"
        ) from exc
    except ControlBusy as exc:
        raise OwnerBusy(
            f"the server that runs {name} (pid {owner.pid}) is busy ({exc}); try again once "
            "one of its control connections closes"
        ) from exc
    except UntrustedSocket as exc:
        raise OwnerFailed(
            f"not {action.doing} {name}: its control socket is not trusted ({exc})"
        ) from exc
    except HostError as exc:
        raise OwnerFailed(f"the server that runs {name} refused: {exc.message}") from exc
    except ConnectionError as exc:
        raise OwnerFailed(f"the server that runs {name} went away: {exc}") from exc


def _find(state_dir: Path, reference: str) -> tuple[Run, Owner | None]:
    with StateBrowser.open(state_dir) as browser:
        run = browser.find(reference)
        return run, browser.owner(run.run_id)


def _gone(pid: int | None) -> str:
    who = f"the server process {pid}" if pid is not None else "the server that ran it"
    return (
        f"{who} is gone; the next server started on this state directory marks it "
        "interrupted and ends any process it left"
    )
