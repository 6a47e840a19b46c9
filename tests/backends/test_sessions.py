"""Where the agent CLIs keep the sessions a resume continues, checked on real files."""

from __future__ import annotations

from pathlib import Path

import pytest

from subagent_host.backends.sessions import (
    CHANGED,
    MISSING,
    SEALED_AT_END,
    UNSAFE,
    SessionFiles,
    SessionProblem,
    file_digest,
)

SESSION = "01a23251-bd52-7462-83b4-32faf64d54b1"


def pi_files(tmp_path: Path) -> tuple[SessionFiles, Path]:
    pi_dir = tmp_path / "state" / "pi-sessions"
    pi_dir.mkdir(parents=True)
    session_file = pi_dir / f"2026-12-01T15-55-47-410Z_{SESSION}.jsonl"
    session_file.write_text('{"type":"session"}\n')
    return SessionFiles(pi_dir), session_file


def code_of(call: object) -> str:
    with pytest.raises(SessionProblem) as raised:
        assert callable(call)
        call()
    return raised.value.code


def test_a_pi_file_is_sealed_and_checked_by_its_digest(tmp_path: Path) -> None:
    files, session_file = pi_files(tmp_path)
    seal = files.seal("pi", SESSION, SEALED_AT_END)
    assert seal is not None and seal.digest == file_digest(session_file)
    assert files.check("pi", SESSION, seal.digest, env={}, cwd="/") == session_file.resolve()
    assert files.check("pi", SESSION, None, env={}, cwd="/") == session_file.resolve()
    session_file.write_text("changed\n")
    assert code_of(lambda: files.check("pi", SESSION, seal.digest, env={}, cwd="/")) == CHANGED
    session_file.unlink()
    assert code_of(lambda: files.check("pi", SESSION, seal.digest, env={}, cwd="/")) == MISSING
    assert files.seal("pi", SESSION, SEALED_AT_END) is None  # nothing to seal: resume refuses


def test_a_pi_file_that_leads_out_of_the_pi_directory_is_unsafe(tmp_path: Path) -> None:
    files, session_file = pi_files(tmp_path)
    outside = tmp_path / "outside.jsonl"
    session_file.rename(outside)
    session_file.symlink_to(outside)
    assert code_of(lambda: files.pi_file(SESSION)) == UNSAFE


def test_a_session_id_that_is_no_id_is_never_used_in_a_file_name(tmp_path: Path) -> None:
    files, _ = pi_files(tmp_path)
    for bad in ("*", "../x", "a/b", "", "-rf"):
        assert code_of(lambda bad=bad: files.check("pi", bad, None, env={}, cwd="/")) == UNSAFE
        assert files.seal("pi", bad, SEALED_AT_END) is None


def test_claude_and_codex_sessions_are_looked_for_where_each_cli_keeps_them(
    tmp_path: Path,
) -> None:
    files = SessionFiles(tmp_path / "pi-sessions")
    config, codex_home = tmp_path / "claude", tmp_path / "codex"
    env = {"CLAUDE_CONFIG_DIR": str(config), "CODEX_HOME": str(codex_home)}
    cwd = "/work/my project.v2"
    claude_file = config / "projects" / "-work-my-project-v2" / f"{SESSION}.jsonl"
    rollout = f"rollout-2026-12-01T15-56-29-{SESSION}.jsonl"
    codex_file = codex_home / "sessions" / "2026" / "12" / "01" / rollout
    for backend in ("claude", "codex"):
        assert code_of(lambda b=backend: files.check(b, SESSION, None, env=env, cwd=cwd)) == MISSING
    for made in (claude_file, codex_file):
        made.parent.mkdir(parents=True)
        made.write_text("{}\n")
    assert files.check("claude", SESSION, None, env=env, cwd=cwd) == claude_file
    assert files.check("codex", SESSION, None, env=env, cwd=cwd) == codex_file
    # Without CLAUDE_CONFIG_DIR / CODEX_HOME: under HOME; without HOME, unchecked.
    home = {"HOME": str(tmp_path / "home")}
    assert code_of(lambda: files.check("claude", SESSION, None, env=home, cwd=cwd)) == MISSING
    assert files.check("codex", SESSION, None, env={}, cwd=cwd) is None


def test_a_long_claude_project_name_is_found_by_its_shortened_prefix(tmp_path: Path) -> None:
    files = SessionFiles(tmp_path / "pi-sessions")
    config = tmp_path / "claude"
    cwd = "/" + "d" * 250
    slug = "-" + "d" * 199
    made = config / "projects" / f"{slug}-abc123" / f"{SESSION}.jsonl"
    made.parent.mkdir(parents=True)
    made.write_text("{}\n")
    env = {"CLAUDE_CONFIG_DIR": str(config)}
    assert files.check("claude", SESSION, None, env=env, cwd=cwd) == made
