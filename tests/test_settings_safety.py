"""Safety settings fail closed: a value that cannot be read stops the server (exit 2, one
line naming the file, the field and what is accepted) rather than fall back to a default
that would weaken what the user asked for, through every face that reads settings."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Final

import pytest

from subagent_host.settings import Settings, load_settings
from subagent_host.settings.fields import FIELDS
from subagent_host.settings.layers import REFUSED

ROOT: Final = Path(__file__).resolve().parent.parent
# A start refused by its settings ends at once; generous for a loaded shared machine.
EXIT_TIMEOUT_S: Final = 60.0
SAFETY_FIELDS: Final = sorted(field for field, rule in FIELDS.items() if rule.safety)

# (field, malformed value, the reason the line gives).
MALFORMED: Final = [
    ("require_preflight", "yes", '"yes" is not true or false'),
    ("require_preflight", 1, "1 is not true or false"),
    ("enable_continue", "no", '"no" is not true or false'),
    ("enable_continue", 0, "0 is not true or false"),
    ("process_tracking", "cgroups",
     '"cgroups" is not one of auto, cgroup, subreaper, marker'),
    ("executor", "ray", '"ray" is not an object {kind, address, namespace}'),
    ("executor", {"kind": "slurm"}, 'kind "slurm" is not one of local, ray'),
    ("trusted_projects", "/tmp", '"/tmp" is not an array of paths'),
    ("trusted_projects", ["/tmp", 3], "3 is not a path"),
    ("backends", 3, '3 is not an object {pi, claude, codex: {executable}, '
     '<name>: {protocol: "acp", executable, args, env}}'),
    ("backends", {"gemini": {"executable": "g"}},
     'gemini {"executable": "g"} is not an object {protocol: "acp", executable, args, env}'),
    ("state_dir", "", '"" is not a path'),
    ("state_dir", "/etc/hostname", "/etc/hostname exists and is not a directory"),
    ("agents", ["reviewer"], '["reviewer"] is not an object {enabled, disabled}'),
    ("agents", {"enable": ["x"]}, "unknown member 'enable' (agents is {enabled, disabled})"),
    ("agents", {"enabled": "reviewer"},
     'enabled "reviewer" is not an array of agent names or globs (non-empty strings)'),
    ("agents", {"disabled": ["ok", 3]},
     'disabled ["ok", 3] is not an array of agent names or globs (non-empty strings)'),
    ("agents", {"disabled": [""]},
     'disabled [""] is not an array of agent names or globs (non-empty strings)'),
]  # fmt: skip


def refusal_line(file: Path, field: str, reason: str) -> str:
    """The one line on stderr."""
    return f"subagent-host: {file}: {field}: {reason}; {REFUSED}\n"


class Place:
    """A config home, a project (the working directory) and a state directory, all fresh."""

    def __init__(self, root: Path) -> None:
        self.config_home = root / "xdg-config"
        self.user_dir = self.config_home / "subagent-host"
        self.global_file = self.user_dir / "subagents.json"
        self.project = root / "project"
        self.project_file = self.project / ".pi" / "subagents.json"
        self.state = root / "state"
        self.user_dir.mkdir(parents=True)
        self.project.mkdir()

    def write(self, path: Path, value: object) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))
        return path

    def load(self, *trusted: Path) -> Settings:
        settings, _ = load_settings(
            config_dir=self.user_dir, project_dir=self.project, explicit=None, trusted=trusted
        )
        return settings

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        """`python -m subagent_host ARGS` in the project, stdin closed at once."""
        env = {**os.environ, "XDG_CONFIG_HOME": str(self.config_home)}
        return subprocess.run(  # noqa: TID251 - a one-shot command, no event loop here
            [sys.executable, "-m", "subagent_host", *args],
            cwd=self.project,
            env=env,
            input="",
            capture_output=True,
            text=True,
            timeout=EXIT_TIMEOUT_S,
            check=False,
        )


@pytest.fixture
def place(tmp_path: Path) -> Place:
    return Place(tmp_path)


def test_the_safety_settings_are_these_and_protocol_md_names_each_with_its_reason() -> None:
    assert SAFETY_FIELDS == [
        "agents",
        "backends",
        "enable_continue",
        "executor",
        "process_tracking",
        "require_egress_consent",
        "require_preflight",
        "state_dir",
        "trusted_projects",
    ]
    section = (ROOT / "protocol.md").read_text().split("**Safety settings.**", 1)[1]
    table = section.split("\n\n", 2)[1]
    documented = re.findall(r"^\| `([a-z_]+)` \|", table, re.MULTILINE)
    assert sorted(documented) == SAFETY_FIELDS


@pytest.mark.parametrize(("field", "value", "reason"), MALFORMED)
def test_a_malformed_safety_setting_is_a_refusal_naming_file_field_and_accepted_values(
    place: Place, field: str, value: object, reason: str
) -> None:
    place.write(place.global_file, {field: value, "default_model": "kept"})
    settings = place.load()
    refusal = settings.refusal
    assert refusal is not None
    assert (refusal.severity, refusal.code, refusal.field, refusal.file) == (
        "error", "invalid-field", field, str(place.global_file)
    )  # fmt: skip
    assert f"subagent-host: {refusal.message}\n" == refusal_line(place.global_file, field, reason)


def test_every_field_flagged_safety_refuses_a_value_it_cannot_read(place: Place) -> None:
    """A field only needs `safety=True` for all of this: no field of its own code."""
    for field in SAFETY_FIELDS:
        place.write(place.global_file, {field: {"not": "a value of any setting"}})
        refusal = place.load().refusal
        assert refusal is not None and refusal.field == field, field


def test_a_malformed_value_of_another_field_is_still_only_a_warning(place: Place) -> None:
    place.write(place.global_file, {"grace_ms": -1, "session": "two words", "log_level": "x"})
    settings = place.load()
    assert settings.refusal is None
    assert {note.severity for note in settings.diagnostics} == {"warning"}


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [
        ("enable_continue", "no", '"no" is not true or false'),
        ("agents", {"disabled": "x"},
         'disabled "x" is not an array of agent names or globs (non-empty strings)'),
    ],
)  # fmt: skip
def test_a_trusted_project_s_malformed_safety_setting_is_a_refusal_an_untrusted_one_unread(
    place: Place, field: str, value: object, reason: str
) -> None:
    place.write(place.project_file, {field: value})
    refusal = place.load(place.project).refusal
    assert refusal is not None
    assert f"subagent-host: {refusal.message}\n" == refusal_line(place.project_file, field, reason)
    untrusted = place.load()
    assert untrusted.refusal is None


def test_a_server_option_in_a_project_file_is_not_read_so_is_no_refusal(place: Place) -> None:
    """The user's value stands: a project could only have loosened it."""
    place.write(place.project_file, {"require_preflight": "yes", "backends": 3})
    settings = place.load(place.project)
    assert settings.refusal is None
    assert [note.code for note in settings.diagnostics] == ["not-allowed-in-project"] * 2


