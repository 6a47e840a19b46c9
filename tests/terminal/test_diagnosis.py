"""The doctor's checks, one by one, on what they are given (terminal/diagnosis.py)."""

from __future__ import annotations

import os
from pathlib import Path

from subagent_host.terminal.diagnosis import (
    check_acp_agent,
    check_backend,
    check_depth,
    check_pi_models,
    check_python,
    check_sqlite,
    check_state_dir,
    check_tracking,
)
from subagent_host.values.facts import (
    AcpAgentCapabilities,
    AcpAgentInfo,
    AcpPromptCapabilities,
    BackendInfo,
)


def test_a_python_older_than_required_fails_and_says_which_is_needed() -> None:
    assert check_python((3, 11, 7)).passed is True
    old = check_python((3, 10, 4))
    assert (old.passed, old.detail, old.fix) == (
        False,
        "3.10.4, older than 3.11",
        "use Python 3.11 or newer",
    )


def test_a_state_directory_must_be_ours_and_closed_to_others(tmp_path: Path) -> None:
    good = tmp_path / "good"
    good.mkdir(mode=0o700)
    assert check_state_dir(good).passed is True
    assert check_state_dir(tmp_path / "later").passed is True  # a server creates it
    open_dir = tmp_path / "open"
    open_dir.mkdir()
    open_dir.chmod(0o777)
    found = check_state_dir(open_dir)
    assert (found.passed, found.fix) == (False, f"chmod 700 {open_dir}")
    assert "mode 777" in found.detail
    readable = tmp_path / "readable"
    readable.mkdir()
    readable.chmod(0o755)
    used = check_state_dir(readable)  # a server uses it as it is: worth knowing only
    assert (used.passed, used.fix) == (None, f"chmod 700 {readable}")
    theirs = check_state_dir(good, uid=os.getuid() + 1)
    assert theirs.passed is False and "belongs to uid" in theirs.detail
    plain = tmp_path / "file"
    plain.write_text("")
    assert check_state_dir(plain).passed is False


def test_history_kept_in_memory_or_without_wal_fails_the_sqlite_check() -> None:
    assert check_sqlite("sqlite", "wal", "/s").passed is True
    assert check_sqlite("memory", None, "/s").passed is False
    rollback = check_sqlite("sqlite", "delete", "/s")
    assert rollback.passed is False and "journal mode delete, not WAL" in rollback.detail


def test_an_agent_cli_is_found_tested_other_or_missing() -> None:
    tested = check_backend(BackendInfo("codex", True, "codex-cli 0.171.0", None, "0.171.0"))
    assert tested.passed is True and "tested" in tested.detail
    other = check_backend(BackendInfo("pi", True, "0.80.0", None, "0.73.1"))
    assert other.passed is None and "0.73.1" in other.detail  # worth knowing, no failure
    missing = check_backend(BackendInfo("pi", False, None, "'pi' is not on the server's PATH"))
    assert missing.passed is False and missing.fix and "scripts/install-agents" in missing.fix


def acp_agent(load_session: bool, **fields: object) -> BackendInfo:
    """A configured ACP agent as `ping` lists one that answered in ACP version 1."""
    capabilities = AcpAgentCapabilities(load_session, AcpPromptCapabilities(True, False, False))
    answered: dict[str, object] = {
        "available": True,
        "version": "1.2.3",
        "protocol": "acp",
        "protocol_version": 1,
        "agent_info": AcpAgentInfo("gem", "1.2.3", "Gem"),
        "agent_capabilities": capabilities,
        "auth_methods": (),
    }
    return BackendInfo(id="gem", **{**answered, **fields})  # type: ignore[arg-type]


def test_an_acp_agent_is_found_answers_and_says_whether_it_resumes() -> None:
    resumes = check_acp_agent(acp_agent(True))
    assert (resumes.name, resumes.passed) == ("gem (ACP)", True)
    assert resumes.detail == "gem 1.2.3, ACP version 1, loadSession"
    no_load = check_acp_agent(acp_agent(False))
    assert no_load.passed is None  # worth knowing: a resume of its children is refused
    assert no_load.detail == (
        "gem 1.2.3, ACP version 1; it does not declare loadSession: its children cannot be resumed"
    )
    missing = check_acp_agent(
        BackendInfo("gem", False, reason="'gem' is not on the server's PATH", protocol="acp")
    )
    assert missing.passed is False and missing.fix and "executable" in missing.fix
    silent = BackendInfo("gem", False, reason="no answer to initialize within 15 s", protocol="acp")
    assert check_acp_agent(silent).detail == "no answer to initialize within 15 s"
    assert check_acp_agent(silent).passed is False
    other = acp_agent(True, available=False, protocol_version=2, reason="it speaks ACP version 2")
    assert (
        check_acp_agent(other).fix == "configure a version of the agent that speaks ACP version 1"
    )
    asking = BackendInfo("gem", True, protocol="acp")  # the doctor's wait ran out
    assert check_acp_agent(asking).passed is None


def test_an_acp_agent_of_another_version_than_the_tested_one_is_worth_knowing() -> None:
    tested = check_acp_agent(acp_agent(True, tested_version="1.2.3"))
    assert (tested.passed, tested.detail) == (True, "gem 1.2.3, ACP version 1, loadSession")
    other = check_acp_agent(acp_agent(True, tested_version="1.0.0"))
    assert other.passed is None  # worth knowing, no failure
    assert other.detail == "gem 1.2.3, ACP version 1, loadSession; the tests run against 1.0.0"
    assert other.fix == "install 1.0.0 (scripts/install-agents) if it misbehaves"


def test_pi_models_json_is_read_where_pi_reads_it(tmp_path: Path) -> None:
    environ = {"PI_CODING_AGENT_DIR": str(tmp_path)}
    absent = check_pi_models(environ)
    assert absent.passed is None and str(tmp_path / "models.json") in absent.detail
    (tmp_path / "models.json").write_text('{"providers": {"local": {}}}')
    assert check_pi_models(environ).detail.endswith("(1 provider)")
    (tmp_path / "models.json").write_text("{providers")
    broken = check_pi_models(environ)
    assert broken.passed is False and "is not JSON" in broken.detail


def test_marker_only_process_tracking_is_a_warning() -> None:
    assert check_tracking("cgroup").passed is True
    assert check_tracking("subreaper").passed is True
    assert check_tracking("marker").passed is None


def test_a_depth_at_the_maximum_or_malformed_fails() -> None:
    assert check_depth({}, 1).passed is True
    at_max = check_depth({"SUBAGENT_HOST_DEPTH": "1"}, 1)
    assert at_max.passed is False and "every spawn is refused" in at_max.detail
    assert check_depth({"SUBAGENT_HOST_DEPTH": "x"}, 1).passed is False
