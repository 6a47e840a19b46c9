"""The database's schema: its version and the migrations that reach it.

A state directory written by any earlier server opens here: each migration
moves the schema one version forward, in one immediate transaction, and a
database of a newer schema than this server knows is refused untouched.
"""

from __future__ import annotations

import sqlite3
from typing import Final

from subagent_host.state_layout import DB_NAME

__all__ = [
    "BUSY_TIMEOUT_MS",
    "DB_NAME",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "StoreError",
    "check_version",
    "migrate",
]

# How long a statement waits for another connection's lock (a writer's, or a reader's
# checkpoint) before it fails: every connection to a state directory uses it.
BUSY_TIMEOUT_MS: Final = 10_000

SCHEMA_VERSION: Final = 3


class StoreError(Exception):
    """The state directory or its database cannot be used."""


# Each entry moves the schema from version i to i + 1. Never edit one that has
# shipped: add the next.
MIGRATIONS: Final[tuple[str, ...]] = (
    """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE instances (
        instance_id TEXT PRIMARY KEY,
        pid INTEGER NOT NULL,
        create_time REAL NOT NULL,
        started_at TEXT NOT NULL,
        ended_at TEXT
    );
    CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL,
        instance_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        status TEXT NOT NULL,
        created_at TEXT NOT NULL,
        ended_at TEXT,
        label TEXT,
        last_seq INTEGER NOT NULL,
        record TEXT NOT NULL
    );
    CREATE INDEX runs_by_session ON runs (session_id, created_at DESC, run_id);
    CREATE INDEX runs_by_status ON runs (status) WHERE status IN ('queued', 'running');
    CREATE TABLE children (
        run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        idx INTEGER NOT NULL,
        projection TEXT,
        projection_digest TEXT,
        PRIMARY KEY (run_id, idx)
    ) WITHOUT ROWID;
    CREATE TABLE attempts (
        run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        idx INTEGER NOT NULL,
        attempt INTEGER NOT NULL,
        status TEXT NOT NULL,
        pid INTEGER,
        pgid INTEGER,
        create_time REAL,
        record TEXT NOT NULL,
        PRIMARY KEY (run_id, idx, attempt)
    ) WITHOUT ROWID;
    CREATE TABLE events (
        run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        record TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    ) WITHOUT ROWID;
    CREATE TABLE resume_tokens (
        token_hash TEXT PRIMARY KEY,
        session_id TEXT NOT NULL,
        run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        idx INTEGER NOT NULL,
        contract_digest TEXT NOT NULL,
        follow_up_digest TEXT NOT NULL,
        message TEXT NOT NULL,
        overrides TEXT NOT NULL,
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        consumed INTEGER NOT NULL DEFAULT 0,
        consumed_at TEXT
    );
    CREATE TABLE preflights (
        preflight_id TEXT PRIMARY KEY,
        session_id TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        consumed INTEGER NOT NULL DEFAULT 0
    );
    """,
    # v2: processes that interrupted runs may have left, until a server has ended
    # them (a server that dies while doing so leaves the job to the next one).
    """
    CREATE TABLE cleanups (
        run_id TEXT NOT NULL,
        pid INTEGER,
        create_time REAL
    );
    CREATE INDEX cleanups_by_run ON cleanups (run_id);
    """,
    # v3: workflows. The definition (item templates, without environment values)
    # and each completed child's text, so a resumed workflow can carry on.
    """
    CREATE TABLE workflows (
        run_id TEXT PRIMARY KEY REFERENCES runs (run_id) ON DELETE CASCADE,
        definition TEXT NOT NULL
    ) WITHOUT ROWID;
    CREATE TABLE workflow_texts (
        run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
        idx INTEGER NOT NULL,
        text TEXT NOT NULL,
        PRIMARY KEY (run_id, idx)
    ) WITHOUT ROWID;
    """,
)


def check_version(db: sqlite3.Connection) -> int:
    """The database's schema version; StoreError if it is newer than this server's."""
    version: int = db.execute("PRAGMA user_version").fetchone()[0]
    if version > SCHEMA_VERSION:
        raise StoreError(
            f"the database has schema version {version}, newer than this server "
            f"understands ({SCHEMA_VERSION}); use a newer subagent-host"
        )
    return version


def migrate(db: sqlite3.Connection) -> None:
    db.execute("BEGIN IMMEDIATE")
    try:
        version = check_version(db)  # again: another server may have migrated meanwhile
        for target in range(version, SCHEMA_VERSION):
            for statement in MIGRATIONS[target].split(";"):
                if statement.strip():
                    db.execute(statement)
            db.execute(f"PRAGMA user_version = {target + 1}")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")
