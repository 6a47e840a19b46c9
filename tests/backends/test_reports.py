"""What adapters say of a failed child: the stderr line that tells why."""

from __future__ import annotations

import pytest

from subagent_host.backends.reports import first_meaningful_line, last_meaningful_line

# What Node 20 prints for an uncaught exception: the source line first, the reason after.
NODE_CRASH = (
    "/app/cli.js:1\n"
    'function f() { throw new TypeError("cannot read the settings"); }\n'
    "               ^\n\n"
    "TypeError: cannot read the settings\n"
    "    at f (/app/cli.js:1:22)\n"
    "    at node:internal/main/run_main_module:28:49\n\n"
    "Node.js v20.20.2\n"
)

# What pi 0.x prints on stderr, and nothing on stdout, for a provider it does not know.
PI_UNKNOWN_PROVIDER = (
    'Error: Unknown provider "local". Use --list-models to see available providers/models.\n'
)


@pytest.mark.parametrize(
    ("stderr", "line"),
    [
        (
            PI_UNKNOWN_PROVIDER,
            'Unknown provider "local". Use --list-models to see available providers/models.',
        ),
        (
            "TypeError: x is not a function\n    at main (/app/cli.js:10:5)\n    at node:x\n\n",
            "x is not a function",
        ),
        ('Traceback (most recent call last):\n  File "a.py", line 1\nValueError: bad\n', "bad"),
        ("warming up\n----\n   \n", "warming up"),
        (
            "failed to build\nSee:\n  https://example.org/help\n  ./docs/build.md\n",
            "failed to build",
        ),
        (NODE_CRASH, "cannot read the settings"),
        ("", None),
        ("\n  \n---\n", None),
    ],
)
def test_the_last_meaningful_stderr_line_skips_blanks_stack_frames_and_labels(
    stderr: str, line: str | None
) -> None:
    assert last_meaningful_line(stderr) == line


@pytest.mark.parametrize(
    ("stderr", "line"),
    [
        (
            'Warning: Model "m" not found. Using custom model id.\nNo API key found for m.\n\nUse '
            "/login. See:\n  /docs/models.md\n",
            "No API key found for m.",
        ),
        ("/docs/a.md\nError: Unknown provider\nmore\n", "Unknown provider"),
        ("Warning: only this\n", None),
        # A crash is no reason printed first: its exception is.
        (NODE_CRASH, "cannot read the settings"),
    ],
)
def test_the_first_meaningful_stderr_line_passes_over_warnings_and_paths(
    stderr: str, line: str | None
) -> None:
    assert first_meaningful_line(stderr) == line
