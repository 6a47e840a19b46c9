"""`subagent-host doctor` as a person runs it: a process of its own, one line per check."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import psutil
import pytest

from tests.backends.fixtures.record_acp import qwen_args
from tests.backends.fixtures.tiny_acp import tiny_agent
from tests.e2e.agents import AGENT_BIN, agent_path

pytestmark = pytest.mark.e2e

DOCTOR_TIMEOUT_S = 60.0
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"


# Credentials as each CLI keeps them after its login; the doctor must never print them.
SECRETS = ("sk-pi-secret", "sk-claude-secret", "sk-codex-secret")


def environment(tmp_path: Path, path: str, *, logged_in: bool = True) -> dict[str, str]:
    """A home of the test's own, pi's agent directory with a valid models.json, and PATH;
    with `logged_in`, each agent CLI's credentials in its own files there."""
    home = tmp_path / "home"
    agent_dir = tmp_path / "pi-agent"
    for directory in (home, agent_dir, tmp_path / "tmp", home / ".claude", home / ".codex"):
        directory.mkdir(exist_ok=True)
    (agent_dir / "models.json").write_text(json.dumps({"providers": {"mock": {}}}))
    if logged_in:
        pi_key = {"anthropic": {"type": "api_key", "key": SECRETS[0]}}
        (agent_dir / "auth.json").write_text(json.dumps(pi_key))
        claude_login = {"claudeAiOauth": {"accessToken": SECRETS[1], "refreshToken": "r"}}
        (home / ".claude" / ".credentials.json").write_text(json.dumps(claude_login))
        (home / ".codex" / "auth.json").write_text(json.dumps({"OPENAI_API_KEY": SECRETS[2]}))
    kept = {k: v for k, v in os.environ.items() if k in ("LANG", "LC_ALL", "SYSTEMROOT")}
    return {
        **kept,
        "PATH": path,
        "HOME": str(home),
        "TMPDIR": str(tmp_path / "tmp"),  # the doctor's scratch state: found by the scan below
        "XDG_STATE_HOME": str(tmp_path / "xdg-state"),
        "XDG_CONFIG_HOME": str(tmp_path / "xdg-config"),
        "PI_CODING_AGENT_DIR": str(agent_dir),
        "PI_OFFLINE": "1",
        "PI_SKIP_VERSION_CHECK": "1",
    }


