"""Run history on disk: SQLite under `--state-dir`, written from one thread of its own.

Durability follows RELIABILITY.md ("SQLite for run history"): WAL with
`synchronous=NORMAL` (consistent and durable across crashes of the server), a
busy timeout, and `BEGIN IMMEDIATE` for every transaction that reads before it
writes, so two servers on one state directory serialise instead of failing.
A state directory the server creates is 0700 and the database files 0600; one that
exists is used as it is, never chmod'ed, and only when it is safe (`state_layout`):
the database's files are opened only as regular files of ours, never through a
symlink another user planted.

Every statement runs on the store's own thread through one connection: the
event loop hands work over (`call`, `submit`) and never waits on the disk
itself. Work submitted runs in order, so awaiting the newest piece means
everything before it is committed too.

A state directory or database that cannot be used does not stop the server
(`open_database`): the same schema is then kept in an in-memory SQLite database,
so the recorder, the lookups and pruning work unchanged, and nothing survives
the process. Such a store is not `durable`; whatever needs an approval to
outlive the moment (preflight ids, resume tokens) asks that first. A database
this server cannot use is never written: not migrated, not repaired, not
deleted.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import errno
import logging
import os
import sqlite3
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from subagent_host.state_layout import database_problem, private_directory
from subagent_host.store.schema import (
    BUSY_TIMEOUT_MS,
    DB_NAME,
    StoreError,
    check_version,
    migrate,
)
from subagent_host.values.choices import Persistence

logger = logging.getLogger(__name__)


T = TypeVar("T")


class Database:
    """The database and the one thread that talks to it."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        """The database file; None for a store kept in memory."""
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="store"
        )
        self._db: sqlite3.Connection | None = None
        self.commits = 0
        """Write transactions committed so far (what a short run costs is counted in them)."""

    @classmethod
    async def open(cls, state_dir: Path) -> Database:
        """Create the state directory (0700) and database (0600) if needed; migrate it.
        Raises StoreError when they cannot be used, or are not safe to (`state_layout`)."""
        store = cls(state_dir / DB_NAME)
        try:
            await store.call(store._connect, state_dir)
        except BaseException:
            store._executor.shutdown(wait=False)
            raise
        return store

    @classmethod
    async def in_memory(cls) -> Database:
        """A store with the same schema that lives and dies with this process."""
        store = cls(None)
        await store.call(store._connect_memory)
        return store

    @property
    def durable(self) -> bool:
        """True when what is written here outlives this process (a database file)."""
        return self.path is not None

    @property
    def persistence(self) -> Persistence:
        """`sqlite` or `memory`, as `ping` reports it."""
        return Persistence.SQLITE if self.durable else Persistence.MEMORY

    # --- the thread's side -----------------------------------------------------------

    def _connect(self, state_dir: Path) -> None:
        try:
            self._db = self._open_file(state_dir)
        except (OSError, sqlite3.Error, StoreError) as exc:
            raise StoreError(f"cannot use the state directory {state_dir}: {exc}") from exc

    def _open_file(self, state_dir: Path) -> sqlite3.Connection:
        assert self.path is not None
        private_directory(state_dir, parents=True)
        if (problem := database_problem(state_dir)) is not None:
            raise StoreError(problem)
        old_umask = os.umask(0o077)  # the -wal and -shm files are created 0600 too
        try:
            _create_without_following(self.path)
            db = sqlite3.connect(self.path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
        finally:
            os.umask(old_umask)
        try:
            # Read before anything writes: a database that is not one, or of a newer
            # schema, is left exactly as it is (journal mode and permissions included).
            check_version(db)
            _restrict(self.path, 0o600)
            db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            _use_wal(db)
            db.execute("PRAGMA synchronous = NORMAL")
            db.execute("PRAGMA foreign_keys = ON")
            migrate(db)
        except BaseException:
            db.close()
            raise
        return db

    def _connect_memory(self) -> None:
        db = sqlite3.connect(":memory:", isolation_level=None)
        db.execute("PRAGMA foreign_keys = ON")
        migrate(db)
        self._db = db

    @property
    def db(self) -> sqlite3.Connection:
        """The connection: only for functions running on the store's thread."""
        assert self._db is not None, "the store is not open"
        return self._db

    @contextlib.contextmanager
    def immediate(self) -> Iterator[sqlite3.Connection]:
        """A write transaction that holds the write lock from its first statement."""
        db = self.db
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        self.commits += 1

    # --- the loop's side -------------------------------------------------------------

    async def call(self, fn: Callable[..., T], *args: object) -> T:
        """Run `fn(*args)` on the store's thread (after everything submitted before it)."""
        future = asyncio.wrap_future(self._executor.submit(fn, *args))
        return await future

    def submit(self, fn: Callable[..., object], *args: object) -> concurrent.futures.Future[object]:
        """Queue `fn(*args)` on the store's thread without waiting; a failure is logged.

        Once the returned future is done, everything submitted before it has run
        too (one thread, in order). Nothing wakes the loop when it completes:
        whoever needs to know awaits it (`asyncio.wrap_future`).
        """
        future = self._executor.submit(fn, *args)
        future.add_done_callback(_log_failure)
        return future

    async def drained(self) -> None:
        """Return once everything submitted so far has run.

        A no-op queued behind it: the newest future alone would not do, since a
        cancelled `call` is done before the work queued ahead of it has run.
        """
        marker = asyncio.wrap_future(self._executor.submit(_nothing))
        await asyncio.shield(asyncio.wait([marker]))

    async def close(self) -> None:
        await self.drained()
        if self._db is not None:
            await self.call(self._close)
        self._executor.shutdown(wait=True)

    def _close(self) -> None:
        if self._db is not None:
            with contextlib.suppress(sqlite3.Error):
                self._db.execute("PRAGMA optimize")
            self._db.close()
            self._db = None


