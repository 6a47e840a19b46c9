"""Where children run is chosen by configuration: `--executor`, `--ray-*`, `executor` in a file.

The local executor is this machine's supervisor (a child's handle wraps its `Child`);
a cluster executor needs the `ray` extra, and a server told to use one it cannot have
does not start (exit 2, one line naming what is missing).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from pathlib import Path

import pytest

from subagent_host.backends.supervisor import Supervisor
from subagent_host.command_line import parse_config
from subagent_host.executors.local import LocalExecutor
from subagent_host.executors.select import MISSING_RAY, executor_for, unavailable
from subagent_host.settings import ExecutorChoice
from tests.e2e.harness import server_executable

EXIT_TIMEOUT_S = 30.0
HAS_RAY = importlib.util.find_spec("ray") is not None


@pytest.fixture(autouse=True)
def private_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's own subagents.json and working directory never reach these tests."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    return tmp_path / "xdg-config" / "subagent-host"


def write_global(private_config: Path, value: object) -> None:
    private_config.mkdir(parents=True, exist_ok=True)
    (private_config / "subagents.json").write_text(json.dumps(value))


def test_children_run_locally_unless_told_otherwise() -> None:
    config, _ = parse_config([])
    assert config.executor == ExecutorChoice(kind="local")
    assert unavailable(config.executor) is None


def test_the_command_line_names_a_ray_cluster_and_its_namespace() -> None:
    config, _ = parse_config(
        ["--executor", "ray", "--ray-address", "10.0.0.5:6379", "--ray-namespace", "team"]
    )
    assert config.executor == ExecutorChoice("ray", "10.0.0.5:6379", "team")


def test_a_file_names_the_executor_and_the_command_line_overrides_each_part(
    private_config: Path,
) -> None:
    write_global(private_config, {"executor": {"kind": "ray", "address": "head:6379"}})
    config, _ = parse_config([])
    assert config.settings.diagnostics == ()
    assert config.executor == ExecutorChoice("ray", "head:6379", None)
    config, _ = parse_config(["--ray-namespace", "mine"])
    assert config.executor == ExecutorChoice("ray", "head:6379", "mine")
    # Run locally for once: the file's cluster address does not follow.
    config, _ = parse_config(["--executor", "local"])
    assert config.executor == ExecutorChoice("local")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("ray", "is not an object"),
        ({"kind": "slurm"}, "is not one of local, ray"),
        ({"kind": "ray", "port": 1}, "unknown member 'port'"),
        ({"kind": "local", "address": "head:6379"}, "address is for a cluster executor"),
        ({"kind": "ray", "address": "two words"}, "is not a non-empty word"),
    ],
)
def test_a_bad_executor_in_a_file_stops_the_server_rather_than_run_children_here(
    private_config: Path, value: object, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    write_global(private_config, {"executor": value})
    with pytest.raises(SystemExit) as stopped:
        parse_config([])
    assert stopped.value.code == 2
    line = capsys.readouterr().err
    assert line.startswith(f"subagent-host: {private_config / 'subagents.json'}: executor: ")
    assert message in line and line.count("\n") == 1, line


def test_a_project_file_cannot_send_children_to_a_cluster(private_config: Path) -> None:
    project = Path.cwd()
    (project / ".pi").mkdir()
    (project / ".pi" / "subagents.json").write_text(json.dumps({"executor": {"kind": "ray"}}))
    config, _ = parse_config(["--trust-project", str(project)])
    assert config.executor == ExecutorChoice("local")
    assert [p.code for p in config.settings.diagnostics] == ["not-allowed-in-project"]


def test_cluster_options_without_a_cluster_executor_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse_config(["--ray-address", "head:6379"])
    assert exit_info.value.code == 2
    assert "--ray-address and --ray-namespace need --executor ray" in capsys.readouterr().err


async def test_the_local_executor_is_the_supervisor_with_nothing_in_between_but_the_handle() -> (
    None
):
    supervisor = Supervisor()
    try:
        executor = executor_for(ExecutorChoice("local"), supervisor, {})
        assert isinstance(executor, LocalExecutor) and executor.supervisor is supervisor
        assert executor.starts_at_once  # a stop of the run never has a start to call off
    finally:
        supervisor.close()


@pytest.mark.skipif(HAS_RAY, reason="the ray extra is installed here")
async def test_a_server_told_to_use_ray_without_the_extra_exits_2_naming_the_pip_command(
    tmp_path: Path,
) -> None:
    proc = await asyncio.create_subprocess_exec(
        server_executable(),
        "--executor",
        "ray",
        "--state-dir",
        str(tmp_path / "state"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), EXIT_TIMEOUT_S)
    assert proc.returncode == 2
    assert out == b""
    assert err.decode() == f"subagent-host: {MISSING_RAY}\n"


def test_without_ray_installed_the_ray_executor_is_unavailable_naming_the_pip_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a)
    )
    assert unavailable(ExecutorChoice("ray")) == MISSING_RAY
    assert unavailable(ExecutorChoice("local")) is None
