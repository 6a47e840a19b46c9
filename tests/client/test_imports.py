"""The client library loads none of the server: a program that only speaks to servers
imports no pygls and no lsprotocol; nor does the MCP face, a client of its serve child."""

from __future__ import annotations

import subprocess
import sys

import pytest

# Run in a fresh interpreter: this test process has the server loaded already.
LOADED_AFTER = """
import importlib, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
print(" ".join(sorted(sys.modules)))
"""
SERVER_ONLY = ("pygls", "lsprotocol")


@pytest.mark.parametrize(
    "modules",
    [
        ("subagent_host.client", "subagent_host.client.control"),
        ("subagent_host.mcp_face.server", "subagent_host.mcp_face.command"),
    ],
    ids=["client", "mcp-face"],
)
def test_importing_a_client_loads_neither_pygls_nor_lsprotocol(modules: tuple[str, ...]) -> None:
    done = subprocess.run(  # noqa: TID251 - a one-shot interpreter, no event loop here
        [sys.executable, "-c", LOADED_AFTER, *modules], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    loaded = set(done.stdout.split())
    assert set(modules) <= loaded  # the imports ran
    top_level = {name.split(".")[0] for name in loaded}
    assert top_level & set(SERVER_ONLY) == set(), top_level & set(SERVER_ONLY)
