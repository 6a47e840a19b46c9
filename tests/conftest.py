"""Fixtures for the whole suite."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def private_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every server a test starts without `--state-dir` keeps its history in the test's
    own directory (platformdirs reads XDG_STATE_HOME), never in the user's."""
    state_home = tmp_path / "xdg-state"
    monkeypatch.setenv("XDG_STATE_HOME", str(state_home))
    return state_home / "subagent-host"


@pytest.fixture(autouse=True)
def private_config_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every server a test starts reads its configuration files and agent definitions
    from the test's own directory (XDG_CONFIG_HOME), never from the user's."""
    config_home = tmp_path / "xdg-config"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config_home))
    return config_home / "subagent-host"
