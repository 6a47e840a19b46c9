"""What `subagent-host doctor` checks, each check one `Check` (protocol.md §7).

Most of it is asked of a real server, started the way `serve` would be with the same
options (`Host.start`): which agent CLIs it finds and their versions against the tested
ones, what each configured ACP agent answered to `initialize`, its process tracking,
whether its history is in SQLite, the limits it runs with. Only what a server cannot
say is looked at directly: whether the state directory is safe to use (a server refuses
to start on one that is not: `state_layout`), the Python and SQLite libraries, pi's
`models.json`, each agent CLI's credentials (terminal/credentials.py), the delegation
depth.

A server is started on the state directory only when a server may use it and it
exists (a server changes no mode there); otherwise on a temporary one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import stat
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Final

from subagent_host.client import Host
from subagent_host.client.errors import HostConnectionError, HostError
from subagent_host.command_line import read_depth
from subagent_host.rpc.wire import PingResult
from subagent_host.state_layout import state_dir_problem
from subagent_host.store.browse import BrowseError, StateBrowser, sqlite_library
from subagent_host.terminal.checks import Check
from subagent_host.terminal.credentials import CREDENTIALS, pi_agent_dir
from subagent_host.values import DEPTH_VARIABLE
from subagent_host.values.choices import ACP
from subagent_host.values.facts import BackendInfo

MIN_PYTHON: Final = (3, 11)  # pyproject.toml's requires-python
# WAL needs 3.7; the store's queries need nothing newer than what Python 3.11 ships.
MIN_SQLITE: Final = (3, 7, 0)
AGENTS: Final = ("pi", "claude", "codex")
# Each agent CLI's `--version` is probed by the server in the background when it
# starts; a probe that takes longer than this is reported as giving no version.
PROBE_WAIT_S: Final = 20.0
PROBE_POLL_S: Final = 0.1


def check_python(version: Sequence[int] | None = None) -> Check:
    version = tuple(sys.version_info[:3]) if version is None else version
    found = ".".join(str(part) for part in version[:3])
    if tuple(version[:2]) >= MIN_PYTHON:
        return Check("Python", True, found)
    wanted = ".".join(map(str, MIN_PYTHON))
    return Check("Python", False, f"{found}, older than {wanted}", f"use Python {wanted} or newer")


def check_state_dir(path: Path, uid: int | None = None) -> Check:
    """The state directory: a directory a server may use (`state_layout`), closed to
    others; or creatable."""
    uid = os.getuid() if uid is None else uid
    name = "state directory"
    try:
        found = path.lstat()
    except FileNotFoundError:
        parent = next((p for p in path.parents if p.exists()), None)
        if parent is not None and os.access(parent, os.W_OK | os.X_OK):
            return Check(name, True, f"{path} does not exist yet; a server creates it (0700)")
        return Check(
            name, False, f"{path} does not exist and cannot be created", "pass --state-dir DIR"
        )
    except OSError as exc:
        return Check(name, False, f"{path}: {exc.strerror}", "pass --state-dir DIR")
    if not stat.S_ISDIR(found.st_mode):
        return Check(
            name,
            False,
            f"{path} is not a directory",
            "remove or move it, or pass --state-dir DIR",
        )
    if (problem := state_dir_problem(path, uid)) is not None:
        ours_but_open = found.st_uid == uid and problem.startswith(f"{path} is writable")
        return Check(
            name,
            False,
            f"a server refuses it: {problem}",
            f"chmod 700 {path}"
            if ours_but_open
            else "pass a --state-dir of your own that nobody else can write to",
        )
    mode = stat.S_IMODE(found.st_mode)
    if mode & 0o077:
        return Check(
            name,
            None,
            f"{path} has mode {mode:o}, open to others (a server uses it as it is)",
            f"chmod 700 {path}",
        )
    return Check(name, True, f"{path} (0700, yours)")


def check_sqlite(persistence: str, journal: str | None, where: str) -> Check:
    version, numbers = sqlite_library()
    if numbers < MIN_SQLITE:
        wanted = ".".join(map(str, MIN_SQLITE))
        return Check("SQLite", False, f"{version}, older than {wanted}", "use a newer Python")
    if persistence != "sqlite":
        return Check(
            "SQLite",
            False,
            f"{version}, but a server keeps its history in memory in {where}",
            "fix the state directory (above)",
        )
    if journal != "wal":
        return Check(
            "SQLite",
            False,
            f"{version}, but the history in {where} is in journal mode {journal}, not WAL: "
            "servers and readers would block one another",
            "use a state directory on a local file system",
        )
    return Check("SQLite", True, f"{version}, history on disk (WAL) in {where}")


def check_backend(info: BackendInfo) -> Check:
    if not info.available:
        return Check(
            info.id,
            False,
            info.reason or "not available",
            f"install it (scripts/install-agents) and put it on PATH, or name it as "
            f'{{"backends": {{"{info.id}": {{"executable": PATH}}}}}} in a configuration file',
        )
    if info.version is None:
        return Check(
            info.id, None, "found, but its --version gave no answer", f"run `{info.id} --version`"
        )
    tested = info.tested_version
    if tested is None or is_tested(info.version, tested):
        return Check(info.id, True, f"{info.version} (the tested version)")
    return untested(info.id, info.version, tested)


def is_tested(version: str, tested: str) -> bool:
    """Whether `version` (as a program prints it, words around it) names `tested`."""
    return tested in re.findall(r"\d+(?:\.\d+)+", version)


def untested(name: str, version: str, tested: str) -> Check:
    return Check(
        name,
        None,
        f"{version}; the tests run against {tested}",
        f"install {tested} (scripts/install-agents) if it misbehaves",
    )


def check_acp_agent(info: BackendInfo) -> Check:
    """A configured ACP agent: found, answers `initialize` in ACP version 1, who it says it
    is, and whether it declares `loadSession` (without it, its children cannot be resumed)."""
    name = f"{info.id} (ACP)"
    if info.available and info.protocol_version is None:
        return Check(
            name,
            None,
            f"found, but it did not answer initialize within {PROBE_WAIT_S:g} s",
            "run its executable with its args and see what it prints",
        )
    if not info.available:
        reason = info.reason or "not available"
        if info.protocol_version is None and "PATH" in reason:
            fix = "install it, or name it by its path as `executable` in the configuration file"
        elif info.protocol_version is not None:
            fix = "configure a version of the agent that speaks ACP version 1"
        else:
            fix = "run its executable with its args and see what it prints"
        return Check(name, False, reason, fix)
    agent = info.agent_info
    who = f"{agent.name} {agent.version}" if agent is not None else "an agent with no agentInfo"
    detail = f"{who}, ACP version {info.protocol_version}"
    capabilities = info.agent_capabilities
    if capabilities is None or not capabilities.load_session:
        return Check(
            name,
            None,
            f"{detail}; it does not declare loadSession: its children cannot be resumed",
        )
    tested = info.tested_version
    if agent is not None and tested is not None and not is_tested(agent.version, tested):
        return untested(name, f"{detail}, loadSession", tested)
    return Check(name, True, f"{detail}, loadSession")


def pi_models_path(environ: Mapping[str, str]) -> Path:
    """Where pi reads `models.json`: in `$PI_CODING_AGENT_DIR`, else `~/.pi/agent`."""
    return pi_agent_dir(environ) / "models.json"


def check_pi_models(environ: Mapping[str, str]) -> Check:
    name = "pi models.json"
    path = pi_models_path(environ)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Check(name, None, f"{path} does not exist: pi knows only its built-in providers")
    except (OSError, UnicodeDecodeError) as exc:
        return Check(name, False, f"{path} cannot be read: {exc}", f"check {path}")
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return Check(name, False, f"{path} is not JSON: {exc}", f"fix or remove {path}")
    if not isinstance(value, dict):
        return Check(name, False, f"{path} is not a JSON object", f"fix or remove {path}")
    providers = value.get("providers")
    count = len(providers) if isinstance(providers, dict) else 0
    return Check(name, True, f"{path} ({count} provider{'' if count == 1 else 's'})")


def check_tracking(mode: str) -> Check:
    name = "process tracking"
    if mode in ("cgroup", "subreaper"):
        return Check(name, True, f"{mode}: every process a child starts is found and ended")
    return Check(
        name,
        None,
        f"{mode} only: a process that leaves its tree and clears its environment is missed",
        "run on Linux (subreaper) or with a delegated cgroup v2 (systemd-run --user -p "
        "Delegate=yes)",
    )


def check_depth(environ: Mapping[str, str], max_depth: int) -> Check:
    name = "delegation depth"
    depth, problem = read_depth(environ)
    if problem is not None:
        return Check(name, False, problem, f"unset {DEPTH_VARIABLE}")
    if depth >= max_depth:
        return Check(
            name,
            False,
            f"{DEPTH_VARIABLE}={depth}, at the maximum {max_depth}: every spawn is refused here",
            f"run outside the agent that set {DEPTH_VARIABLE}, or raise max_depth",
        )
    return Check(name, True, f"{depth} of at most {max_depth}")


async def diagnose(state_dir: Path, server_args: Sequence[str]) -> list[Check]:
    """Every check, in report order. `server_args` select the same configuration as
    `serve` would (without `--state-dir`: the one to use is chosen here)."""
    checks = [check_python(), check_state_dir(state_dir)]
    if checks[1].passed is False:  # a file, say: never served on, never touched
        scratch = "the state directory is not usable"
    elif not await asyncio.to_thread(state_dir.is_dir):
        scratch = "the state directory does not exist yet"
    else:
        scratch = None
    async with _server_state(state_dir, scratch) as (where, directory):
        try:
            ping = await _ping_settled([*server_args, "--state-dir", str(directory)])
        except (OSError, HostError, HostConnectionError) as exc:
            checks.append(Check("server", False, f"could not be started: {exc}", None))
            return checks
        journal = await asyncio.to_thread(_journal_mode, directory)
    checks.append(check_sqlite(ping.persistence, journal, where))
    agents = {info.id: info for info in ping.backends}
    checks += [check_backend(agents[name]) for name in AGENTS if name in agents]
    checks += [check_acp_agent(info) for info in ping.backends if info.protocol == ACP]
    checks.append(check_pi_models(os.environ))
    for name in AGENTS:
        if _available(agents.get(name)):  # files read off the loop
            checks.append(await asyncio.to_thread(CREDENTIALS[name], dict(os.environ)))
    checks.append(check_tracking(ping.process_tracking))
    checks.append(check_depth(os.environ, ping.limits.max_depth))
    return checks


@contextlib.asynccontextmanager
async def _server_state(state_dir: Path, scratch: str | None) -> AsyncIterator[tuple[str, Path]]:
    """The state directory the doctor's server uses (a temporary one, for the reason
    `scratch`, when it is not `state_dir`), and how the report names it."""
    if scratch is None:
        yield str(state_dir), state_dir
        return
    with tempfile.TemporaryDirectory(prefix="subagent-host-doctor-") as directory:
        yield f"a temporary state directory ({scratch})", Path(directory)


async def _ping_settled(args: Sequence[str]) -> PingResult:
    """`ping` a server started with `args`, once every agent CLI it found has its version
    probed (or PROBE_WAIT_S has passed)."""
    async with Host.start(args, stderr=subprocess.DEVNULL) as host:
        ping = await host.ping()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(PROBE_WAIT_S):
                while any(_probing(info) for info in ping.backends):
                    await asyncio.sleep(PROBE_POLL_S)  # no event tells a probe's end
                    ping = await host.ping()
        return ping


def _journal_mode(state_dir: Path) -> str | None:
    """The journal mode of the history the server wrote (None when there is none)."""
    try:
        with StateBrowser.open(state_dir) as browser:
            return browser.journal_mode()
    except BrowseError:
        return None


def _available(info: BackendInfo | None) -> bool:
    """Whether an agent CLI was found: only then are its credentials worth a line."""
    return info is not None and info.available


def _probing(info: BackendInfo) -> bool:
    if info.protocol == ACP:  # asked initialize: answered once it says its version of ACP
        return info.available and info.protocol_version is None
    return info.id in AGENTS and info.available and info.version is None
