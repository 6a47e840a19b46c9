"""Stop a run from outside its server: find it in the state directory, reach its owner.

`stop_run` is what `subagent-host stop` and `watch`'s `s` key call. The run is found by
id or prefix in every session (store/browse.py); the server that owns it is reached on
its control socket (protocol.md §10.1) and asked to `stop` it, which it does exactly as
for its own client: SIGTERM, the grace, SIGKILL, the events to that client.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Final

from subagent_host.backends.liveness import process_is_alive
from subagent_host.client.control import ControlBusy, ControlUnreachable, stop_at
from subagent_host.client.errors import HostError
from subagent_host.handlers.snapshots import run_snapshot
from subagent_host.rpc.control_socket import UntrustedSocket, socket_path
from subagent_host.rpc.wire import RunSnapshot
from subagent_host.runs.state import Run
from subagent_host.store.browse import BrowseError, Owner, StateBrowser
from subagent_host.terminal.views import short_id

REASON: Final = "stopped by subagent-host stop"


class StopFailed(Exception):
    """The run could not be stopped; the message is one line for a person."""


class StopBusy(StopFailed):
    """The run's server holds as many control connections as it takes: trying again
    once one of them closes can work."""


async def stop_run(
    state_dir: Path, reference: str, grace_ms: int | None, *, reason: str = REASON
) -> RunSnapshot:
    """Stop the run `reference` names (id or prefix of >= 8) and return its final snapshot.

    A run that had already ended comes back as recorded, with `already_terminal` true
    (nothing to do is no failure). Raises StopFailed when the run is unknown or
    ambiguous, when its server is gone (that run is no longer running: the next server
    on this state directory marks it `interrupted` and ends what it left), or when that
    server cannot be reached or trusted. Waits until the run's processes are gone, up
    to the grace (the server's `--grace-ms` when `grace_ms` is None).
    """
    try:
        # Off the loop: `watch` calls this from its own loop, which must keep drawing.
        run, owner = await asyncio.to_thread(_find, state_dir, reference)
    except BrowseError as exc:
        raise StopFailed(str(exc)) from exc
    if run.is_terminal:
        return run_snapshot(run, already_terminal=True)
    name = short_id(run.run_id)
    if owner is None or owner.ended_at is not None:
        raise StopFailed(f"run {name} is not running: {_gone(None)}")
    if not process_is_alive(owner.pid, owner.create_time):
        raise StopFailed(f"run {name} is not running: {_gone(owner.pid)}")
    try:
        return await stop_at(
            socket_path(state_dir, owner.instance_id),
            pid=owner.pid,
            run_id=run.run_id,
            grace_ms=grace_ms,
            reason=reason,
        )
    except ControlUnreachable as exc:
        raise StopFailed(
            f"the server that runs {name} (pid {owner.pid}) does not answer on its control "
            f"socket ({exc}); stop it through that server's client"
        ) from exc
    except ControlBusy as exc:
        raise StopBusy(
            f"the server that runs {name} (pid {owner.pid}) is busy ({exc}); try again once "
            "one of its control connections closes"
        ) from exc
    except UntrustedSocket as exc:
        raise StopFailed(f"not stopping {name}: its control socket is not trusted ({exc})") from exc
    except HostError as exc:
        raise StopFailed(f"the server that runs {name} refused: {exc.message}") from exc
    except ConnectionError as exc:
        raise StopFailed(f"the server that runs {name} went away: {exc}") from exc


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
