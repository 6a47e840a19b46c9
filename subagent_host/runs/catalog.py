"""Find runs wherever they are: this server's live runs in memory, every other one on disk.

Runs belong to sessions: a run of another session is reported exactly like a
run that does not exist (CONTRACT §5, -32001). A run id may be abbreviated to a
unique prefix of at least `MIN_PREFIX` characters.
"""

from __future__ import annotations

from typing import Final

import attrs

from subagent_host.errors import AmbiguousRunId, RunNotFound
from subagent_host.runs import history
from subagent_host.runs.manager import RunManager
from subagent_host.runs.recorder import Recorder
from subagent_host.runs.state import Run, RunEvent
from subagent_host.runs.store import Store
from subagent_host.values.facts import RunSummary

MIN_PREFIX: Final = 8


class RunCatalog:
    def __init__(
        self, manager: RunManager, store: Store, recorder: Recorder, history_limit: int
    ) -> None:
        self.manager = manager
        self.store = store
        self.recorder = recorder
        self.history_limit = history_limit

    async def find(self, session_id: str, run_id: str) -> Run:
        """This session's run `run_id` (or unique prefix); RunNotFound / AmbiguousRunId."""
        run = self.manager.get(run_id)
        if run is None:
            await self.recorder.durable()  # so a run launched a moment ago is on disk
            run = await self.store.call(history.load_run, self.store, run_id)
            if run is None and len(run_id) >= MIN_PREFIX:
                run = await self._by_prefix(session_id, run_id)
        if run is None or run.session_id != session_id:
            raise RunNotFound(f"no run {run_id!r} in this session", data={"runId": run_id})
        return self.manager.get(run.run_id) or run

    async def _by_prefix(self, session_id: str, prefix: str) -> Run | None:
        ids = await self.store.call(history.run_ids_with_prefix, self.store, session_id, prefix)
        if len(ids) > 1:
            raise AmbiguousRunId(
                f"{prefix!r} is the start of more than one run id: give more of it",
                data={"runId": prefix, "matches": ids},
            )
        if not ids:
            return None
        return self.manager.get(ids[0]) or await self.store.call(
            history.load_run, self.store, ids[0]
        )

    async def summaries(self, session_id: str) -> list[RunSummary]:
        """This session's runs, newest first, across server restarts."""
        await self.recorder.durable()
        summaries = await self.store.call(
            history.list_runs, self.store, session_id, self.history_limit
        )
        return [self._fresh(summary) for summary in summaries]

    def _fresh(self, summary: RunSummary) -> RunSummary:
        live = self.manager.get(summary.run_id)
        if live is None or str(live.status) == summary.status:
            return summary
        return attrs.evolve(summary, status=str(live.status), ended_at=live.ended_at)

    async def events_after(self, run: Run, seq: int) -> list[RunEvent]:
        """Every retained event of the run after `seq`: from memory while it holds
        them (a live run), else from disk. Dropped events are not there: the first
        one returned may come after `seq + 1`."""
        held = list(run.events)
        if held and held[0].seq <= max(seq + 1, run.first_retained_seq):
            return [event for event in held if event.seq > seq]
        await self.recorder.durable()
        return await self.store.call(history.events_after, self.store, run.run_id, seq)
