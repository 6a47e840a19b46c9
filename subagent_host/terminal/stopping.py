"""Stop a run from outside its server: find it in the state directory, reach its owner.

`stop_run` is what `subagent-host stop` and `watch`'s `s` key call. The run is found by
id or prefix in every session (store/browse.py); the server that owns it is reached on
its control socket (protocol.md §10.1, `terminal/owners.py`) and asked to `stop` it,
which it does exactly as for its own client: SIGTERM, the grace, SIGKILL, the events to
that client.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from subagent_host.handlers.snapshots import run_snapshot
from subagent_host.rpc.wire import RunSnapshot
from subagent_host.terminal.owners import Action, OwnerBusy, OwnerFailed, ask_owner, locate

REASON: Final = "stopped by subagent-host stop"
STOPPING: Final = Action("stopping", "stop it")

# The names `stop` and `watch` know these failures by.
StopFailed = OwnerFailed
StopBusy = OwnerBusy


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
    run, owner = await locate(state_dir, reference)
    if run.is_terminal:
        return run_snapshot(run, already_terminal=True)
    return await ask_owner(
        state_dir,
        run,
        owner,
        STOPPING,
        lambda host: host.stop(run_id=run.run_id, grace_ms=grace_ms, reason=reason),
    )
