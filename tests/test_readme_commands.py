"""Every shell line of the README works when pasted.

Each line of each `sh` block is one of:
- run here, in the order of its block, by `bash` in a scratch directory that holds
  what a reader's checkout holds (`.venv`, `agents`, `scripts`), with the virtual
  environment active (its `bin` first on PATH, as `. .venv/bin/activate` makes it), its
  own HOME and state directories, and pi's providers pointing at the loopback mock
  LLM; it must exit 0, no JSON-RPC reply it prints may be an error, and nothing it
  started may be left once it has ended (a line ending in `&` leaves a job running: the
  next line is run once the job's run is running, and a later line must end it);
- a benchmark (`.venv/bin/python bench/NAME.py`): run here the same way with the
  smallest sizes its options allow (`BENCH_SIZES`), since the full sizes take minutes;
- a full-screen program (`subagent-host watch`): driven through a real terminal by its
  own tests (`INTERACTIVE`);
- one that CI runs verbatim (`.ci/run` holds the same line): the install of the agent
  CLIs, the whole test suite, the linters, the conformance harness;
- the install itself (`python3 -m venv .venv && .venv/bin/pip install ...`): the plain
  install is made here into a fresh environment once; the rest of such a line is run.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Final

import psutil
import pytest

from subagent_host.store.browse import BrowseError, StateBrowser
from tests.backends.fixtures.record_pi import models
from tests.mock_llm import MockLLM
from tests.waits import still_running

pytestmark = pytest.mark.e2e

ROOT: Final = Path(__file__).resolve().parent.parent
README: Final = ROOT / "README.md"
# What .ci/run runs, without the bookkeeping after a command (`|| status=1`).
CI_LINES: Final = frozenset(
    re.sub(r"\s*\|\|\s*(status=1|exit 1)$", "", line.strip())
    for line in (ROOT / ".ci" / "run").read_text().splitlines()
    if line.strip() and not line.lstrip().startswith("#")
)
CI_PARTS: Final = frozenset(part for line in CI_LINES for part in line.split(" && "))
INSTALL: Final = re.compile(
    r"^(python3 -m venv \.venv && )?\.venv/bin/pip install (-q )?(?P<spec>(-e )?\S+)(?=$| && )"
)
BENCH: Final = re.compile(r"^\.venv/bin/python (?P<script>bench/\w+\.py)$")
# Full-screen programs a person drives: each is driven through a real terminal by a test.
INTERACTIVE: Final = {"subagent-host watch": ROOT / "tests" / "terminal" / "test_watch.py"}
# A comment after a command: two or more spaces, then `# ` (JSON in a line has no `  # `).
TRAILING_COMMENT: Final = re.compile(r"\s{2,}#\s.*$")
LINE_TIMEOUT_S: Final = 180

# The smallest sizes of each benchmark: what its README line does, in seconds.
BENCH_SIZES: Final[dict[str, tuple[str, ...]]] = {
    "bench/ping.py": ("--pipelined", "200", "--sequential", "100", "--repeat", "1"),
    "bench/runs.py": (
        *("--spawns", "5", "--drain-mib", "2", "--drain-repeat", "1", "--stops", "1"),
        *("--stops-ignore-term", "1", "--idle-seconds", "0.5"),
    ),
    "bench/history.py": ("--runs", "50"),
    "bench/interactive.py": ("--sends", "5", "--children", "3", "--idle-seconds", "0.2"),
    "bench/agents.py": ("--repeat", "1"),
    "bench/acp.py": ("--repeat", "1"),
    # More than the outgoing queue's 4 MiB, or nothing is held back.
    "bench/memory.py": ("--held-mib", "16", "--after-mib", "2"),
    "bench/hostile_strings.py": (),
    "bench/endless_lines.py": ("--mib", "20"),
    "bench/leftovers.py": ("--modes", "subreaper"),
    "bench/startup.py": ("--repeat", "1"),
    "bench/ray.py": (
        *("--spawns", "3", "--parallel", "3", "--lines", "1000", "--concurrent", "4"),
        *("--sleep", "0.5"),
    ),
}


def readme_blocks() -> list[list[str]]:
    """The command lines of each `sh` block, comments and blank lines left out."""
    blocks = re.findall(r"```sh\n(.+?)\n```", README.read_text(), re.S)
    return [
        [
            TRAILING_COMMENT.sub("", line).strip()
            for line in block.splitlines()
            if line.strip() and not line.lstrip().startswith("#")
        ]
        for block in blocks
    ]


def _without_install(line: str) -> str:
    """What a line runs after the install it may start with."""
    install = INSTALL.match(line)
    return line[install.end() :].removeprefix(" && ").strip() if install else line


def _kind(line: str) -> str:
    """`ci` (CI runs it verbatim), `install`, `interactive`, `bench` or `run` (see the
    module's text)."""
    rest = _without_install(line)
    if rest in INTERACTIVE:
        return "interactive"
    if line in CI_LINES or rest == "bash .ci/run":
        return "ci"
    if not rest:
        return "install"
    if all(part in CI_PARTS for part in rest.split(" && ")):
        return "ci"
    return "bench" if BENCH.match(rest) else "run"


def test_every_readme_line_is_run_here_or_by_ci_verbatim() -> None:
    kinds = {line: _kind(line) for block in readme_blocks() for line in block}
    assert kinds, "the README has no shell lines"
    extras = re.findall(r"^(\w+) = \[", (ROOT / "pyproject.toml").read_text(), re.M)
    for line, kind in kinds.items():
        if kind == "bench":
            match = BENCH.match(line)
            assert match is not None and match["script"] in BENCH_SIZES, line
        install = INSTALL.match(line)
        if install is not None:
            named = re.findall(r"\[([\w,]+)\]", install["spec"])
            assert all(extra in extras for group in named for extra in group.split(",")), line
    assert "scripts/install-agents" in CI_LINES
    for line, test in INTERACTIVE.items():
        assert line.split()[-1] in test.read_text(), test


@pytest.fixture
def reader_checkout(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """A directory like a reader's checkout, and the environment of their shell."""
    work = tmp_path / "checkout"
    work.mkdir()
    for name in (".venv", "agents", "scripts", "bench", "pyproject.toml", "README.md"):
        (work / name).symlink_to(ROOT / name)
    home = tmp_path / "home"
    pi_dir = home / ".pi" / "agent"
    pi_dir.mkdir(parents=True)
    with MockLLM() as mock:
        # The README's pi example names a provider `local` with a model `my-model`.
        providers = models(mock.openai_base_url)
        mock_provider = providers["providers"]["mock"]  # type: ignore[index]
        mock_provider["models"][0]["id"] = "my-model"
        (pi_dir / "models.json").write_text(json.dumps({"providers": {"local": mock_provider}}))
        environment = {
            **os.environ,
            "HOME": str(home),
            "XDG_STATE_HOME": str(tmp_path / "xdg-state"),
            "XDG_CONFIG_HOME": str(tmp_path / "xdg-config"),
            "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "VIRTUAL_ENV": str(ROOT / ".venv"),
            "PI_OFFLINE": "1",
            "PI_SKIP_VERSION_CHECK": "1",
            "PI_TELEMETRY": "0",
        }
        yield work, environment


def _start(line: str, cwd: Path, environment: dict[str, str]) -> subprocess.Popen[bytes]:
    """`line` run by bash in a session of its own, its output to files (a job it leaves in
    the background must not hold a pipe the test reads to its end)."""
    return subprocess.Popen(  # noqa: TID251 - a README line as a reader runs it, once
        ["bash", "-c", line],
        cwd=cwd,
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=(cwd.parent / "stdout").open("wb"),
        stderr=(cwd.parent / "stderr").open("wb"),
        start_new_session=True,
    )


def _finish(shell: subprocess.Popen[bytes], cwd: Path) -> tuple[int, str, str]:
    status = shell.wait(timeout=LINE_TIMEOUT_S)
    read = (cwd.parent / "stdout").read_text(), (cwd.parent / "stderr").read_text()
    return status, *read


async def _running_run(state_dir: Path) -> None:
    """Until a run of the state directory is running: what a person pasting a line that
    starts one in the background waits for before the next line."""
    async with asyncio.timeout(LINE_TIMEOUT_S):
        while True:
            with contextlib.suppress(BrowseError), StateBrowser.open(state_dir) as browser:
                if any(str(found.run.status) == "running" for found in browser.runs()):
                    return
            await asyncio.sleep(0.05)  # another process writes it and cannot wake this reader


def _session_members(session: int) -> list[int]:
    members = []
    for pid in psutil.pids():
        try:
            if os.getsid(pid) == session:
                members.append(pid)
        except OSError:
            continue
    return members


def _errors_in(stdout: str) -> list[object]:
    """JSON-RPC error replies among the lines printed (other lines are not looked at)."""
    errors: list[object] = []
    for text in stdout.splitlines():
        try:
            message = json.loads(text)
        except ValueError:
            continue
        for item in message if isinstance(message, list) else [message]:
            if isinstance(item, dict) and "error" in item and "jsonrpc" in item:
                errors.append(item)
    return errors


@pytest.mark.timeout(900)  # the benchmarks' block, at their smallest sizes, on a busy machine
@pytest.mark.parametrize("block", range(len(readme_blocks())), ids=lambda index: f"block{index}")
async def test_every_readme_line_works_when_pasted(
    block: int, reader_checkout: tuple[Path, dict[str, str]]
) -> None:
    work, environment = reader_checkout
    background: list[subprocess.Popen[bytes]] = []
    for line in readme_blocks()[block]:
        kind = _kind(line)
        if kind in ("ci", "install", "interactive"):
            continue
        line = _without_install(line)  # the install: see test_the_plain_install_works
        if kind == "bench":
            match = BENCH.match(line)
            assert match is not None
            line = f"{line} {shlex.join(BENCH_SIZES[match['script']])}"
        shell = _start(line, work, environment)
        if line.endswith("&"):
            status, _, stderr = _finish(shell, work)
            assert status == 0, f"{line}\n{stderr[-2000:]}"
            await _running_run(Path(environment["XDG_STATE_HOME"]) / "subagent-host")
            background.append(shell)
            continue
        status, stdout, stderr = _finish(shell, work)
        assert status == 0, f"{line}\n{stdout[-2000:]}\n{stderr[-2000:]}"
        assert not _errors_in(stdout), f"{line}\n{stdout[-2000:]}"
        assert _session_members(shell.pid) == [], f"left by {line!r}"
    for shell in background:  # a later line of the block ended what it started
        members = [psutil.Process(pid) for pid in _session_members(shell.pid)]
        assert await still_running(members, LINE_TIMEOUT_S) == [], "a background job is left"


@pytest.mark.timeout(900)  # an install from the package index, once
def test_the_plain_install_works(tmp_path: Path) -> None:
    """`pip install .` into a fresh environment gives a working `subagent-host`."""
    venv = tmp_path / "venv"
    subprocess.run(  # noqa: TID251 - an install, once
        [sys.executable, "-m", "venv", str(venv)], check=True, timeout=120
    )
    done = subprocess.run(  # noqa: TID251 - an install, once
        [str(venv / "bin" / "pip"), "install", "-q", str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    version = subprocess.run(  # noqa: TID251
        [str(venv / "bin" / "subagent-host"), "--version"], capture_output=True, text=True
    )
    assert version.returncode == 0 and version.stdout.startswith("subagent-host ")
