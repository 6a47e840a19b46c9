"""The store: run history, approvals and crash recovery in SQLite, behind one entry point
(`RunStore`)."""
