"""Where each agent CLI keeps the session a resume continues, and whether it is still there.

A resume continues the CLI's own session (`backendSessionId`), which lives in
a file the CLI reads when it starts. Before a resume anything is started, the
server checks that file as far as it can:

- pi keeps it under the state directory (`<state-dir>/pi-sessions`, named
  `<time>_<id>.jsonl`). Its SHA-256 is sealed when each attempt ends (or, for
  an attempt a server crash cut short, when the next server recovers the run);
  a resume needs the file inside that directory by its real path (no symlink
  out of it) with that digest, and passes pi that path, not the id, so pi
  never looks elsewhere.
- claude keeps it in `<config>/projects/<cwd with every other character than
  a-z, A-Z, 0-9 made "-">/<id>.jsonl`, config being `CLAUDE_CONFIG_DIR`, else
  `$HOME/.claude`; codex in `<CODEX_HOME or $HOME/.codex>/sessions/YYYY/MM/DD/
  rollout-<time>-<id>.jsonl`. Those are the user's files, which the user's own
  CLI changes: the server checks that the file exists, not what is in it.

Every function here reads the file system: call them off the event loop.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import attrs

from subagent_host.values.choices import SessionDigestSource

PI_SUFFIX: Final = ".jsonl"
# What a session id a CLI printed may look like to be used in a file name (uuids).
SAFE_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,127}")
# Claude Code shortens a project directory name longer than this, adding a hash.
CLAUDE_SLUG_CHARS: Final = 200
DIGEST_PREFIX: Final = "sha256:"
# Where the digest of a session file was taken.
SEALED_AT_END: Final = SessionDigestSource.ATTEMPT_END
SEALED_AT_RECOVERY: Final = SessionDigestSource.RECOVERED

MISSING: Final = "session-missing"
CHANGED: Final = "session-changed"
UNSAFE: Final = "session-unsafe"


class SessionProblem(Exception):
    """The session a resume would continue cannot be used; `code` names why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


@attrs.frozen
class Seal:
    """A session file's digest, and when it was taken (`attempt-end` or `recovered`)."""

    digest: str
    source: SessionDigestSource


@attrs.frozen
class SessionFiles:
    """The agent CLIs' session files, as this server's children find them."""

    pi_dir: Path
    """`<state-dir>/pi-sessions`: where pi children keep their sessions."""

    def seal(
        self, backend: str, session_id: str | None, source: SessionDigestSource
    ) -> Seal | None:
        """The digest of the session file a resume of this attempt would continue.

        Only pi's files, which live in the state directory, are sealed; None for
        another backend, no session, or no such file (a resume then refuses).
        """
        if backend != "pi" or session_id is None:
            return None
        try:
            return Seal(file_digest(self.pi_file(session_id)), source)
        except (SessionProblem, OSError):
            return None

    def check(
        self,
        backend: str,
        session_id: str,
        digest: str | None,
        *,
        env: Mapping[str, str],
        cwd: str,
    ) -> Path | None:
        """The session file a resume continues; SessionProblem when it must not.

        For pi the file, checked against `digest` (None: sealed before this
        check existed; the file must still be there, its content is not compared).
        For claude and codex the file where the child's CLI will look, when the
        child's environment says where that is (None when it does not).
        """
        if not SAFE_ID.fullmatch(session_id):
            raise SessionProblem(UNSAFE, f"the recorded session id {session_id!r} is not an id")
        if backend == "pi":
            path = self.pi_file(session_id)
            if digest is not None and file_digest(path) != digest:
                raise SessionProblem(
                    CHANGED,
                    f"pi's session file {path.name} changed since the attempt it continues "
                    "ended: launch anew",
                )
            return path
        if backend == "claude":
            return _exists(_claude_file(session_id, env, cwd), "Claude Code", session_id)
        if backend == "codex":
            return _exists(_codex_file(session_id, env), "codex", session_id)
        return None

    def pi_file(self, session_id: str) -> Path:
        """pi's file of this session: a regular file whose real path is in the real pi dir."""
        if not SAFE_ID.fullmatch(session_id):
            raise SessionProblem(UNSAFE, f"the recorded session id {session_id!r} is not an id")
        home = self.pi_dir.resolve()
        found = sorted(home.glob(f"*_{session_id}{PI_SUFFIX}")) if home.is_dir() else []
        if not found:
            raise SessionProblem(
                MISSING,
                f"pi's session file of session {session_id} is no longer in {home}: launch anew",
            )
        path = found[0]
        real = path.resolve()
        if real.parent != home or not real.is_file():
            raise SessionProblem(
                UNSAFE,
                f"pi's session file {path.name} is not a file inside {home} (it leads to "
                f"{real}): launch anew",
            )
        return real


def file_digest(path: Path, prefix: str = DIGEST_PREFIX) -> str:
    """`prefix` and the SHA-256 of the file's bytes, read in pieces (a CLI may be large)."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(1 << 20):
            digest.update(chunk)
    return prefix + digest.hexdigest()


def _exists(path: Path | None, cli: str, session_id: str) -> Path | None:
    if path is None:  # the child's environment does not say where: cannot be checked
        return None
    if not path.is_file():
        raise SessionProblem(
            MISSING,
            f"{cli}'s session {session_id} is no longer where the CLI keeps it "
            f"({path.parent}): launch anew",
        )
    return path


def _claude_file(session_id: str, env: Mapping[str, str], cwd: str) -> Path | None:
    config = env.get("CLAUDE_CONFIG_DIR") or (
        str(Path(env["HOME"]) / ".claude") if env.get("HOME") else None
    )
    if config is None:
        return None
    projects = Path(config) / "projects"
    slug = re.sub(r"[^a-zA-Z0-9]", "-", cwd)
    if len(slug) <= CLAUDE_SLUG_CHARS:
        return projects / slug / f"{session_id}.jsonl"
    # Longer: shortened, with a hash of Claude Code's own after it.
    found = sorted(projects.glob(f"{slug[:CLAUDE_SLUG_CHARS]}-*/{session_id}.jsonl"))
    return found[0] if found else projects / slug[:CLAUDE_SLUG_CHARS] / f"{session_id}.jsonl"


def _codex_file(session_id: str, env: Mapping[str, str]) -> Path | None:
    home = env.get("CODEX_HOME") or (str(Path(env["HOME"]) / ".codex") if env.get("HOME") else None)
    if home is None:
        return None
    sessions = Path(home) / "sessions"
    found = sorted(sessions.glob(f"*/*/*/rollout-*-{session_id}.jsonl"))
    return found[0] if found else sessions / f"rollout-*-{session_id}.jsonl"
