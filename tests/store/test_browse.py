"""The read-only view of a state directory: runs of several sessions and servers, found by
prefix, read while a server writes, never changed by reading."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from subagent_host.client import SpawnItem
from subagent_host.store.browse import BrowseError, LaunchSummary, StateBrowser
from subagent_host.store.schema import DB_NAME
from tests.client.conftest import started

pytestmark = pytest.mark.e2e


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def test_runs_of_every_session_and_server_are_listed_newest_first(tmp_path: Path) -> None:
    async with started(tmp_path, "ndjson", "--session", "alpha") as (host, _seen):
        first = await host.spawn(command=("echo", "one"), mode="task", label="first")
    async with started(tmp_path, "ndjson", "--session", "beta") as (host, _seen):
        second = await host.spawn(command=("echo", "two"), mode="task")
        with StateBrowser.open(tmp_path / "state") as browser:
            listed = browser.runs()
            assert [item.run.run_id for item in listed] == [second.run_id, first.run_id]
            assert [item.run.session_id for item in listed] == ["beta", "alpha"]
            assert listed[1].run.label == "first"
            assert [item.run.run_id for item in browser.runs(session_id="alpha")] == [first.run_id]
            assert browser.runs(limit=1)[0].run.run_id == second.run_id
            owner = browser.owner(second.run_id)
            assert owner is not None and host.process is not None
            assert owner.pid == host.process.pid and owner.ended_at is None
            found = browser.find(first.run_id[:8])
            assert found.run_id == first.run_id and str(found.status) == "completed"
            assert found.children[0].exit_code == 0
            assert [e.type for e in browser.events_after(first.run_id, 0)][-1] == "status"


async def test_a_short_or_unknown_reference_is_one_clear_line(tmp_path: Path) -> None:
    async with started(tmp_path) as (host, _seen):
        await host.spawn(command=("true",), mode="task")
    with StateBrowser.open(tmp_path / "state") as browser:
        with pytest.raises(BrowseError, match="needs at least 8 characters"):
            browser.find("abc")
        with pytest.raises(BrowseError, match="no run 'zzzzzzzzzz'"):
            browser.find("zzzzzzzzzz")


async def test_reading_changes_nothing_and_a_missing_database_is_said(tmp_path: Path) -> None:
    with pytest.raises(BrowseError, match="no runs recorded"):
        StateBrowser.open(tmp_path / "nowhere")
    async with started(tmp_path) as (host, _seen):
        await host.spawn(command=("true",), mode="task")
    database = tmp_path / "state" / DB_NAME
    before = _digest(database)
    with StateBrowser.open(tmp_path / "state") as browser:
        version = browser.data_version()
        assert len(browser.runs()) == 1
        assert browser.data_version() == version
    assert _digest(database) == before


async def test_each_childs_latest_activity_streamed_output_and_launch_are_read(
    tmp_path: Path,
) -> None:
    async with started(tmp_path) as (host, _seen):
        snap = await host.spawn(
            tasks=(
                SpawnItem(command=("sh", "-c", "echo first; echo second")),
                SpawnItem(command=("echo", "other")),
            ),
            mode="task",
            stream=True,
        )
        quiet = await host.spawn(command=("echo", "unstreamed"), mode="task")
    with StateBrowser.open(tmp_path / "state") as browser:
        latest = browser.latest_activity(snap.run_id)
        assert latest[0].strip().splitlines()[-1] == "second"
        assert latest[1] == "other\n"
        assert browser.streamed_output(snap.run_id, 0) == "first\nsecond\n"
        assert browser.latest_activity(quiet.run_id) == {}
        assert browser.streamed_output(quiet.run_id, 0) == ""
        launches = browser.launches(snap.run_id)
        assert launches[1] == LaunchSummary("command", ("echo", "other"), None)
        assert launches[0].argv[:2] == ("sh", "-c")


async def test_a_database_that_cannot_be_read_any_more_is_one_clear_line(tmp_path: Path) -> None:
    async with started(tmp_path) as (host, _seen):
        await host.spawn(command=("true",), mode="task")
    browser = StateBrowser.open(tmp_path / "state")
    browser.data_version()
    browser.close()
    with pytest.raises(BrowseError, match="cannot read the run history"):
        browser.data_version()
