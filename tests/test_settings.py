"""Configuration files: global < trusted project < --config, field by field; every
problem a diagnostic naming the file and the field; a stop (an `error`) only for a
safety setting or a file that cannot be read (tests/test_settings_safety.py)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import attrs
import pytest

from subagent_host.settings import (
    AcpBackendSetting,
    ModelProfile,
    Settings,
    SettingsDiagnostic,
    load_settings,
)
from subagent_host.settings.layers import REFUSED
from tests.e2e.harness import running_server
from tests.e2e.test_runs import call

FINAL = {
    "type": "message_end",
    "message": {
        "role": "assistant",
        "content": [{"type": "text", "text": "from the configured pi"}],
        "stopReason": "stop",
        "usage": {"input": 3, "output": 4},
    },
}
EVENTS = ({"type": "session", "id": "fake-session"}, {"type": "agent_start"}, FINAL,
          {"type": "agent_end"})  # fmt: skip
# A stand-in for pi: reads its prompt, prints pi's events.
FAKE_PI = "#!/bin/sh\ncat > /dev/null\n" + "".join(
    f"echo '{json.dumps(event)}'\n" for event in EVENTS
)

SERVER_OPTIONS = {
    "state_dir": "/tmp/elsewhere",
    "framing": "lsp",
    "max_queue": 5000,
    "max_message_bytes": 4096,
    "grace_ms": 10,
    "resume_token_ttl_ms": 5000,
    "log_level": "debug",
    "log_file": "/tmp/host.log",
    "session": "editor-1",
    "max_parallel": 3,
    "workflow_parallelism": 2,
    "output_cap_bytes": 2048,
    "output_cap_lines": 10,
    "previous_cap_bytes": 4096,
    "require_preflight": True,
    # A project must not waive the consent its user asks before work goes to a provider.
    "require_egress_consent": True,
    "trusted_projects": ["/"],
    "backends": {"pi": {"executable": "/bin/evil"}},
    # The history is the whole state directory's: a project's limit would prune the
    # runs (and worktrees) of every other project's sessions.
    "history_limit": 1,
}


def write(path: Path, value: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value) if not isinstance(value, str) else value)
    return path


class Dirs:
    """A user config directory and a project directory, both empty to start."""

    def __init__(self, root: Path) -> None:
        self.config = root / "config"
        self.project = root / "project"
        self.config.mkdir()
        self.project.mkdir()
        self.global_file = self.config / "subagents.json"
        self.project_file = self.project / ".pi" / "subagents.json"

    def load(
        self, explicit: Path | None = None, trusted: Sequence[Path] = ()
    ) -> tuple[Settings, bool]:
        return load_settings(
            config_dir=self.config, project_dir=self.project, explicit=explicit, trusted=trusted
        )


@pytest.fixture
def dirs(tmp_path: Path) -> Dirs:
    return Dirs(tmp_path)


def without_bookkeeping(settings: Settings) -> Settings:
    """Only what the files set: no list of files read, no diagnostics."""
    return attrs.evolve(settings, files=(), diagnostics=())


def codes(settings: Settings) -> list[tuple[str, str | None]]:
    return [(note.code, note.field) for note in settings.diagnostics]


def test_no_files_is_empty_settings_and_no_diagnostic(dirs: Dirs) -> None:
    assert dirs.load() == (Settings(), False)
    assert dirs.load(trusted=[dirs.project]) == (Settings(), True)


def test_later_files_win_field_by_field(dirs: Dirs, tmp_path: Path) -> None:
    write(
        dirs.global_file,
        {"default_model": "g-model", "timeout_ms": 1000, "max_concurrency": 2,
         "default_mode": "background", "default_tools": ["read"]},
    )  # fmt: skip
    write(dirs.project_file, {"timeout_ms": 2000, "max_concurrency": 3})
    explicit = write(
        tmp_path / "extra.json",
        {"max_concurrency": 5, "default_backend": "pi", "history_limit": 9},
    )
    settings, trusted = dirs.load(explicit, [dirs.project])
    assert trusted
    assert settings.default_model == "g-model"  # only the global file sets it
    assert settings.default_mode == "background"
    assert settings.default_tools == ("read",)
    assert settings.timeout_ms == 2000  # project over global
    assert settings.history_limit == 9
    assert settings.max_concurrency == 5  # explicit over both
    assert settings.default_backend == "pi"
    assert settings.files == (str(dirs.global_file), str(dirs.project_file), str(explicit))
    assert settings.diagnostics == ()


def test_a_project_may_set_who_answers_its_childrens_permissions(dirs: Dirs) -> None:
    write(dirs.global_file, {"approvals": "client"})
    write(dirs.project_file, {"approvals": "policy"})
    assert dirs.load()[0].approvals == "client"
    settings, _ = dirs.load(trusted=[dirs.project])
    assert settings.approvals == "policy" and settings.diagnostics == ()


def test_an_untrusted_project_file_is_not_read(dirs: Dirs) -> None:
    write(dirs.project_file, {"default_model": "from-project"})
    settings, trusted = dirs.load()
    assert not trusted
    assert settings.default_model is None and settings.files == ()
    [note] = settings.diagnostics
    assert (note.severity, note.code, note.file) == (
        "info",
        "untrusted-project",
        str(dirs.project_file),
    )


def test_a_project_is_trusted_through_the_command_line(dirs: Dirs, tmp_path: Path) -> None:
    write(dirs.project_file, {"default_model": "from-project"})
    link = tmp_path / "link"
    link.symlink_to(dirs.project)  # trust compares real paths
    settings, trusted = dirs.load(trusted=[link])
    assert trusted and settings.default_model == "from-project"
    assert dirs.load(trusted=[tmp_path])[1] is False  # a parent is not the project


@pytest.mark.parametrize("where", ["global", "explicit"])
def test_a_project_is_trusted_through_trusted_projects_of_a_file(
    dirs: Dirs, tmp_path: Path, where: str
) -> None:
    write(dirs.project_file, {"default_model": "from-project"})
    entry = {"trusted_projects": ["~/elsewhere", str(dirs.project)]}
    explicit = None
    if where == "global":
        write(dirs.global_file, entry)
    else:
        explicit = write(tmp_path / "extra.json", entry)
    settings, trusted = dirs.load(explicit)
    assert trusted and settings.default_model == "from-project"
    assert settings.trusted_projects == (Path("~/elsewhere").expanduser(), dirs.project)


def test_relative_paths_are_taken_from_the_file_s_directory(dirs: Dirs) -> None:
    (dirs.config / "logs").mkdir()
    write(
        dirs.global_file,
        {"state_dir": "state", "log_file": "logs/host.log", "trusted_projects": ["../project"]},
    )
    settings, trusted = dirs.load()
    assert settings.state_dir == dirs.config / "state"
    assert settings.log_file == dirs.config / "logs" / "host.log"
    assert trusted


@pytest.mark.parametrize(("field", "value"), SERVER_OPTIONS.items())
def test_a_project_file_cannot_set_server_options(dirs: Dirs, field: str, value: object) -> None:
    write(dirs.project_file, {field: value, "default_model": "kept"})
    settings, _ = dirs.load(trusted=[dirs.project])
    [note] = settings.diagnostics
    assert (note.severity, note.code, note.field) == ("warning", "not-allowed-in-project", field)
    assert str(dirs.project_file) in note.message and field in note.message
    assert without_bookkeeping(settings) == Settings(default_model="kept")


@pytest.mark.parametrize(("user", "project", "effective"), [
    (False, True, False),  # a project cannot turn back on what its user turned off
    (None, True, None),  # nor say more than the default already does
    (True, False, False),  # but it may turn resume off for itself
    (None, False, False),
])  # fmt: skip
def test_a_project_may_only_turn_resume_off(
    dirs: Dirs, user: bool | None, project: bool, effective: bool | None
) -> None:
    if user is not None:
        write(dirs.global_file, {"enable_continue": user})
    write(dirs.project_file, {"enable_continue": project})
    settings, _ = dirs.load(trusted=[dirs.project])
    assert settings.enable_continue is effective
    assert settings.diagnostics == ()


def test_a_project_s_trusted_projects_trust_nothing(dirs: Dirs, tmp_path: Path) -> None:
    other = tmp_path / "other"
    write(dirs.project_file, {"trusted_projects": [str(other)]})
    settings, _ = dirs.load(trusted=[dirs.project])
    assert settings.trusted_projects == ()
    assert codes(settings) == [("not-allowed-in-project", "trusted_projects")]


@pytest.mark.parametrize(("field", "value"), SERVER_OPTIONS.items())
def test_the_global_and_explicit_files_set_server_options(
    dirs: Dirs, tmp_path: Path, field: str, value: object
) -> None:
    write(dirs.global_file, {field: value})
    settings, _ = dirs.load()
    assert settings.diagnostics == ()
    expected: object = {
        "state_dir": Path("/tmp/elsewhere").resolve(),
        "log_level": "DEBUG",
        "log_file": Path("/tmp/host.log").resolve(),
        "trusted_projects": (Path("/"),),
        "backends": {"pi": "/bin/evil"},
    }.get(field, value)
    got = getattr(settings, "backend_executables" if field == "backends" else field)
    assert got == expected


VALID = {
    "default_model": "g-model",
    "default_effort": "low",
    "timeout_ms": 1000,
    "stall_timeout_ms": 1000,
    "max_tokens": 5000,
    "max_cost_usd": 0.5,
    "max_concurrency": 2,
    "default_tools": ["read"],
    "default_mode": "task",
    "history_limit": 10,
    "enable_continue": True,
    "default_backend": "claude",
    "approvals": "policy",
    "state_dir": "/tmp",
    "framing": "ndjson",
    "max_message_bytes": 2048,
    "grace_ms": 0,
    "resume_token_ttl_ms": 1000,
    "log_level": "info",
    "log_file": "/tmp/x.log",
    "trusted_projects": ["/tmp"],
}
# Values of fields that are no safety settings: each is ignored with a warning.
INVALID = [
    ("default_model", ""),
    ("default_model", "two words"),
    ("default_model", 3),
    ("default_model", {}),
    ("default_model", {"provider": "anthropic"}),
    ("default_model", {"provider": "anthropic", "id": "x", "name": "y"}),
    ("default_model", {"provider": "a/b", "id": "x"}),
    ("default_model", {"provider": "", "id": "x"}),
    ("default_model", {"provider": "anthropic", "id": "two words"}),
    ("default_model", {"provider": "anthropic", "id": 4}),
    ("default_effort", "extreme"),
    ("default_effort", "HIGH"),
    ("timeout_ms", 0),
    ("timeout_ms", 86_400_001),
    ("timeout_ms", True),
    ("timeout_ms", 1.5),
    ("timeout_ms", "1000"),
    ("stall_timeout_ms", -1),
    ("max_tokens", 0),
    ("max_tokens", -1),
    ("max_tokens", 2**53),
    ("max_tokens", 1.5),
    ("max_tokens", True),
    ("max_tokens", "1000"),
    ("max_cost_usd", 0),
    ("max_cost_usd", -0.5),
    ("max_cost_usd", float("nan")),
    ("max_cost_usd", float("inf")),
    ("max_cost_usd", True),
    ("max_cost_usd", "0.5"),
    ("max_concurrency", 257),
    ("max_concurrency", 0),
    ("max_queue", -1),
    ("max_queue", 1_000_001),
    ("default_tools", "read"),
    ("default_tools", ["read", ""]),
    ("default_tools", ["read", 1]),
    ("default_mode", "foreground"),
    ("history_limit", 0),
    ("history_limit", 1_000_001),
    ("default_backend", "Gemini CLI"),
    ("approvals", "always"),
    ("approvals", True),
    ("framing", "xml"),
    ("max_message_bytes", 10),
    ("grace_ms", -1),
    ("resume_token_ttl_ms", 999),
    ("log_level", "loud"),
    ("log_file", "/nonexistent/dir/host.log"),
    ("log_file", "/tmp"),
    ("model_profiles", []),
]


@pytest.mark.parametrize(("field", "value"), INVALID)
def test_an_invalid_value_is_a_diagnostic_and_the_earlier_value_is_kept(
    dirs: Dirs, tmp_path: Path, field: str, value: object
) -> None:
    write(dirs.global_file, VALID)
    explicit = write(tmp_path / "extra.json", {field: value})
    settings, _ = dirs.load(explicit)
    [note] = settings.diagnostics
    assert (note.severity, note.code, note.field, note.file) == (
        "warning", "invalid-field", field, str(explicit)
    )  # fmt: skip
    assert str(explicit) in note.message and field in note.message
    global_only, _ = dirs.load()
    assert without_bookkeeping(settings) == without_bookkeeping(global_only)


@pytest.mark.parametrize(("field", "value"), INVALID)
def test_an_invalid_value_with_no_earlier_one_leaves_the_default(
    dirs: Dirs, field: str, value: object
) -> None:
    write(dirs.global_file, {field: value})
    settings, _ = dirs.load()
    assert codes(settings) == [("invalid-field", field)]
    assert without_bookkeeping(settings) == Settings()


def test_null_leaves_a_field_unset(dirs: Dirs, tmp_path: Path) -> None:
    write(dirs.global_file, {"default_model": "g-model"})
    explicit = write(tmp_path / "extra.json", {"default_model": None, "backends": None})
    settings, _ = dirs.load(explicit)
    assert settings.default_model == "g-model" and settings.diagnostics == ()


@pytest.mark.parametrize("key", ["default_effort", "default_thinking_level", "thinkingLevel"])
def test_effort_has_three_spellings(dirs: Dirs, key: str) -> None:
    write(dirs.global_file, {key: "xhigh"})
    settings, _ = dirs.load()
    assert settings.default_effort == "xhigh" and settings.diagnostics == ()


def test_spellings_that_agree_are_one_setting(dirs: Dirs) -> None:
    write(dirs.global_file, {"default_effort": "max", "thinkingLevel": "max"})
    settings, _ = dirs.load()
    assert settings.default_effort == "max" and settings.diagnostics == ()


def test_spellings_that_disagree_are_both_ignored(dirs: Dirs, tmp_path: Path) -> None:
    write(dirs.global_file, {"default_effort": "low"})
    explicit = write(tmp_path / "extra.json", {"default_effort": "high", "thinkingLevel": "off"})
    settings, _ = dirs.load(explicit)
    assert settings.default_effort == "low"  # from the global file
    [note] = settings.diagnostics
    assert (note.code, note.field, note.file) == (
        "conflicting-aliases", "default_effort", str(explicit)
    )  # fmt: skip
    assert "default_effort" in note.message and "thinkingLevel" in note.message


def test_an_invalid_alias_names_the_spelling_used(dirs: Dirs) -> None:
    write(dirs.global_file, {"default_thinking_level": "huge"})
    settings, _ = dirs.load()
    assert codes(settings) == [("invalid-field", "default_thinking_level")]
    assert settings.default_effort is None


def test_enable_continue_false_is_kept(dirs: Dirs, tmp_path: Path) -> None:
    write(dirs.global_file, {"enable_continue": True})
    explicit = write(tmp_path / "extra.json", {"enable_continue": False})
    settings, _ = dirs.load(explicit)
    assert settings.enable_continue is False


def test_model_profiles_are_split_between_user_and_project_agents(
    dirs: Dirs, tmp_path: Path
) -> None:
    write(
        dirs.global_file,
        {"model_profiles": {"Scout": {"model": "haiku", "effort": "low"},
                            "planner": {"model": "opus", "effort": "medium"}}},
    )  # fmt: skip
    write(dirs.project_file, {"model_profiles": {"scout": {"model": "project-model"}}})
    explicit = write(
        tmp_path / "extra.json",
        {
            "model_profiles": {
                "SCOUT": {"thinking": "high"},
                "Writer": {"effort": "off"},
                "Planner": {"model": "sonnet"},
            }
        },
    )
    settings, _ = dirs.load(explicit, [dirs.project])
    assert settings.diagnostics == ()
    assert settings.user_profiles == {
        "scout": ModelProfile(model="haiku", effort="high"),  # per field: effort from --config
        "planner": ModelProfile(model="sonnet", effort="medium"),
        "writer": ModelProfile(effort="off"),
    }
    assert settings.project_profiles == {"scout": ModelProfile(model="project-model")}


def test_each_bad_profile_entry_or_field_is_skipped_alone(dirs: Dirs) -> None:
    write(
        dirs.global_file,
        {"model_profiles": {
            "a": "haiku",
            "b": {"model": "two words", "effort": "low"},
            "c": {"effort": "low", "thinking": "high"},
            "d": {"model": "m", "color": "red"},
            "D": {"model": "other"},
            " ": {"model": "m"},
            "e": {"thinking": "lots"},
        }},
    )  # fmt: skip
    settings, _ = dirs.load()
    assert settings.user_profiles == {"b": ModelProfile(effort="low"), "d": ModelProfile("m")}
    assert codes(settings) == [
        ("invalid-field", "model_profiles.a"),
        ("invalid-field", "model_profiles.b.model"),
        ("conflicting-aliases", "model_profiles.c.effort"),
        ("unknown-field", "model_profiles.d.color"),
        ("invalid-field", "model_profiles.D"),
        ("invalid-field", "model_profiles. "),
        ("invalid-field", "model_profiles.e.thinking"),
    ]
    assert all(str(dirs.global_file) in note.message for note in settings.diagnostics)


def test_an_unknown_field_is_a_warning_and_suggests_a_near_name(dirs: Dirs) -> None:
    write(dirs.global_file, {"default_modle": "x", "timeout_ms": 5, "zzz": 1})
    settings, _ = dirs.load()
    note, other = settings.diagnostics
    assert (note.severity, note.code, note.field) == ("warning", "unknown-field", "default_modle")
    assert "default_model" in note.message and str(dirs.global_file) in note.message
    assert (other.code, other.field) == ("unknown-field", "zzz")
    assert other.message == f"{dirs.global_file}: zzz: unknown field; ignored"
    assert settings.timeout_ms == 5


@pytest.mark.parametrize(
    ("content", "code"),
    [
        (b"{not json", "invalid-json"),
        (b"", "invalid-json"),
        (b"[1]", "not-an-object"),
        (b'"text"', "not-an-object"),
        (b'{"default_model": "\xff"}', "unreadable"),
    ],
)
def test_a_file_that_is_not_a_json_object_is_a_refusal(
    dirs: Dirs, tmp_path: Path, content: bytes, code: str
) -> None:
    write(dirs.global_file, {"default_model": "g-model"})
    explicit = tmp_path / "extra.json"
    explicit.write_bytes(content)
    settings, _ = dirs.load(explicit)
    [note] = settings.diagnostics
    assert (note.severity, note.code, note.file, note.field) == ("error", code, str(explicit),
                                                                   None)  # fmt: skip
    assert note.message.startswith(f"{explicit}: ")
    assert note.message.endswith(f"; {REFUSED}")
    assert settings.refusal == note
    assert settings.files == (str(dirs.global_file),)


def test_an_unreadable_global_file_is_a_refusal(dirs: Dirs) -> None:
    dirs.global_file.mkdir()  # exists, cannot be read as a file
    settings, _ = dirs.load()
    assert codes(settings) == [("unreadable", None)]
    assert settings.refusal is not None


def test_a_fifo_or_a_huge_file_is_not_read(dirs: Dirs) -> None:
    os.mkfifo(dirs.global_file)  # reading it would block the server's start forever
    assert codes(dirs.load()[0]) == [("unreadable", None)]
    dirs.global_file.unlink()
    dirs.global_file.write_text("{}" + " " * 1024 * 1024)
    settings, _ = dirs.load()
    assert codes(settings) == [("unreadable", None)]
    assert "larger than" in settings.diagnostics[0].message
    assert settings.diagnostics[0].severity == "error"


def test_a_vanished_explicit_file_is_a_refusal(dirs: Dirs, tmp_path: Path) -> None:
    settings, _ = dirs.load(tmp_path / "gone.json")
    assert codes(settings) == [("unreadable", None)]
    assert settings.refusal is not None


def test_a_missing_global_or_project_file_is_simply_absent(dirs: Dirs) -> None:
    settings, _ = dirs.load(trusted=[dirs.project])
    assert settings == Settings() and settings.refusal is None


def test_a_file_named_twice_is_read_once(dirs: Dirs) -> None:
    write(dirs.global_file, {"default_model": "m", "nope": 1})
    settings, _ = dirs.load(dirs.global_file)
    assert settings.files == (str(dirs.global_file),)
    assert codes(settings) == [("unknown-field", "nope")]


def test_executables_are_read_per_backend_and_merged(dirs: Dirs, tmp_path: Path) -> None:
    write(dirs.global_file, {"backends": {"pi": {"executable": "/opt/pi"}, "codex": {
        "executable": "codex1"}}})  # fmt: skip
    explicit = write(tmp_path / "c.json", {"backends": {"codex": {"executable": "codex2"}}})
    settings, _ = dirs.load(explicit)
    assert settings.backend_executables == {"pi": "/opt/pi", "codex": "codex2"}


def test_an_acp_agent_is_a_backend_of_its_own_and_a_later_file_replaces_it_whole(
    dirs: Dirs, tmp_path: Path
) -> None:
    qwen = {"protocol": "acp", "executable": "qwen", "args": ["--acp"], "env": {"K": "v"}}
    write(dirs.global_file, {"backends": {"qwen": qwen, "gemini": {
        "protocol": "acp", "executable": "gemini", "args": ["--acp"]}}})  # fmt: skip
    explicit = write(tmp_path / "c.json", {"backends": {"gemini": {
        "protocol": "acp", "executable": "/opt/gemini"}}})  # fmt: skip
    settings, _ = dirs.load(explicit)
    assert settings.diagnostics == ()
    assert settings.acp_backends == {
        "qwen": AcpBackendSetting("qwen", ("--acp",), {"K": "v"}),
        "gemini": AcpBackendSetting("/opt/gemini"),
    }
    assert settings.backend_executables == {}


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ({"pi": {"executable": ""}}, 'pi.executable "" is not a non-empty string'),
        ({"nope": {}}, 'nope {} is not an object {protocol: "acp", executable, args, env}'),
        ({"qwen": {"protocol": "acp", "executable": "qwen", "args": "--acp"}},
         'qwen.args "--acp" is not an array of strings'),
        ({"qwen": {"protocol": "acp", "executable": "qwen", "env": {"K": 1}}},
         'qwen.env {"K": 1} is not an object of strings'),
        ({"qwen": {"protocol": "acp", "executable": "qwen", "cwd": "/"}},
         'qwen has unknown keys cwd (it takes {protocol: "acp", executable, args, env})'),
        ({"command": {"protocol": "acp", "executable": "x"}},
         '"command" cannot name an ACP agent: a name is 1..32 of a-z 0-9 -, starting with '
         "a letter, other than command, pi, claude, codex"),
        ({"Qwen": {"protocol": "acp", "executable": "x"}},
         '"Qwen" cannot name an ACP agent: a name is 1..32 of a-z 0-9 -, starting with '
         "a letter, other than command, pi, claude, codex"),
        ({"claude": {"executable": "claude", "args": []}},
         'claude {"executable": "claude", "args": []} is not an object {executable}'),
        ({"codex": "codex"}, 'codex "codex" is not an object {executable}'),
    ],
)  # fmt: skip
def test_each_backend_problem_is_a_refusal_naming_file_field_and_member(
    dirs: Dirs, tmp_path: Path, value: object, reason: str
) -> None:
    config = write(tmp_path / "c.json", {"backends": value})
    settings, _ = dirs.load(config)
    assert settings.backend_executables == {}
    [note] = settings.diagnostics
    assert (note.severity, note.code, note.field) == ("error", "invalid-field", "backends")
    assert note.message == f"{config}: backends: {reason}; {REFUSED}"


def test_settings_are_hashable_so_the_server_config_is() -> None:
    diagnostic = SettingsDiagnostic("warning", "unknown-field", "f: x: unknown", "f", "x")
    settings = Settings(user_profiles={"a": ModelProfile("m")}, diagnostics=(diagnostic,))
    assert hash(settings) == hash(Settings(diagnostics=(diagnostic,)))


def test_the_real_path_of_the_project_is_what_is_trusted(dirs: Dirs, tmp_path: Path) -> None:
    write(dirs.project_file, {"default_model": "from-project"})
    link = tmp_path / "project-link"
    link.symlink_to(dirs.project)
    settings, trusted = load_settings(
        config_dir=dirs.config, project_dir=link, explicit=None, trusted=[dirs.project]
    )
    assert trusted and settings.default_model == "from-project"
    assert os.path.realpath(link) == str(dirs.project)


async def test_a_configured_executable_is_what_the_backend_runs(tmp_path: Path) -> None:
    fake = write(tmp_path / "my-pi", FAKE_PI)
    fake.chmod(0o755)
    config = write(tmp_path / "c.json", {"backends": {"pi": {"executable": str(fake)}}})
    args = ("--state-dir", str(tmp_path / "state"), "--config", str(config))
    async with running_server(*args) as server:
        reply, _ = await call(server, "spawn", {"backend": "pi", "prompt": "hi", "mode": "task"})
        child = reply["result"]["children"][0]
        assert reply["result"]["status"] == "completed", reply
        assert child["output"]["text"] == "from the configured pi"
        assert child["backendSessionId"] == "fake-session"
        await server.finish()


def test_a_session_id_in_a_file_must_be_valid(dirs: Dirs) -> None:
    write(dirs.global_file, {"session": "has space"})
    settings, _ = dirs.load()
    assert settings.session is None
    assert codes(settings) == [("invalid-field", "session")]


def test_a_model_may_be_an_object_of_provider_and_id(dirs: Dirs) -> None:
    model = {"provider": "anthropic", "id": "claude-sonnet-4-5"}
    write(dirs.global_file, {"default_model": model, "model_profiles": {"scout": {"model": model}}})
    settings, _ = dirs.load()
    assert settings.diagnostics == ()
    assert settings.default_model == "anthropic/claude-sonnet-4-5"
    assert settings.user_profiles["scout"].model == "anthropic/claude-sonnet-4-5"


def test_a_bad_model_object_names_the_file_the_field_and_the_member(dirs: Dirs) -> None:
    write(dirs.global_file, {"default_model": {"provider": "anthropic", "model": "x"}})
    settings, _ = dirs.load()
    [note] = settings.diagnostics
    assert (note.code, note.field, note.file) == (
        "invalid-field",
        "default_model",
        str(dirs.global_file),
    )
    assert note.message.startswith(f"{dirs.global_file}: default_model: unknown member 'model'")


def test_a_project_may_set_the_budgets_of_its_children(dirs: Dirs) -> None:
    write(dirs.global_file, {"max_tokens": 1000, "max_cost_usd": 2})
    write(dirs.project_file, {"max_tokens": 300, "max_cost_usd": 0.25})
    settings, _ = dirs.load(trusted=[dirs.project])
    assert (settings.max_tokens, settings.max_cost_usd) == (300, 0.25)
    assert settings.diagnostics == ()
    settings, _ = dirs.load()
    assert (settings.max_tokens, settings.max_cost_usd) == (1000, 2.0)
    assert isinstance(settings.max_cost_usd, float)
