"""Find agent definitions on disk and decide which of them may be used.

Directories are read in `search_path` order, user before project, so a later
directory's definition replaces an earlier one of the same (case-insensitive)
name. A broken later definition blocks the name instead of falling back to the
earlier one: someone who edited `reviewer` expects their version or an error,
never a silently different agent. Blocking file IO throughout; callers run
`discover` in a thread.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Final

import attrs

from subagent_host.agents.definitions import (
    ERROR,
    INFO,
    PROJECT,
    USER,
    WARNING,
    AgentDefinition,
    DefinitionDiagnostic,
    parse_definition,
)
from subagent_host.values.choices import AgentSource

# Generous for instructions, small enough that a stray huge file cannot bloat
# every spawn's prompt or the server's memory.
MAX_DEFINITION_BYTES: Final = 256 * 1024
SUFFIX: Final = ".md"


@attrs.frozen
class AgentCatalog:
    """Every definition found: the usable ones, the blocked names, and why."""

    agents: Mapping[str, AgentDefinition]  # by lowercase name
    blocked: Mapping[str, DefinitionDiagnostic]  # lowercase name -> the error blocking it
    diagnostics: tuple[DefinitionDiagnostic, ...]  # every file's, in discovery order
    directories: tuple[tuple[str, str], ...]  # (source, directory) searched, in order

    def lookup(self, name: str) -> AgentDefinition | DefinitionDiagnostic | None:
        """The agent called `name` (any case), the error that blocks it, or None."""
        key = name.lower()
        blocked = self.blocked.get(key)
        if blocked is not None:
            return blocked
        return self.agents.get(key)


def search_path(user_dir: Path, project_dir: Path | None) -> list[tuple[AgentSource, Path]]:
    """The directories definitions are read from, lowest precedence first.

    `project_dir` is given only for a trusted project: its definitions are
    instructions written by whoever controls the repository.
    """
    path = [(USER, user_dir / "agents"), (USER, user_dir / "subagents")]
    if project_dir is not None:
        pi_dir = project_dir / ".pi"
        path += [(PROJECT, pi_dir / "agents"), (PROJECT, pi_dir / "subagents")]
    return path


def discover(user_dir: Path, project_dir: Path | None) -> AgentCatalog:
    """Read every directory of `search_path` and build the catalog; never raises on bad files."""
    agents: dict[str, AgentDefinition] = {}
    blocked: dict[str, DefinitionDiagnostic] = {}
    diagnostics: list[DefinitionDiagnostic] = []
    directories = search_path(user_dir, project_dir)
    for source, directory in directories:
        loaded = _load_directory(source, directory, diagnostics)
        _merge_directory(loaded, agents, blocked, diagnostics)
    return AgentCatalog(
        agents=MappingProxyType(agents),
        blocked=MappingProxyType(blocked),
        diagnostics=tuple(diagnostics),
        directories=tuple((source, str(directory)) for source, directory in directories),
    )


@attrs.frozen
class _Loaded:
    """One file's outcome: its definition, or the error that makes its name unusable."""

    key: str
    name: str
    path: str
    definition: AgentDefinition | None
    error: DefinitionDiagnostic | None


class _NotAFile(Exception):
    """A `*.md` entry that is not a regular file (a directory, a FIFO, ...)."""

    def __init__(self, mode: int) -> None:
        super().__init__(mode)
        self.is_dir = stat.S_ISDIR(mode)


def _load_directory(
    source: AgentSource, directory: Path, diagnostics: list[DefinitionDiagnostic]
) -> list[_Loaded]:
    """Parse the directory's `*.md` files in name order; a missing directory has none."""
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return []
    except OSError as exc:
        real = os.path.realpath(directory)
        diagnostics.append(
            DefinitionDiagnostic(
                WARNING, "unreadable", f"{real}: cannot list agent definitions: {exc}", real
            )
        )
        return []
    loaded: list[_Loaded] = []
    for file_name in names:
        if file_name.startswith(".") or not file_name.endswith(SUFFIX):
            continue
        item = _load_file(source, directory / file_name, diagnostics)
        if item is not None:
            loaded.append(item)
    return loaded