# --- through the real entry point, every face that reads settings ---------------------

FACES: Final = {
    "serve": ("--state-dir", "{state}"),
    "mcp": ("mcp", "--state-dir", "{state}"),
    "run": ("run", "--state-dir", "{state}", "--", "true"),
    "runs": ("runs", "--state-dir", "{state}"),
    "doctor": ("doctor",),
    "worktrees": ("worktrees", "--state-dir", "{state}"),
}
THROUGH_FACES: Final = [
    ("require_preflight", "yes", '"yes" is not true or false'),
    ("process_tracking", "cgroups",
     '"cgroups" is not one of auto, cgroup, subreaper, marker'),
    ("agents", {"enabled": ["ok"], "disabled": "x"},
     'disabled "x" is not an array of agent names or globs (non-empty strings)'),
]  # fmt: skip


@pytest.mark.parametrize("face", list(FACES))
@pytest.mark.parametrize(("field", "value", "reason"), THROUGH_FACES)
def test_each_face_refuses_to_start_with_one_line_and_exit_2_creating_nothing(
    place: Place, face: str, field: str, value: object, reason: str
) -> None:
    place.write(place.global_file, {field: value})
    before = sorted(place.config_home.rglob("*"))
    done = place.run(*(arg.format(state=place.state) for arg in FACES[face]))
    assert (done.returncode, done.stdout) == (2, ""), done
    assert done.stderr == refusal_line(place.global_file, field, reason)
    # No server started: it would have made its state directory (and the doctor its own
    # look at the default one, which here would be under the config home's sibling).
    assert not place.state.exists()
    assert sorted(place.config_home.rglob("*")) == before
    assert list(place.project.iterdir()) == []


def test_a_config_file_s_malformed_safety_setting_stops_the_server(place: Place) -> None:
    config = place.write(place.project.parent / "extra.json", {"enable_continue": "no"})
    done = place.run("--state-dir", str(place.state), "--config", str(config))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == refusal_line(config, "enable_continue", '"no" is not true or false')
    assert not place.state.exists()


def test_a_trusted_project_s_malformed_safety_setting_stops_the_server(place: Place) -> None:
    place.write(place.project_file, {"agents": {"enabled": [3]}})
    done = place.run("--state-dir", str(place.state), "--trust-project", str(place.project))
    assert (done.returncode, done.stdout) == (2, "")
    reason = "enabled [3] is not an array of agent names or globs (non-empty strings)"
    assert done.stderr == refusal_line(place.project_file, "agents", reason)
    assert not place.state.exists()


def test_a_global_file_that_is_not_json_stops_the_server(place: Place) -> None:
    place.global_file.write_text('{"require_preflight": true,}')
    done = place.run("--state-dir", str(place.state))
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"subagent-host: {place.global_file}: not valid JSON (Expecting property name "
        f"enclosed in double quotes: line 1 column 28 (char 27)); {REFUSED}\n"
    )
    assert not place.state.exists()


@pytest.mark.parametrize(
    ("misspelled", "meant"),
    [("require_prefligt", "require_preflight"), ("enable_contineu", "enable_continue"),
     ("proces_tracking", "process_tracking"), ("agent", "agents")],
)  # fmt: skip
def test_a_misspelled_safety_setting_stops_the_server_naming_the_field_it_resembles(
    place: Place, misspelled: str, meant: str
) -> None:
    # Ignored, `require_prefligt: true` would leave admission open while its user
    # believes it closed.
    place.write(place.global_file, {misspelled: True})
    refusal = place.load().refusal
    assert refusal is not None
    assert (refusal.code, refusal.field) == ("unknown-field", misspelled)
    assert meant in refusal.message
    result = place.run("--state-dir", str(place.state))
    assert result.returncode == 2
    assert result.stderr == refusal_line(
        place.global_file, misspelled, f"unknown field (did you mean {meant}?)"
    )
    assert not place.state.exists()


def test_an_unknown_field_resembling_no_safety_setting_is_only_a_warning(place: Place) -> None:
    place.write(place.global_file, {"default_modle": "x", "zzz": 1})
    settings = place.load()
    assert settings.refusal is None
    assert [note.severity for note in settings.diagnostics] == ["warning", "warning"]
