"""`RunStore`, the store's one entry point: run history, approvals and recovery, as async
methods on the loop.

Everything outside this package speaks to the store through `RunStore` and
never sees SQL, the store's thread or its connection. Its invariants:

- Write-behind: what runs do is recorded as it happens (`record`, `touch`,
  ...) and written once per turn of the loop on the store's own thread; the
  loop never waits for the disk.
- Durable before a reply names a run: `written(run)` returns once everything
  recorded so far is committed and raises `RecordFailed` when the run's newest
  write failed (a task-mode run that ends within its first moments is written
  once, with its end: see recorder.py).
- Crash recovery: a server registers itself at start (`start`); runs left
  live by servers that are gone are marked `interrupted` exactly once and the
  processes they left are ended (recovery.py).
- Runs are found wherever they are (`find`, `summaries`, `events_after`):
  this server's live ones in memory, every other one on disk. A run of
  another session is reported exactly like a run that does not exist
  (protocol.md §4, -32001); a run id may be abbreviated to a unique prefix of at
  least `MIN_PREFIX` characters.
- Approvals (preflight ids, resume tokens) follow the domain's rules
  (runs/approvals.py); a refusal comes back as a `Refusal`, never raised.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path

import attrs

from subagent_host.backends.liveness import process_is_alive
from subagent_host.backends.sessions import SessionFiles
from subagent_host.backends.supervisor import Supervisor
from subagent_host.errors import AmbiguousRunId, RunNotFound
from subagent_host.runs.approvals import (
    PERSISTENCE_UNAVAILABLE,
    Refusal,
    ResumeGrant,
    new_secret,
    persistence_problem,
)
from subagent_host.runs.state import Run, RunEvent, utc_now
from subagent_host.store import approvals, instances, reads
from subagent_host.store.database import Database, open_database
from subagent_host.store.reads import MIN_PREFIX
from subagent_host.store.recorder import Recorder
from subagent_host.store.recovery import start_instance
from subagent_host.store.run_ids import RunIds
from subagent_host.values.choices import Persistence
from subagent_host.values.error_data import RunIdMatches, RunRef
from subagent_host.values.facts import RunSummary
from subagent_host.values.json_values import JsonObject

__all__ = ["MIN_PREFIX", "PERSISTENCE_UNAVAILABLE", "Refusal", "RunStore"]


class RunStore:
    """Run history, approvals and this server's record on one state directory."""

    def __init__(self, db: Database, history_limit: int) -> None:
        self._db = db
        self.history_limit = history_limit
        self._instance: str | None = None
        # Runs `start` deleted with idle sessions, until `on_pruned` hears of them.
        self._pruned_at_start: tuple[str, ...] = ()
        self._recorder: Recorder | None = None
        self._run_ids = RunIds()
        self.live: Callable[[str], Run | None] = lambda _run_id: None
        """This server's run by id, if it holds it (set once the orchestrator exists)."""

    @classmethod
    async def open(cls, state_dir: Path, history_limit: int) -> RunStore:
        """The store on `state_dir`; if that cannot be used, one in memory (one warning)."""
        return cls(await open_database(state_dir), history_limit)

    @property
    def durable(self) -> bool:
        """True when what is written here outlives this process (a database file)."""
        return self._db.durable

    @property
    def persistence(self) -> Persistence:
        """`sqlite` or `memory`, as `ping` reports it."""
        return self._db.persistence

    @property
    def commits(self) -> int:
        """Write transactions committed so far."""
        return self._db.commits

    def needs_durable(self, needs: str) -> str | None:
        """Why `needs` cannot be had from this store (a sentence), or None when it can."""
        return persistence_problem(self.durable, needs)

    # --- this server ---------------------------------------------------------------------

    async def start(
        self, supervisor: Supervisor, grace_ms: int, sessions: SessionFiles | None = None
    ) -> asyncio.Task[int]:
        """Register this server; interrupt dead servers' runs; start ending their leftovers.

        Returns the task ending leftover processes: await it before exiting (having
        handed what is in its grace to the guardian: `Supervisor.hand_over_sweeps`).
        """
        generation, reserved = self._run_ids.reservation() or (0, None)
        self._instance, cleaning, self._pruned_at_start = await start_instance(
            self._db, supervisor, grace_ms, sessions, reserved
        )
        self._run_ids.confirm(generation)
        self._recorder = Recorder(self._db, self._instance, self.history_limit, self._run_ids)
        return cleaning

    @property
    def instance_id(self) -> str | None:
        """This server's id on the state directory, once `start` registered it."""
        return self._instance

    async def live_instances(self) -> set[str]:
        """The ids of the server instances on this state directory whose process runs."""
        return await self._db.call(instances.live_instances, self._db, process_is_alive)

    async def live_owner(self, run_id: str) -> tuple[str, int] | None:
        """The instance id and pid of the live server process that recorded `run_id`;
        None when no server did or that one has ended."""
        return await self._db.call(instances.live_owner, self._db, run_id, process_is_alive)

    def new_run_id(self) -> str:
        """An id for a new run, reserved on disk when it can be (run_ids.py)."""
        return self._run_ids.take()

    async def end(self) -> None:
        """Everything recorded is written; this server's record says it has ended."""
        await self.written()
        if self._instance is not None:
            await self._db.call(instances.end_instance, self._db, self._instance, utc_now())

    async def close(self) -> None:
        await self._db.close()

    # --- recording (write-behind) -------------------------------------------------------

    @property
    def recorder(self) -> Recorder:
        assert self._recorder is not None, "the store has not been started"
        return self._recorder

    def record(self, run: Run, event: RunEvent) -> None:
        """The run state machine's listener: the run and its new event, written this turn."""
        self.recorder(run, event)

    def touch(self, run: Run) -> None:
        """A change that came without an event (a pid, resources)."""
        self.recorder.touch(run)

    def record_projection(
        self, run: Run, index: int, sealing: Callable[[], tuple[str, str]]
    ) -> None:
        """A child's launch projection, written with the run: `sealing` gives its stored
        JSON and digest (called once, after the launch's turn of the loop)."""
        self.recorder.projection(run, index, sealing)

    def record_workflow(self, run: Run, definition: JsonObject) -> None:
        """A workflow's definition (its item templates, no environment values)."""
        self.recorder.workflow(run, definition)

    def record_text(self, run: Run, index: int, text: str) -> None:
        """A workflow child's final text, for the steps after it on a resume."""
        self.recorder.text(run, index, text)

    def watch_backlog(self, full: Callable[[], None], drained: Callable[[], None]) -> None:
        """`full` when too many events wait for the disk, `drained` once few do."""
        self.recorder.watch_backlog(full, drained)

    def on_pruned(self, forget: Callable[[Sequence[str]], None]) -> None:
        """Tell `forget` the ids of the runs each write pruned (before any waiter resumes),
        and at once those `start` deleted with idle sessions."""
        self.recorder.on_pruned = forget
        pruned, self._pruned_at_start = self._pruned_at_start, ()
        if pruned:
            forget(pruned)

    async def written(self, run: Run | None = None) -> None:
        """Return once everything recorded so far is committed; with `run`, raise
        `RecordFailed` if its newest write failed."""
        if self._recorder is not None:
            await self._recorder.durable(run)

    @contextlib.contextmanager
    def unrecorded(self, run: Run) -> Iterator[None]:
        """Write nothing of `run` while inside (it is being given up on)."""
        with self.recorder.unrecorded(run):
            yield

    # --- runs, wherever they are ----------------------------------------------------------

    async def find(self, session_id: str, run_id: str) -> Run:
        """This session's run `run_id` (or unique prefix); RunNotFound / AmbiguousRunId."""
        run = self.live(run_id)
        if run is None:
            await self.written()  # so a run launched a moment ago is on disk
            run = await self.load_run(run_id)
            if run is None and len(run_id) >= MIN_PREFIX:
                run = await self._by_prefix(session_id, run_id)
        if run is None or run.session_id != session_id:
            short = len(run_id) < MIN_PREFIX
            hint = f" (a run id prefix needs at least {MIN_PREFIX} characters)" if short else ""
            raise RunNotFound(f"no run {run_id!r} in this session{hint}", data=RunRef(run_id))
        return self.live(run.run_id) or run

    async def load_run(self, run_id: str) -> Run | None:
        """A run as it was last written (a copy; no events)."""
        return await self._db.call(reads.load_run, self._db, run_id)

    async def _by_prefix(self, session_id: str, prefix: str) -> Run | None:
        ids = await self._db.call(reads.run_ids_with_prefix, self._db, session_id, prefix)
        if len(ids) > 1:
            raise AmbiguousRunId(
                f"{prefix!r} is the start of more than one run id: give more of it",
                data=RunIdMatches(prefix, tuple(ids)),
            )
        if not ids:
            return None
        return self.live(ids[0]) or await self.load_run(ids[0])

    async def summaries(self, session_id: str) -> list[RunSummary]:
        """This session's runs, newest first, across server restarts."""
        await self.written()
        summaries = await self._db.call(reads.list_runs, self._db, session_id, self.history_limit)
        return [self._fresh(summary) for summary in summaries]

    def _fresh(self, summary: RunSummary) -> RunSummary:
        live = self.live(summary.run_id)
        if live is None:
            return summary
        # Memory is ahead of the last write: its status, end and usage stand.
        fresh = (live.status, live.ended_at, live.usage)
        if fresh == (summary.status, summary.ended_at, summary.usage):
            return summary
        return attrs.evolve(summary, status=fresh[0], ended_at=fresh[1], usage=fresh[2])

    async def events_after(self, run: Run, seq: int) -> list[RunEvent]:
        """Every retained event of the run after `seq`: from memory while it holds
        them (a live run), else from disk. Dropped events are not there: the first
        one returned may come after `seq + 1`."""
        held = list(run.events)
        if held and held[0].seq <= max(seq + 1, run.first_retained_seq):
            return [event for event in held if event.seq > seq]
        await self.written()
        return await self._db.call(reads.events_after, self._db, run.run_id, seq)

    async def stored_projection(self, run_id: str, index: int) -> tuple[str | None, str | None]:
        """A child's stored launch projection and its digest (None, None if none)."""
        return await self._db.call(reads.load_projection, self._db, run_id, index)

    async def stored_workflow(self, run_id: str) -> tuple[str | None, dict[int, str]]:
        """A workflow's stored definition (None if none) and its children's final texts."""
        return await self._db.call(reads.load_workflow, self._db, run_id)

    async def cleanup_pending(self, run_id: str) -> bool:
        """True while a server is still ending what this interrupted run left."""
        return await self._db.call(instances.cleanup_pending, self._db, run_id)

    # --- approvals --------------------------------------------------------------------------

    async def save_preflight(
        self, session_id: str, fingerprint: str, ttl: timedelta
    ) -> tuple[str, datetime]:
        """Issue a preflight id for this session and fingerprint; its id and expiry."""
        now = utc_now()
        preflight_id, expires = new_secret("pf-"), now + ttl
        await self._db.call(
            approvals.save_preflight, self._db, preflight_id, session_id, fingerprint, now, expires
        )
        return preflight_id, expires

    async def take_preflight(
        self, preflight_id: str, session_id: str, fingerprint: str
    ) -> Refusal | None:
        """Use the preflight id for this launch, once; else why not."""
        return await self._db.call(
            approvals.take_preflight, self._db, preflight_id, session_id, fingerprint, utc_now()
        )

    async def save_token(self, grant: ResumeGrant) -> str:
        """Issue a resume token for `grant`; the token (stored only as its hash)."""
        token = new_secret("rt-")
        await self._db.call(approvals.save_token, self._db, token, grant, utc_now())
        return token

    async def check_token(self, token: str, session_id: str) -> ResumeGrant | Refusal:
        """What the token grants this session now, or why it grants nothing (not used up)."""
        return await self._db.call(approvals.check_token, self._db, token, session_id, utc_now())

    async def redeem_token(self, token: str, session_id: str) -> Refusal | None:
        """Use the token up, once: the rules are checked again with the write lock held."""
        return await self._db.call(approvals.redeem_token, self._db, token, session_id, utc_now())