async def doctor(tmp_path: Path, env: dict[str, str], *args: str) -> tuple[int, list[str]]:
    """Run the doctor; its exit status and lines. Afterwards no process it started is left."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "subagent_host",
        "doctor",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    )
    async with asyncio.timeout(DOCTOR_TIMEOUT_S):
        out, err = await process.communicate()
    assert err == b"", err
    left = []
    for found in psutil.process_iter(["cmdline"]):
        if any(str(tmp_path) in part for part in found.info["cmdline"] or ()):
            left.append(found.pid)
    assert left == [], f"the doctor left processes behind: {left}"
    assert process.returncode is not None
    return process.returncode, out.decode().splitlines()


def line_of(lines: list[str], name: str) -> str:
    (line,) = [line for line in lines if line[2:].startswith(f"{name}:")]
    return line


def mark_of(lines: list[str], name: str) -> str:
    return line_of(lines, name)[0]


@pytest.mark.skipif(not (AGENT_BIN / "pi").exists(), reason="run scripts/install-agents")
async def test_the_doctor_passes_where_everything_is_in_place(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)

    code, lines = await doctor(
        tmp_path, environment(tmp_path, agent_path()), "--state-dir", str(state)
    )

    assert code == 0, lines
    names = [line[2:].split(":")[0] for line in lines]
    assert names == [
        "Python",
        "state directory",
        "SQLite",
        "pi",
        "claude",
        "codex",
        "pi models.json",
        "pi credentials",
        "claude credentials",
        "codex credentials",
        "process tracking",
        "delegation depth",
    ]
    assert all(line[0] in "✓!" for line in lines), lines
    for name in ("pi", "claude", "codex", "state directory", "SQLite", "pi models.json"):
        assert mark_of(lines, name) == "✓", lines
    for name in ("pi credentials", "claude credentials", "codex credentials"):
        assert mark_of(lines, name) == "✓", lines
    assert not any(secret in line for line in lines for secret in SECRETS), lines


async def test_an_agent_cli_missing_from_path_fails_with_its_fix(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)

    code, lines = await doctor(
        tmp_path, environment(tmp_path, SYSTEM_PATH), "--state-dir", str(state)
    )

    assert code == 1
    (pi,) = [line for line in lines if line.startswith("✗ pi:")]
    assert "'pi' is not on the server's PATH" in pi and "(fix: install it" in pi


async def test_a_configured_executable_that_does_not_exist_fails(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    config = tmp_path / "settings.json"
    config.write_text(json.dumps({"backends": {"claude": {"executable": "/nonexistent/claude"}}}))
    env = environment(tmp_path, agent_path())

    code, lines = await doctor(tmp_path, env, "--state-dir", str(state), "--config", str(config))

    assert code == 1
    assert any(line.startswith("✗ claude: '/nonexistent/claude'") for line in lines), lines


async def test_a_state_directory_open_to_others_fails_and_is_left_as_it_was(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o777)

    code, lines = await doctor(
        tmp_path, environment(tmp_path, agent_path()), "--state-dir", str(state)
    )

    assert code == 1
    (line,) = [line for line in lines if line[2:].startswith("state directory:")]
    assert line == (
        f"✗ state directory: a server refuses it: {state} is writable by group or others "
        f"(mode 777) and not sticky (fix: chmod 700 {state})"
    )
    assert (state.stat().st_mode & 0o777) == 0o777  # the doctor repairs nothing itself
    assert list(state.iterdir()) == []
    assert "a temporary state directory" in " ".join(lines)


async def test_a_state_directory_that_is_a_file_fails(tmp_path: Path) -> None:
    env = environment(tmp_path, agent_path())
    (tmp_path / "xdg-state").mkdir()
    (tmp_path / "xdg-state" / "subagent-host").write_text("not a directory")

    code, lines = await doctor(tmp_path, env)

    assert code == 1
    assert (
        f"✗ state directory: {tmp_path / 'xdg-state' / 'subagent-host'} is not a directory"
        in lines[1]
    )


async def test_a_state_dir_option_naming_a_file_is_a_failed_check_and_the_others_still_run(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    state.write_text("not a directory")

    code, lines = await doctor(
        tmp_path, environment(tmp_path, agent_path()), "--state-dir", str(state)
    )

    assert code == 1  # a failed check, not a refused option (2)
    (line,) = [line for line in lines if line[2:].startswith("state directory:")]
    assert line == (
        f"✗ state directory: {state} is not a directory "
        "(fix: remove or move it, or pass --state-dir DIR)"
    )
    # Every other check still ran, on a server of a temporary state directory.
    assert mark_of(lines, "Python") == "✓"
    assert mark_of(lines, "SQLite") == "✓"
    assert "a temporary state directory (the state directory is not usable)" in " ".join(lines)
    for name in ("process tracking", "delegation depth"):
        assert mark_of(lines, name) in "✓!"
    assert state.read_text() == "not a directory"  # left exactly as it was


@pytest.mark.skipif(not (AGENT_BIN / "pi").exists(), reason="run scripts/install-agents")
async def test_an_agent_cli_without_credentials_fails_with_what_to_do(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    env = environment(tmp_path, agent_path(), logged_in=False)

    code, lines = await doctor(tmp_path, env, "--state-dir", str(state))

    assert code == 1, lines
    assert line_of(lines, "pi credentials").startswith("✗ pi credentials: no API key"), lines
    assert "(fix: run 'pi' and /login, set ANTHROPIC_API_KEY" in line_of(lines, "pi credentials")
    claude = line_of(lines, "claude credentials")
    assert claude.startswith("✗ claude credentials: not logged in"), lines
    assert "(fix: run 'claude /login' or set ANTHROPIC_API_KEY)" in claude
    codex = line_of(lines, "codex credentials")
    assert codex.startswith("✗ codex credentials: not logged in"), lines
    assert "(fix: run 'codex login' or set OPENAI_API_KEY)" in codex
    # Everything else is in place: only the credentials fail.
    assert [line[2:].split(":")[0] for line in lines if line[0] == "✗"] == [
        "pi credentials",
        "claude credentials",
        "codex credentials",
    ]


@pytest.mark.skipif(not (AGENT_BIN / "pi").exists(), reason="run scripts/install-agents")
async def test_api_keys_in_the_environment_are_credentials_and_are_not_printed(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    env = environment(tmp_path, agent_path(), logged_in=False)
    env |= {"ANTHROPIC_API_KEY": SECRETS[1], "OPENAI_API_KEY": SECRETS[2]}

    code, lines = await doctor(tmp_path, env, "--state-dir", str(state))

    assert code == 0, lines
    assert (
        line_of(lines, "pi credentials")
        == "✓ pi credentials: ANTHROPIC_API_KEY, OPENAI_API_KEY set"
    )
    assert line_of(lines, "claude credentials") == "✓ claude credentials: ANTHROPIC_API_KEY set"
    assert line_of(lines, "codex credentials") == "✓ codex credentials: OPENAI_API_KEY set"
    assert not any(secret in line for line in lines for secret in SECRETS), lines


@pytest.mark.skipif(not (AGENT_BIN / "codex").exists(), reason="run scripts/install-agents")
async def test_codex_with_a_provider_of_its_config_is_checked_against_that_provider(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    env = environment(tmp_path, agent_path())
    config = tmp_path / "home" / ".codex" / "config.toml"
    config.write_text('model_provider = "nosuch"\n')

    code, lines = await doctor(tmp_path, env, "--state-dir", str(state))

    assert code == 1, lines
    assert line_of(lines, "codex credentials") == (
        f"✗ codex credentials: model_provider nosuch is not defined in {config} "
        f"(fix: add [model_providers.nosuch] to {config} or remove model_provider)"
    )

    config.write_text(
        'model_provider = "local"\n[model_providers.local]\nname = "local"\n'
        'base_url = "http://127.0.0.1:1/v1"\nenv_key = "LOCAL_API_KEY"\n'
    )
    code, lines = await doctor(tmp_path, env, "--state-dir", str(state))

    assert code == 0, lines
    assert line_of(lines, "codex credentials") == (
        "! codex credentials: model_provider local reads LOCAL_API_KEY (not set here), which "
        "a codex child gets only from its spawn's env "
        '(fix: pass "env": {"LOCAL_API_KEY": ...} with each codex spawn)'
    )


async def test_each_configured_acp_agent_is_checked_by_what_it_answered(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir(mode=0o700)
    executable, answers = tiny_agent(tmp_path, "answers")
    _, exits = tiny_agent(tmp_path, "exits")
    backends = {
        "tiny": {"protocol": "acp", "executable": executable, "args": answers},
        "broken": {"protocol": "acp", "executable": executable, "args": exits},
    }
    if (AGENT_BIN / "qwen").exists():
        backends["qwen"] = {
            "protocol": "acp",
            "executable": "qwen",
            "args": list(qwen_args("http://127.0.0.1:9/v1")),
        }
    config = tmp_path / "settings.json"
    config.write_text(json.dumps({"backends": backends}))
    env = environment(tmp_path, agent_path())

    code, lines = await doctor(tmp_path, env, "--state-dir", str(state), "--config", str(config))

    assert code == 1, lines  # broken fails
    assert line_of(lines, "tiny (ACP)") == (
        "! tiny (ACP): tiny 0.0.1, ACP version 1; it does not declare loadSession: its "
        "children cannot be resumed"
    )
    assert line_of(lines, "broken (ACP)") == (
        "✗ broken (ACP): it exited (status 3) before answering initialize; its stderr ended: "
        "tiny: no model configured (fix: run its executable with its args and see what it "
        "prints)"
    )
    if "qwen" in backends:
        assert (
            line_of(lines, "qwen (ACP)")
            == "✓ qwen (ACP): qwen-code 0.24.4, ACP version 1, loadSession"
        )
