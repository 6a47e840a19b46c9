"""Where an agent CLI sends its model requests, as its environment and configuration name it.

Every agent child talks to its model's provider, whatever tools it has: its prompt,
the files it reads and its tools' output leave the machine that way. A receipt says
so (planning/egress.py), with the provider's base URL where the child's own
environment or its CLI's configuration file names one:

- claude: `ANTHROPIC_BASE_URL`;
- codex: the `base_url` of the `[model_providers.X]` table its `config.toml` (in
  `CODEX_HOME`, else `~/.codex`) selects with `model_provider` (or the selected
  profile's), else `OPENAI_BASE_URL` for its built-in `openai` provider;
- pi: the `baseUrl` its `models.json` (in `PI_CODING_AGENT_DIR`, else
  `~/.pi/agent`) gives the provider the child runs (`--provider`, else the
  `defaultProvider` of its `settings.json`).

None means none is named: the CLI's own default provider. A file that cannot be
read or parsed names nothing. These read small files: callers run them off the
event loop.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

# The largest configuration file read: CLIs' own files are a few KiB.
MAX_CONFIG_BYTES: Final = 1024 * 1024


def provider_endpoint(backend: str, env: Mapping[str, str], argv: Sequence[str]) -> str | None:
    """The base URL the child of `backend` sends its model requests to, when named."""
    find = ENDPOINTS.get(backend)
    return find(env, argv) if find is not None else None


def claude_endpoint(env: Mapping[str, str], argv: Sequence[str]) -> str | None:
    return _text(env.get("ANTHROPIC_BASE_URL"))


def codex_endpoint(env: Mapping[str, str], argv: Sequence[str]) -> str | None:
    home = _home(env, "CODEX_HOME", ".codex")
    config = _read(home / "config.toml", tomllib.loads) if home is not None else None
    config = config if isinstance(config, dict) else {}
    provider = config.get("model_provider")
    profile = _member(config.get("profiles"), config.get("profile"))
    if isinstance(profile, dict):
        provider = profile.get("model_provider", provider)
    table = _member(config.get("model_providers"), provider)
    if isinstance(table, dict) and _text(table.get("base_url")) is not None:
        return _text(table.get("base_url"))
    if provider in (None, "openai"):
        return _text(env.get("OPENAI_BASE_URL"))
    return None


def pi_endpoint(env: Mapping[str, str], argv: Sequence[str]) -> str | None:
    home = _home(env, "PI_CODING_AGENT_DIR", ".pi/agent")
    if home is None:
        return None
    provider: object = _option(argv, "--provider")
    if provider is None:
        provider = _member(_read(home / "settings.json", json.loads), "defaultProvider")
    models = _read(home / "models.json", json.loads)
    table = _member(_member(models, "providers"), provider)
    return _text(table.get("baseUrl")) if isinstance(table, dict) else None


ENDPOINTS: Final[Mapping[str, Callable[[Mapping[str, str], Sequence[str]], str | None]]] = {
    "claude": claude_endpoint,
    "codex": codex_endpoint,
    "pi": pi_endpoint,
}


def _home(env: Mapping[str, str], variable: str, under_home: str) -> Path | None:
    """The CLI's directory: `variable` when set, else `under_home` in the child's HOME."""
    if env.get(variable):
        try:
            return Path(env[variable]).expanduser()
        except RuntimeError:  # `~user` of no known user: the CLI could not use it either
            return None
    return Path(env["HOME"]) / under_home if env.get("HOME") else None


def _member(table: object, key: object) -> object:
    """`table[key]` when `table` is an object and `key` a name in it; else None (a file
    may hold anything: a list where a name was due is no key)."""
    return table.get(key) if isinstance(table, dict) and isinstance(key, str) else None


def _read(path: Path, parse: Callable[[str], Any]) -> Any:
    """A configuration file's parsed content; None when it cannot be read or parsed."""
    try:
        with path.open("rb") as file:
            data = file.read(MAX_CONFIG_BYTES + 1)
        if len(data) > MAX_CONFIG_BYTES:
            return None
        return parse(data.decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):  # tomllib's and json's errors are these
        return None


def _option(argv: Sequence[str], name: str) -> str | None:
    """The value following `name` in `argv` (the adapter wrote it: `--provider X`)."""
    for position, argument in enumerate(argv[:-1]):
        if argument == name:
            return argv[position + 1]
    return None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
