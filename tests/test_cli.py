"""The command line of protocol.md §7: every option parsed, validated, documented."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import platformdirs
import pytest

from subagent_host import __version__
from subagent_host.backends import cgroups
from subagent_host.cli import main
from subagent_host.command_line import build_parser, parse_config, read_depth
from subagent_host.handlers.capabilities import limits_of
from subagent_host.settings import ModelProfile, Settings
from subagent_host.values import Framing
from tests.e2e.harness import server_executable

OPTIONS = (
    "--state-dir",
    "--session",
    "--framing",
    "--process-tracking",
    "--max-concurrency",
    "--max-message-bytes",
    "--grace-ms",
    "--resume-token-ttl-ms",
    "--history-limit",
    "--config",
    "--trust-project",
    "--log-level",
    "--log-file",
    "--version",
)


@pytest.fixture(autouse=True)
def private_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's own subagents.json and working directory never reach these tests."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    return tmp_path / "xdg-config" / "subagent-host"


def write(path: Path, value: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value))
    return path


def test_defaults_are_the_contract_defaults(private_config: Path) -> None:
    config, warning = parse_config([])
    assert warning is None
    assert config.settings == Settings()
    assert config.config_dir == private_config
    assert config.project_dir == Path(os.path.realpath(os.getcwd()))
    assert config.project_trusted is False
    assert config.config_file is None and config.log_file is None
    assert config.state_dir == platformdirs.user_state_path("subagent-host")
    assert config.framing is None
    assert (config.max_concurrency, config.grace_ms, config.max_queue) == (4, 5000, 1000)
    assert config.max_message_bytes == 16 * 1024 * 1024
    assert config.resume_token_ttl_ms == 300_000
    assert config.history_limit == 100
    assert config.trusted_projects == ()
    assert config.log_level == "WARNING"


def test_every_option_is_stored(tmp_path: Path) -> None:
    config_file = tmp_path / "subagents.json"
    config_file.write_text("{}")
    project_a, project_b = tmp_path / "a", tmp_path / "b"
    project_a.mkdir()
    project_b.mkdir()
    config, _ = parse_config(
        [
            "serve",
            "--state-dir", str(tmp_path / "state"),
            "--session", "s1",
            "--framing", "lsp",
            "--max-concurrency", "9",
            "--max-message-bytes", "2048",
            "--grace-ms", "0",
            "--resume-token-ttl-ms", "60000",
            "--history-limit", "7",
            "--config", str(config_file),
            "--trust-project", str(project_a),
            "--trust-project", str(project_b),
            "--log-level", "debug",
            "--log-file", str(tmp_path / "host.log"),
        ]
    )  # fmt: skip
    assert config.state_dir == tmp_path / "state"
    assert config.session_id == "s1"
    assert config.framing is Framing.LSP
    assert (config.max_concurrency, config.max_message_bytes, config.grace_ms) == (9, 2048, 0)
    assert config.history_limit == 7
    assert config.resume_token_ttl_ms == 60000
    assert config.config_file == config_file
    assert config.trusted_projects == (project_a, project_b)
    assert config.log_level == "DEBUG"
    assert config.log_file == tmp_path / "host.log"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--max-concurrency", "0"], "0 is out of range (1..256)"),
        (["--max-queue", "-1"], "-1 is out of range (0..1000000)"),
        (["--max-concurrency", "four"], "'four' is not a whole number"),
        (["--max-message-bytes", "10"], "10 is out of range"),
        (["--grace-ms", "-1"], "-1 is out of range"),
        (["--resume-token-ttl-ms", "1.5"], "'1.5' is not a whole number"),
        (["--history-limit", "0"], "0 is out of range (1..1000000)"),
        (["--framing", "xml"], "invalid choice: 'xml'"),
        (["--process-tracking", "ptrace"], "invalid choice: 'ptrace'"),
        (["--session", "has space"], "is not a valid session id"),
        (["--log-level", "loud"], "'loud' is not one of debug, info, warning, error, critical"),
        (["--config", "/nonexistent/subagents.json"], "is not a readable file"),
        (["--trust-project", "/nonexistent/project"], "is not a directory"),
        (["--log-file", "/nonexistent/dir/host.log"], "does not exist"),
        (["--state-dir", "/etc/hostname"], "exists and is not a directory"),
        (["launch"], "unknown command 'launch': the commands are serve, schema"),
        (["--no-such-option"], "unrecognized arguments"),
    ],
)
def test_a_bad_value_exits_2_with_a_clear_message(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_config(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1 and err.startswith("subagent-host: "), err


def test_help_documents_every_option() -> None:
    text = build_parser().format_help()
    for option in OPTIONS:
        assert option in text


def test_installed_command_prints_its_version_and_help() -> None:
    version = subprocess.run(  # noqa: TID251 - a one-shot command, no event loop here
        [server_executable(), "--version"], capture_output=True, text=True, timeout=60
    )
    assert (version.returncode, version.stdout) == (0, f"subagent-host {__version__}\n")
    bad = subprocess.run(  # noqa: TID251
        [server_executable(), "--grace-ms", "soon"], capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr == (
        "subagent-host: argument --grace-ms: 'soon' is not a whole number"
        " (see 'subagent-host --help')\n"
    )


def test_logs_go_to_the_log_file_and_never_to_stdout(tmp_path: Path) -> None:
    log = tmp_path / "host.log"
    done = subprocess.run(  # noqa: TID251
        [server_executable(), "--log-level", "debug", "--log-file", str(log)],
        input=b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n',
        capture_output=True,
        timeout=60,
    )
    assert done.returncode == 0
    assert done.stdout.count(b"\n") == 1 and b'"pong":true' in done.stdout
    assert done.stderr == b""
    assert "server stopped" in log.read_text()


@pytest.mark.parametrize("existing", [False, True])
def test_the_log_file_is_0600_even_under_umask_0(tmp_path: Path, existing: bool) -> None:
    log = tmp_path / "host.log"
    if existing:  # a file of ours left with wider bits is tightened
        log.write_text("earlier\n")
        log.chmod(0o666)
    done = subprocess.run(  # noqa: TID251
        [server_executable(), "--log-level", "info", "--log-file", str(log)],
        input=b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n',
        capture_output=True,
        timeout=60,
        umask=0,
    )
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    text = log.read_text()
    assert "server stopped" in text
    assert text.startswith("earlier\n") == existing  # appended to, never truncated


PING_LINE = b'{"jsonrpc":"2.0","id":1,"method":"ping"}\n'


def wire_refusal(path: str) -> str:
    return (
        f"subagent-host: --log-file {path} is the server's stdout, which carries the"
        " protocol only: log to stderr or to another file\n"
    )


@pytest.mark.parametrize("name", ["/dev/stdout", "/proc/self/fd/1"])
def test_a_log_file_that_is_a_piped_stdout_is_refused_with_status_2(name: str) -> None:
    done = subprocess.run(  # noqa: TID251 - refused before anything is served
        [server_executable(), "--log-file", name],
        input=PING_LINE,
        capture_output=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (2, b"")
    shown = name.replace("self", "*")  # /proc/self resolves to the server's own pid
    [line] = done.stderr.decode().splitlines(keepends=True)
    assert re.fullmatch(re.escape(wire_refusal(shown)).replace(r"\*", r"\d+"), line), line


@pytest.mark.parametrize("given", ["the path", "/dev/stdout", "config file"])
def test_a_log_file_that_is_the_file_stdout_goes_to_is_refused_untouched(
    tmp_path: Path, given: str
) -> None:
    replies = tmp_path / "replies.ndjson"
    replies.write_bytes(b"")
    replies.chmod(0o644)
    name = str(replies) if given == "the path" else "/dev/stdout"
    options = ["--log-file", name]
    if given == "config file":
        config = tmp_path / "subagents.json"
        config.write_text(json.dumps({"log_file": name}))
        options = ["--config", str(config)]
    with replies.open("ab") as stdout:
        done = subprocess.run(  # noqa: TID251 - refused before anything is served
            [server_executable(), *options],
            input=PING_LINE,
            stdout=stdout,
            stderr=subprocess.PIPE,
            timeout=60,
        )
    assert done.returncode == 2
    assert done.stderr.decode() == wire_refusal(name)
    # Neither written nor tightened to 0600 as a log file of ours would be.
    assert replies.read_bytes() == b""
    assert stat.S_IMODE(replies.stat().st_mode) == 0o644


@pytest.mark.parametrize(
    ("name", "stderr"),
    [("/dev/stderr", subprocess.PIPE), ("/dev/stdout", subprocess.STDOUT)],
    ids=["stderr-a-pipe", "stdout-shared-with-stderr"],
)
def test_a_log_file_where_stderr_goes_is_taken(name: str, stderr: int) -> None:
    done = subprocess.run(  # noqa: TID251
        [server_executable(), "--log-level", "info", "--log-file", name],
        input=PING_LINE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    logs = done.stdout if stderr == subprocess.STDOUT else done.stderr
    assert b"server stopped" in logs and b'"pong":true' in done.stdout


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(None, (0, None)), ("0", (0, None)), ("1", (1, None)), ("2", (2, None))],
)
def test_depth_comes_from_the_parent_marker(raw: str | None, expected: tuple[int, None]) -> None:
    assert read_depth({} if raw is None else {"SUBAGENT_HOST_DEPTH": raw}) == expected


@pytest.mark.parametrize("raw", ["-1", "x", "1e3", ""])
def test_a_malformed_depth_fails_closed(raw: str) -> None:
    depth, warning = read_depth({"SUBAGENT_HOST_DEPTH": raw})
    assert depth == 1 and warning is not None


@pytest.mark.parametrize(("redirect", "name"), [("<&-", "stdin"), (">&-", "stdout")])
def test_a_closed_stdin_or_stdout_is_refused_with_status_2(redirect: str, name: str) -> None:
    done = subprocess.run(  # noqa: TID251 - the shell closes the descriptor for us
        f"exec {server_executable()} {redirect}",
        shell=True,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr == f"subagent-host: {name} closed: nothing to serve\n"


SERVER_OPTIONS_IN_FILE = {
    "state_dir": "state-from-file",
    "framing": "ndjson",
    "max_concurrency": 3,
    "max_queue": 7,
    "max_message_bytes": 4096,
    "grace_ms": 1,
    "resume_token_ttl_ms": 2000,
    "history_limit": 5,
    "log_level": "error",
    "log_file": "file.log",
    "session": "from-file",
}


def test_an_option_not_given_comes_from_the_files(private_config: Path) -> None:
    write(private_config / "subagents.json", SERVER_OPTIONS_IN_FILE)
    config, _ = parse_config([])
    assert config.settings.diagnostics == ()
    assert config.state_dir == private_config / "state-from-file"
    assert config.framing is Framing.NDJSON
    assert (config.max_concurrency, config.max_message_bytes, config.grace_ms) == (3, 4096, 1)
    assert config.max_queue == 7
    assert (config.resume_token_ttl_ms, config.history_limit) == (2000, 5)
    assert (config.log_level, config.log_file) == ("ERROR", private_config / "file.log")
    assert config.session_id == "from-file"


def test_every_option_given_beats_every_file(private_config: Path, tmp_path: Path) -> None:
    write(private_config / "subagents.json", SERVER_OPTIONS_IN_FILE)
    explicit = write(tmp_path / "extra.json", SERVER_OPTIONS_IN_FILE)
    config, _ = parse_config(
        [
            "--state-dir", str(tmp_path / "state"),
            "--framing", "auto",
            "--max-concurrency", "9",
            "--max-message-bytes", "2048",
            "--grace-ms", "0",
            "--resume-token-ttl-ms", "60000",
            "--history-limit", "7",
            "--config", str(explicit),
            "--log-level", "debug",
            "--log-file", str(tmp_path / "host.log"),
            "--session", "from-command-line",
        ]
    )  # fmt: skip
    assert config.state_dir == tmp_path / "state"
    assert config.framing is None  # auto, though both files say ndjson
    assert (config.max_concurrency, config.max_message_bytes, config.grace_ms) == (9, 2048, 0)
    assert (config.resume_token_ttl_ms, config.history_limit) == (60000, 7)
    assert (config.log_level, config.log_file) == ("DEBUG", tmp_path / "host.log")
    assert config.session_id == "from-command-line"


def test_precedence_is_global_then_project_then_config_then_command_line(
    private_config: Path, tmp_path: Path
) -> None:
    project = Path.cwd()
    global_file = private_config / "subagents.json"
    write(global_file, {"max_concurrency": 2, "history_limit": 2, "timeout_ms": 2,
                        "default_model": "global"})  # fmt: skip
    write(project / ".pi" / "subagents.json", {"max_concurrency": 3, "history_limit": 3,
                                               "timeout_ms": 3})  # fmt: skip
    explicit = write(tmp_path / "extra.json", {"max_concurrency": 4, "history_limit": 4})
    trust = ["--trust-project", str(project)]
    given = ["--config", str(explicit), *trust]

    config, _ = parse_config(["--max-concurrency", "5", *given])
    assert (config.max_concurrency, config.history_limit) == (5, 4)
    assert (config.settings.timeout_ms, config.settings.default_model) == (3, "global")
    config, _ = parse_config(trust)
    # The project's history_limit is not its to set (not-allowed-in-project): the global one.
    assert (config.max_concurrency, config.history_limit, config.project_trusted) == (3, 2, True)
    config, _ = parse_config([])  # untrusted: the project's file is not read
    assert (config.max_concurrency, config.history_limit, config.project_trusted) == (2, 2, False)
    assert config.settings.timeout_ms == 2


def test_trusted_projects_join_the_command_line_s(private_config: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    project = Path(os.path.realpath(os.getcwd()))
    write(private_config / "subagents.json", {"trusted_projects": [str(project), str(other)]})
    write(project / ".pi" / "subagents.json", {"model_profiles": {"Scout": {"model": "m"}}})
    config, _ = parse_config(["--trust-project", str(other)])
    assert config.trusted_projects == (other, project)
    assert config.project_trusted and config.project_dir == project
    assert config.settings.project_profiles == {"scout": ModelProfile(model="m")}


def test_a_bad_field_that_is_no_safety_setting_never_stops_the_server(
    private_config: Path,
) -> None:
    write(private_config / "subagents.json", {"max_concurrency": "six", "grace_ms": -1})
    config, warning = parse_config(["--max-concurrency", "6"])
    assert warning is None and config.max_concurrency == 6
    assert [note.code for note in config.settings.diagnostics] == ["invalid-field"] * 2


def test_a_file_that_is_not_json_stops_the_server(
    private_config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    private_config.mkdir(parents=True)
    (private_config / "subagents.json").write_text("{oops")
    with pytest.raises(SystemExit) as stopped:
        parse_config(["--max-concurrency", "6"])
    assert stopped.value.code == 2
    assert capsys.readouterr().err == (
        f"subagent-host: {private_config / 'subagents.json'}: not valid JSON (Expecting "
        "property name enclosed in double quotes: line 1 column 2 (char 1)); the server does "
        "not start while a safety setting cannot be read\n"
    )


def test_help_describes_the_configuration_files(
    private_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "10000")  # one line per option: no wrapping in a path
    text = build_parser().format_help()
    assert f"global file ({private_config / 'subagents.json'})" in text
    for words in ("trusted project's .pi/subagents.json", "default_model", "model_profiles",
                  "trusted_projects", "global and --config files only"):  # fmt: skip
        assert words in text


def test_limits_without_an_option_of_their_own_come_from_the_files(
    private_config: Path,
) -> None:
    write(
        private_config / "subagents.json",
        {
            "max_parallel": 3,
            "workflow_parallelism": 2,
            "output_cap_bytes": 2048,
            "output_cap_lines": 10,
            "previous_cap_bytes": 4096,
            "timeout_ms": 1000,
            "stall_timeout_ms": 500,
        },
    )
    config, _ = parse_config([])
    assert config.settings.diagnostics == ()
    assert (config.max_parallel, config.workflow_parallelism) == (3, 2)
    assert (config.output_cap_bytes, config.output_cap_lines) == (2048, 10)
    assert config.previous_cap_bytes == 4096
    assert (config.default_timeout_ms, config.default_stall_timeout_ms) == (1000, 500)
    limits = limits_of(config)
    assert (limits.max_parallel, limits.output_cap_bytes, limits.previous_cap_bytes) == (
        3,
        2048,
        4096,
    )
    assert (limits.default_timeout_ms, limits.default_stall_timeout_ms) == (1000, 500)


def test_limits_are_defaults_when_no_file_sets_them(private_config: Path) -> None:
    config, _ = parse_config([])
    assert (config.max_parallel, config.workflow_parallelism) == (8, 4)
    assert (config.output_cap_bytes, config.output_cap_lines) == (48 * 1024, 600)
    assert config.previous_cap_bytes == 64 * 1024


def test_process_tracking_comes_from_the_option_over_the_files(private_config: Path) -> None:
    assert parse_config([])[0].process_tracking == "auto"
    write(private_config / "subagents.json", {"process_tracking": "marker"})
    assert parse_config([])[0].process_tracking == "marker"
    assert parse_config(["--process-tracking", "subreaper"])[0].process_tracking == "subreaper"


def test_a_forced_process_tracking_this_host_lacks_stops_the_start_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cgroups, "find_hierarchy", lambda: None)
    assert main(["--process-tracking", "cgroup"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "process tracking 'cgroup' is unavailable" in err, err


# What a start that only answers `--version` or `--help` must not load: the server.
SERVER_ONLY_MODULES = (
    "pygls",
    "lsprotocol",
    "psutil",
    "sqlite3",
    "subagent_host.app",
    "subagent_host.mcp_face",
    "mcp",
)
LOADED_AFTER = """
import sys
from subagent_host.cli import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
print("LOADED " + " ".join(sorted({m.split(".")[0] for m in sys.modules} | set(sys.modules))))
"""


@pytest.mark.parametrize("option", ["--version", "--help"])
def test_version_and_help_load_none_of_the_server(option: str) -> None:
    done = subprocess.run(  # noqa: TID251 - a one-shot interpreter, no event loop here
        [sys.executable, "-c", LOADED_AFTER, option], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    # The last line, apart from the help's words (which name `subagent-host mcp`).
    loaded = set(done.stdout.splitlines()[-1].removeprefix("LOADED ").split())
    assert loaded & set(SERVER_ONLY_MODULES) == set()


# What reading the history must not load: the server's dispatch, the wire's types and
# converter (only `--json` asks for them), the event loop, planning, process work, and
# what the run state machine makes and takes (events, endings: loaded on first use).
NOT_FOR_READING_HISTORY = (
    "subagent_host.values.events",
    "subagent_host.runs.endings",
    "pygls",
    "lsprotocol",
    "asyncio",
    "psutil",
    "subagent_host.rpc.wire",
    "subagent_host.planning.plan",
    "subagent_host.client",
    "subagent_host.app",
)


@pytest.mark.parametrize("command", ["runs", "show"])
def test_runs_and_show_load_no_server_no_wire_and_no_event_loop(
    command: str, tmp_path: Path
) -> None:
    done = subprocess.run(  # noqa: TID251 - a one-shot interpreter, no event loop here
        [sys.executable, "-c", LOADED_AFTER, command, "--state-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    loaded = set(done.stdout.splitlines()[-1].removeprefix("LOADED ").split())
    assert "subagent_host.store.browse" in loaded  # it did read the state directory
    assert loaded & set(NOT_FOR_READING_HISTORY) == set()