def _load_file(
    source: AgentSource, path: Path, diagnostics: list[DefinitionDiagnostic]
) -> _Loaded | None:
    """Read and parse one file, adding its diagnostics; None when it is no file at all."""
    real = os.path.realpath(path)
    stem = path.name.removesuffix(SUFFIX)  # the name as found, not the symlink target's
    try:
        data = _read_capped(real)
    except _NotAFile as exc:
        if not exc.is_dir:  # a directory named x.md is just not a definition
            diagnostics.append(
                DefinitionDiagnostic(WARNING, "unreadable", f"{real}: not a regular file", real)
            )
        return None
    except OSError as exc:
        error = DefinitionDiagnostic(
            ERROR, "unreadable", f"{real}: cannot read: {exc.strerror or exc}", real, stem
        )
        diagnostics.append(error)
        return _Loaded(stem.lower(), stem, real, None, error)
    if data is None:
        error = DefinitionDiagnostic(
            ERROR,
            "too-large",
            f"{real}: larger than {MAX_DEFINITION_BYTES} bytes, the limit for a definition",
            real,
            stem,
        )
        diagnostics.append(error)
        return _Loaded(stem.lower(), stem, real, None, error)

    definition, found = parse_definition(data, path=real, source=source)
    # parse_definition names its diagnostics when the frontmatter name is valid;
    # otherwise the file's stem is the name it blocks.
    name = next((d.name for d in found if d.name is not None), None)
    if definition is not None:
        name = definition.name
    name = name or stem
    found = [d if d.name is not None else attrs.evolve(d, name=name) for d in found]
    diagnostics.extend(found)
    first_error = next((d for d in found if d.severity == ERROR), None)
    return _Loaded(name.lower(), name, real, definition, first_error)


def _read_capped(path: str) -> bytes | None:
    """The file's bytes, or None when over the cap; raises _NotAFile or OSError."""
    # O_NONBLOCK: opening a FIFO someone named x.md must not hang discovery.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _NotAFile(mode)
        file = open(fd, "rb")  # owns fd from here on
    except BaseException:
        os.close(fd)
        raise
    with file:
        data = file.read(MAX_DEFINITION_BYTES + 1)
    return None if len(data) > MAX_DEFINITION_BYTES else data


def _merge_directory(
    loaded: list[_Loaded],
    agents: dict[str, AgentDefinition],
    blocked: dict[str, DefinitionDiagnostic],
    diagnostics: list[DefinitionDiagnostic],
) -> None:
    """Merge one directory's files into the catalog: later replaces, broken blocks."""
    by_key: dict[str, list[_Loaded]] = {}
    for item in loaded:
        by_key.setdefault(item.key, []).append(item)
    for key, items in by_key.items():
        error: DefinitionDiagnostic | None
        if len(items) > 1:
            last = items[-1]
            error = DefinitionDiagnostic(
                ERROR,
                "duplicate",
                f"agent {last.name!r} is defined by {len(items)} files in one directory "
                f"({', '.join(item.path for item in items)}): none of them is used",
                last.path,
                last.name,
            )
            diagnostics.append(error)
        else:
            error = items[0].error
        definition = items[0].definition
        if error is not None or definition is None:
            assert error is not None  # a file without a definition always has an error
            blocked[key] = error
            agents.pop(key, None)
            continue
        earlier = agents.get(key)
        if earlier is not None:
            diagnostics.append(
                DefinitionDiagnostic(
                    INFO,
                    "overridden",
                    f"{definition.path}: agent {definition.name!r} replaces the one in "
                    f"{earlier.path}",
                    definition.path,
                    definition.name,
                )
            )
        agents[key] = definition
        blocked.pop(key, None)
