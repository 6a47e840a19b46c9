"""The client library loads none of the server: a program that only speaks to servers
imports no pygls and no lsprotocol."""

from __future__ import annotations

import subprocess
import sys

# Run in a fresh interpreter: this test process has the server loaded already.
LOADED_AFTER_IMPORT = """
import sys
import subagent_host.client
import subagent_host.client.control
print(" ".join(sorted(sys.modules)))
"""
SERVER_ONLY = ("pygls", "lsprotocol")


def test_importing_the_client_library_loads_neither_pygls_nor_lsprotocol() -> None:
    done = subprocess.run(  # noqa: TID251 - a one-shot interpreter, no event loop here
        [sys.executable, "-c", LOADED_AFTER_IMPORT], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    loaded = {name.split(".")[0] for name in done.stdout.split()}
    assert "subagent_host" in loaded  # the import ran
    assert loaded & set(SERVER_ONLY) == set(), loaded & set(SERVER_ONLY)