def _use_wal(db: sqlite3.Connection) -> None:
    """Put the database in WAL mode (kept in the file: done once, by its first server).

    Switching needs the database to itself, and while another connection is switching
    it SQLite answers "database is locked" at once, without its busy handler: two
    servers that start together on a new state directory meet here. The one that loses waits for the
    other's switch (there is no event for another process's lock: it looks again, with
    a growing pause, for at most the busy timeout); a database already in WAL mode is
    left as it is.
    """
    pause_s, waited_s = 0.001, 0.0
    while True:
        try:
            db.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or waited_s >= BUSY_TIMEOUT_MS / 1000:
                raise
        if db.execute("PRAGMA journal_mode").fetchone()[0] == "wal":
            return  # the other server switched it
        time.sleep(pause_s)  # noqa: TID251 - the store's own thread, never the loop
        waited_s += pause_s
        pause_s = min(pause_s * 2, 0.05)


def _nothing() -> None:
    pass


def _log_failure(future: concurrent.futures.Future[object]) -> None:
    if not future.cancelled() and (exc := future.exception()) is not None:
        logger.error("a write to the run history failed: %s", exc, exc_info=exc)


def _create_without_following(path: Path) -> None:
    """Create the database file (0600 under the caller's umask) unless it exists, never
    through a symlink, and make sure what is there is a regular file of ours: SQLite
    then opens by name the file this checked (in a sticky directory nobody else may
    replace it)."""
    # Non-blocking: a FIFO put there meanwhile must not hold the store's thread.
    flags = os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StoreError(f"{path} is a symlink") from None
        raise
    try:
        info = os.fstat(fd)
    finally:
        os.close(fd)
    if not stat.S_ISREG(info.st_mode):
        raise StoreError(f"{path} is not a regular file")
    if info.st_uid != os.getuid():
        raise StoreError(f"{path} belongs to another user")


def _restrict(path: Path, mode: int) -> None:
    """Tighten permissions we own; refuse a path that is someone else's."""
    info = path.stat()
    if info.st_uid != os.getuid():
        raise StoreError(f"{path} belongs to another user")
    if stat.S_IMODE(info.st_mode) != mode:
        path.chmod(mode)


async def open_database(state_dir: Path) -> Database:
    """The store on `state_dir`; if that cannot be used, one in memory, said in one warning."""
    try:
        return await Database.open(state_dir)
    except StoreError as exc:
        logger.warning(
            "%s; keeping the run history in memory only: nothing of it survives this "
            "server, and preflight ids and resume are refused (persistence-unavailable)",
            exc,
        )
        return await Database.in_memory()
