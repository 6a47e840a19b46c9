"""`subagent-host mcp`'s command line: its options are serve's, checked before anything starts."""

from __future__ import annotations

import subprocess
import sys

WITHOUT_SDK = """
import sys
sys.modules["mcp"] = None  # as if the `mcp` extra were not installed
from subagent_host.cli import main
sys.exit(main(["mcp", *sys.argv[1:]]))
"""


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: TID251 - a one-shot interpreter, no event loop here
        [sys.executable, "-c", WITHOUT_SDK, *argv],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_mcp_without_the_extra_names_the_pip_command_in_one_line_and_exits_2() -> None:
    done = _run()
    assert done.returncode == 2
    assert done.stderr == (
        "subagent-host mcp: the MCP face needs the official MCP SDK, an optional extra: "
        "pip install 'subagent-host[mcp]'\n"
    )
    assert done.stdout == ""


def test_a_bad_serve_option_is_refused_in_one_line_before_anything_starts() -> None:
    done = _run("--grace-ms", "soon")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "subagent-host mcp: argument --grace-ms: 'soon' is not a whole number "
        "(see 'subagent-host mcp --help')"
    ]


def test_framing_is_not_an_option_of_mcp() -> None:
    done = _run("--framing", "lsp")
    assert done.returncode == 2
    assert "unrecognized arguments: --framing lsp" in done.stderr
