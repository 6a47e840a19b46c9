"""Each agent CLI's credentials as the doctor reads them: real files in a scratch home,
a given environment; present, missing, and never printed."""

from __future__ import annotations

import json
from pathlib import Path

from subagent_host.terminal.credentials import (
    check_claude_credentials,
    check_codex_credentials,
    check_pi_credentials,
)

SECRET = "sk-do-not-print"


def test_pi_finds_a_key_in_models_json_and_misses_a_provider_without_one(tmp_path: Path) -> None:
    agent_dir = tmp_path / "agent"
    agent_dir.mkdir()
    env = {"HOME": str(tmp_path), "PI_CODING_AGENT_DIR": str(agent_dir)}
    models = agent_dir / "models.json"
    models.write_text(json.dumps({"providers": {"local": {"baseUrl": "http://127.0.0.1:1"}}}))
    assert check_pi_credentials(env).passed is False
    models.write_text(json.dumps({"providers": {"local": {"apiKey": SECRET}}}))
    found = check_pi_credentials(env)
    assert (found.passed, found.detail) == (True, "models.json provider local has an apiKey")


def test_claude_finds_its_login_in_claude_config_dir_and_a_saved_key(tmp_path: Path) -> None:
    config = tmp_path / "claude-config"
    config.mkdir()
    env = {"HOME": str(tmp_path / "home"), "CLAUDE_CONFIG_DIR": str(config)}
    assert check_claude_credentials(env).passed is False
    # A login whose token is empty is no login.
    (config / ".credentials.json").write_text(json.dumps({"claudeAiOauth": {"accessToken": ""}}))
    assert check_claude_credentials(env).passed is False
    (config / ".claude.json").write_text(json.dumps({"primaryApiKey": SECRET}))
    saved = check_claude_credentials(env)
    assert saved.passed is True and SECRET not in saved.detail
    (config / ".credentials.json").write_text(
        json.dumps({"claudeAiOauth": {"accessToken": SECRET}})
    )
    logged_in = check_claude_credentials(env)
    assert (logged_in.passed, logged_in.detail) == (
        True,
        f"logged in ({config / '.credentials.json'})",
    )


def test_codex_reads_codex_home_its_login_and_its_local_providers(tmp_path: Path) -> None:
    codex_home = tmp_path / "codex-home"
    codex_home.mkdir()
    env = {"HOME": str(tmp_path / "home"), "CODEX_HOME": str(codex_home)}
    assert check_codex_credentials(env).passed is False
    (codex_home / "auth.json").write_text(json.dumps({"OPENAI_API_KEY": None, "tokens": None}))
    assert check_codex_credentials(env).passed is False
    (codex_home / "auth.json").write_text(json.dumps({"tokens": {"access_token": SECRET}}))
    assert check_codex_credentials(env).detail == f"logged in ({codex_home / 'auth.json'})"
    (codex_home / "config.toml").write_text('model_provider = "ollama"\n')
    assert check_codex_credentials(env).passed is True
    (codex_home / "config.toml").write_text("model_provider = [\n")
    broken = check_codex_credentials(env)
    assert broken.passed is False and "cannot be read" in broken.detail
