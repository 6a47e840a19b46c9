"""`subagent-host doctor`'s credential checks: can each agent CLI answer at all?

A CLI without credentials starts, prints "Not logged in" or "No API key found" and
exits: the version check alone does not see that. These checks read only the
environment and the CLIs' own files (no request is made to a provider, nothing is
spent) and never print a secret: only where a credential was found.
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

from subagent_host.terminal.checks import Check

# pi's providers and the variable each reads its key from (pi's docs/providers.md).
PI_PROVIDER_KEYS: Final = {
    "anthropic": "ANTHROPIC_API_KEY",
    "openai": "OPENAI_API_KEY",
    "google": "GEMINI_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "groq": "GROQ_API_KEY",
    "xai": "XAI_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
}
CLAUDE_KEYS: Final = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
CODEX_KEYS: Final = ("OPENAI_API_KEY", "CODEX_API_KEY")
# codex's built-in providers that run locally and need no key.
CODEX_LOCAL_PROVIDERS: Final = frozenset({"oss", "ollama", "lmstudio"})


def _set(environ: Mapping[str, str], name: str) -> bool:
    return bool(environ.get(name, "").strip())


def _json_object(path: Path) -> dict[str, object] | None:
    """The JSON object in `path`; None when it is missing, unreadable or no object."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return value if isinstance(value, dict) else None


def _home(environ: Mapping[str, str]) -> Path:
    return Path(environ.get("HOME") or Path.home())


def pi_agent_dir(environ: Mapping[str, str]) -> Path:
    """pi's own directory: `$PI_CODING_AGENT_DIR`, else `~/.pi/agent`."""
    agent_dir = environ.get("PI_CODING_AGENT_DIR")
    return Path(agent_dir).expanduser() if agent_dir else _home(environ) / ".pi" / "agent"


def check_pi_credentials(environ: Mapping[str, str]) -> Check:
    """pi answers with the first model that has a key: one in auth.json (`/login`), a
    provider's variable, or a models.json provider with an `apiKey`."""
    name = "pi credentials"
    agent_dir = pi_agent_dir(environ)
    stored = _json_object(agent_dir / "auth.json") or {}
    if stored:
        return Check(name, True, f"{', '.join(sorted(stored))} in {agent_dir / 'auth.json'}")
    variables = sorted(v for v in PI_PROVIDER_KEYS.values() if _set(environ, v))
    if variables:
        return Check(name, True, f"{', '.join(variables)} set")
    providers = (_json_object(agent_dir / "models.json") or {}).get("providers")
    keyed = sorted(
        provider
        for provider, spec in (providers.items() if isinstance(providers, dict) else ())
        if isinstance(spec, dict) and spec.get("apiKey")
    )
    if keyed:
        return Check(name, True, f"models.json provider {', '.join(keyed)} has an apiKey")
    return Check(
        name,
        False,
        "no API key for any provider: pi answers 'No API key found'",
        "run 'pi' and /login, set ANTHROPIC_API_KEY (or another provider's key), "
        f"or give a provider an apiKey in {agent_dir / 'models.json'}",
    )


def check_claude_credentials(environ: Mapping[str, str]) -> Check:
    """claude answers with ANTHROPIC_API_KEY or ANTHROPIC_AUTH_TOKEN, or the login
    (`/login`) it keeps in its config directory."""
    name = "claude credentials"
    variables = [v for v in CLAUDE_KEYS if _set(environ, v)]
    if variables:
        return Check(name, True, f"{', '.join(variables)} set")
    config = environ.get("CLAUDE_CONFIG_DIR")
    config_dir = Path(config).expanduser() if config else _home(environ) / ".claude"
    login = _json_object(config_dir / ".credentials.json") or {}
    oauth = login.get("claudeAiOauth")
    if isinstance(oauth, dict) and oauth.get("accessToken"):
        return Check(name, True, f"logged in ({config_dir / '.credentials.json'})")
    # A key saved by the login: `.claude.json` beside the config dir's settings (in
    # the config dir when CLAUDE_CONFIG_DIR names it, else in the home directory).
    settings = config_dir / ".claude.json" if config else _home(environ) / ".claude.json"
    if (_json_object(settings) or {}).get("primaryApiKey"):
        return Check(name, True, f"an API key saved in {settings}")
    return Check(
        name,
        False,
        "not logged in: claude answers 'Not logged in · Please run /login'",
        "run 'claude /login' or set ANTHROPIC_API_KEY",
    )


def check_codex_credentials(environ: Mapping[str, str]) -> Check:
    """codex answers with its configured `model_provider`: OpenAI's with OPENAI_API_KEY
    or auth.json (`codex login`); a provider of config.toml with its `env_key` set."""
    name = "codex credentials"
    value = environ.get("CODEX_HOME")
    codex_home = Path(value).expanduser() if value else _home(environ) / ".codex"
    config_path = codex_home / "config.toml"
    try:
        config = tomllib.loads(config_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        config = {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return Check(name, False, f"{config_path} cannot be read: {exc}", f"fix {config_path}")
    provider = config.get("model_provider", "openai")
    if provider != "openai":
        return _codex_provider(name, environ, config, str(provider), config_path)
    variables = [v for v in CODEX_KEYS if _set(environ, v)]
    if variables:
        return Check(name, True, f"{', '.join(variables)} set")
    auth = _json_object(codex_home / "auth.json") or {}
    if auth.get("OPENAI_API_KEY") or auth.get("tokens"):
        return Check(name, True, f"logged in ({codex_home / 'auth.json'})")
    return Check(
        name,
        False,
        "not logged in: codex reconnects until a timeout ends it",
        "run 'codex login' or set OPENAI_API_KEY",
    )


def _codex_provider(
    name: str, environ: Mapping[str, str], config: dict[str, object], provider: str, path: Path
) -> Check:
    """A `model_provider` other than OpenAI's: defined, and its `env_key` set."""
    providers = config.get("model_providers")
    spec = providers.get(provider) if isinstance(providers, dict) else None
    if not isinstance(spec, dict):
        if provider in CODEX_LOCAL_PROVIDERS:
            return Check(name, True, f"model_provider {provider} (local, no key)")
        return Check(
            name,
            False,
            f"model_provider {provider} is not defined in {path}",
            f"add [model_providers.{provider}] to {path} or remove model_provider",
        )
    env_key = spec.get("env_key")
    if not isinstance(env_key, str) or not env_key:
        return Check(name, True, f"model_provider {provider} (no env_key)")
    # The server passes a codex child only its own variables (CODEX_HOME, OPENAI_API_KEY,
    # ...), not the one a custom provider names: the spawn's `env` must carry it.
    where = "set here" if _set(environ, env_key) else "not set here"
    return Check(
        name,
        None,
        f"model_provider {provider} reads {env_key} ({where}), which a codex child gets "
        "only from its spawn's env",
        f'pass "env": {{"{env_key}": ...}} with each codex spawn',
    )


# The check of each agent CLI's credentials, by its backend id.
CREDENTIALS: Final[Mapping[str, Callable[[Mapping[str, str]], Check]]] = {
    "pi": check_pi_credentials,
    "claude": check_claude_credentials,
    "codex": check_codex_credentials,
}
