"""The command line shows itself (protocol.md §7): every subcommand listed in `--help`
with one line, a mistyped one answered with the nearest, each with its own `--help`, and
`run WORD` for a program on PATH asked back rather than sent to an agent as a prompt."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from subagent_host.command_line import SUBCOMMANDS
from tests.e2e.harness import server_executable


def command(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: TID251 - a one-shot command, no event loop here
        [server_executable(), *argv], capture_output=True, text=True, timeout=60
    )


def test_help_lists_every_subcommand_with_one_line_each() -> None:
    done = command("--help")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for name in ("serve", "schema", "conformance", "mcp", "run", "runs", "show", "logs"):
        listed = [line for line in lines if line.split()[:1] == [name]]
        assert len(listed) == 1 and len(listed[0].split()) > 2, (name, done.stdout)
    assert set(SUBCOMMANDS) >= {"stop", "watch", "doctor", "worktrees"}
    for name in SUBCOMMANDS:
        assert any(line.split()[:1] == [name] for line in lines), name


@pytest.mark.parametrize(
    ("word", "suggestion"),
    [
        ("rnu", "'run'"),
        ("shcema", "'schema'"),
        ("confromance", "'conformance'"),
        ("dcotor", "'doctor'"),
    ],
)
def test_a_mistyped_subcommand_is_answered_with_the_nearest(word: str, suggestion: str) -> None:
    done = command(word, "--state-dir", "/nonexistent")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"subagent-host: unknown command {word!r}; did you mean {suggestion}?"
        " (see 'subagent-host --help')\n"
    )


def test_a_word_near_no_subcommand_lists_them_all() -> None:
    done = command("zzzzzz")
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "unknown command 'zzzzzz': the commands are serve, schema, conformance, mcp" in (
        done.stderr
    )


@pytest.mark.parametrize("name", sorted(SUBCOMMANDS))
def test_each_subcommand_has_its_own_help(name: str) -> None:
    done = command(name, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: subagent-host {name} "), done.stdout[:200]


def test_schema_takes_no_server_option() -> None:
    done = command("schema", "--state-dir", "/tmp")
    assert done.returncode == 2 and done.stdout == ""
    assert "unrecognized arguments: --state-dir /tmp" in done.stderr


@pytest.mark.parametrize(
    ("argv", "meant"),
    [
        (["ls"], "subagent-host run -- ls"),
        (["echo", "hi"], "subagent-host run -- echo hi"),
        (["--timeout-ms", "5000", "ls", "-la"], "subagent-host run --timeout-ms 5000 -- ls -la"),
        # An option's value that is the program's name too: `--` goes before the program.
        (["--label", "ls", "ls", "-l"], "subagent-host run --label ls -- ls -l"),
        (["--model=ls", "--label", "ls", "ls"], "subagent-host run --model=ls --label ls -- ls"),
        (["--lab", "echo", "echo", "hi"], "subagent-host run --lab echo -- echo hi"),
    ],
)
def test_run_with_a_program_on_path_asks_whether_a_command_was_meant(
    argv: list[str], meant: str
) -> None:
    assert shutil.which("ls") and shutil.which("echo")  # the programs the cases name
    done = command("run", *argv)
    assert (done.returncode, done.stdout) == (2, "")
    program = "echo" if "echo" in argv else "ls"
    assert done.stderr == (
        f"subagent-host run: {program!r} is a program on PATH; did you mean '{meant}'?"
        " (to send it as a prompt, give --backend)\n"
    )


def test_run_with_a_backend_takes_a_program_name_as_a_prompt() -> None:
    # --backend says a prompt was meant: it goes on to the other checks (here, a stray word).
    done = command("run", "--backend", "pi", "ls", "stray")
    assert done.returncode == 2
    assert done.stderr.startswith("subagent-host run: unrecognized arguments: stray ")
