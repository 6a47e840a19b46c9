"""The `agents` setting: which agents may be delegated to, from the lists of every file.

The user's files set each list as any field (a later file's list replaces an earlier
one's); a trusted project's lists only narrow; disabled wins over enabled."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from subagent_host.settings import AgentDisabled, AgentFilter, Settings, load_settings
from subagent_host.values.choices import DisabledBy


class Files:
    def __init__(self, root: Path) -> None:
        self.config = root / "config"
        self.project = root / "project"
        self.global_file = self.config / "subagents.json"
        self.project_file = self.project / ".pi" / "subagents.json"
        self.explicit_file = root / "extra.json"
        self.project.mkdir(parents=True)
        self.config.mkdir()

    def write(self, path: Path, agents: object) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"agents": agents}))

    def load(self) -> Settings:
        explicit = self.explicit_file if self.explicit_file.exists() else None
        settings, _ = load_settings(
            config_dir=self.config, project_dir=self.project, explicit=explicit,
            trusted=[self.project],
        )  # fmt: skip
        assert settings.refusal is None, settings.refusal
        return settings

    def disabled(self, *names: str) -> dict[str, AgentDisabled | None]:
        agents = self.load().agents
        return {name: agents.disabled_by(name) for name in names}


@pytest.fixture
def files(tmp_path: Path) -> Files:
    return Files(tmp_path)


def test_without_lists_every_agent_is_enabled(files: Files) -> None:
    assert files.load().agents == AgentFilter()
    assert AgentFilter().disabled_by("anything") is None


def test_the_example_of_protocol_md(files: Files) -> None:
    files.write(files.global_file, {"enabled": ["rev*", "scout"]})
    files.write(files.explicit_file, {"disabled": ["reviewer-old"]})
    files.write(files.project_file, {"disabled": ["scout"]})
    got = files.disabled("reviewer", "Reviewer-2", "reviewer-old", "scout", "writer")
    assert got == {
        "reviewer": None,
        "Reviewer-2": None,
        "reviewer-old": AgentDisabled(
            DisabledBy.DISABLED, str(files.explicit_file), "reviewer-old"
        ),
        "scout": AgentDisabled(DisabledBy.DISABLED, str(files.project_file), "scout"),
        "writer": AgentDisabled(DisabledBy.ENABLED, str(files.global_file)),
    }


def test_an_agent_matching_both_lists_is_disabled(files: Files) -> None:
    files.write(files.global_file, {"enabled": ["reviewer", "*"], "disabled": ["REV?EWER"]})
    assert files.disabled("Reviewer") == {
        "Reviewer": AgentDisabled(DisabledBy.DISABLED, str(files.global_file), "REV?EWER")
    }


def test_patterns_are_fnmatch_globs_matched_case_insensitively(files: Files) -> None:
    files.write(files.global_file, {"disabled": ["[ab]*-x", "Exact"]})
    got = files.disabled("A-1-x", "b-x", "c-x", "exact", "EXACT", "exactly")
    assert [name for name, why in got.items() if why is not None] == [
        "A-1-x", "b-x", "exact", "EXACT",
    ]  # fmt: skip


def test_an_empty_enabled_list_enables_nothing(files: Files) -> None:
    files.write(files.global_file, {"enabled": []})
    assert files.disabled("any")["any"] == AgentDisabled(DisabledBy.ENABLED, str(files.global_file))


def test_the_config_file_s_list_replaces_the_global_one_list_by_list(files: Files) -> None:
    files.write(files.global_file, {"enabled": ["a", "b"], "disabled": ["b"]})
    files.write(files.explicit_file, {"enabled": ["a", "b", "c"], "disabled": None})
    got = files.disabled("a", "b", "c", "d")
    # enabled: the --config file's; disabled: null there, so the global file's.
    assert got == {
        "a": None,
        "b": AgentDisabled(DisabledBy.DISABLED, str(files.global_file), "b"),
        "c": None,
        "d": AgentDisabled(DisabledBy.ENABLED, str(files.explicit_file)),
    }
    files.write(files.explicit_file, {"disabled": []})  # re-enables b, keeps global enabled
    assert files.disabled("b", "c") == {
        "b": None, "c": AgentDisabled(DisabledBy.ENABLED, str(files.global_file))
    }  # fmt: skip


def test_a_project_only_narrows_what_the_user_enabled(files: Files) -> None:
    files.write(files.global_file, {"enabled": ["a", "b"], "disabled": ["x"]})
    files.write(files.project_file, {"enabled": ["*"], "disabled": []})
    # The project's `*` and empty disabled list enable nothing the user left out or disabled.
    assert files.disabled("a", "c", "x") == {
        "a": None,
        "c": AgentDisabled(DisabledBy.ENABLED, str(files.global_file)),
        "x": AgentDisabled(DisabledBy.DISABLED, str(files.global_file), "x"),
    }
    files.write(files.project_file, {"enabled": ["b*"]})
    assert files.disabled("a", "b") == {
        "a": AgentDisabled(DisabledBy.ENABLED, str(files.project_file)),
        "b": None,
    }


def test_an_untrusted_project_s_lists_are_not_read(files: Files, tmp_path: Path) -> None:
    files.write(files.project_file, {"disabled": ["*"]})
    settings, trusted = load_settings(
        config_dir=files.config, project_dir=files.project, explicit=None, trusted=[]
    )
    assert not trusted and settings.agents == AgentFilter()


def test_settings_with_lists_stay_hashable(files: Files) -> None:
    files.write(files.global_file, {"enabled": ["a"], "disabled": ["b"]})
    settings = files.load()
    assert hash(settings) == hash(files.load())
