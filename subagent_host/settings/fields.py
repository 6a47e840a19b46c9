"""The per-field checks: each turns a field's JSON value into its setting or says
why it cannot, and `FIELDS` names the check and the files allowed for each field."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Final

import attrs

from subagent_host.settings.agent_filter import AgentLists
from subagent_host.settings.model import (
    EXECUTORS,
    LOCAL,
    LOG_FORMATS,
    LOG_LEVELS,
    MAX_CAP_BYTES,
    MAX_CAP_LINES,
    MAX_CONCURRENCY,
    MAX_HISTORY_LIMIT,
    MAX_MESSAGE_BYTES,
    MAX_PARALLEL,
    MAX_QUEUE,
    MIN_CAP_BYTES,
    MIN_MESSAGE_BYTES,
    MIN_RESUME_TOKEN_TTL_MS,
    PROCESS_TRACKING,
    AcpBackendSetting,
    ExecutorChoice,
)
from subagent_host.values import (
    EFFORTS,
    FRAMINGS,
    MAX_DURATION_MS,
    MAX_SAFE_INTEGER,
    MODES,
    SESSION_ID_PATTERN,
    SESSION_ID_RULE,
    SESSION_RESOURCES,
)
from subagent_host.values.choices import ACP, AGENT_BACKENDS, BACKENDS, Approvals, is_backend_name

# One setting, three spellings (pi's settings say `thinkingLevel`).
EFFORT_KEYS: Final = ("default_effort", "default_thinking_level", "thinkingLevel")
PROFILE_EFFORT_KEYS: Final = ("effort", "thinking")
# Longest slice of a bad value quoted in a diagnostic.
SHOWN_VALUE_CHARS: Final = 60


Check = Callable[[object, Path], object]
"""Parse a field's JSON value (paths relative to the given directory); raise
ValueError with the reason when it is invalid."""


@attrs.frozen
class FieldRule:
    check: Check
    in_project: bool = True
    """False: a server option, set only in the global and `--config` files."""
    safety: bool = False
    """True: a value that cannot be read stops the server (exit 2) instead of being
    ignored, since falling back to the default would weaken a protection the user
    asked for (protocol.md §19)."""


# --- field checks ---------------------------------------------------------------


def show(value: object) -> str:
    text = json.dumps(value) if not isinstance(value, Path) else str(value)
    if len(text) > SHOWN_VALUE_CHARS:
        return text[: SHOWN_VALUE_CHARS - 3] + "..."
    return text


def int_in_range(low: int, high: int) -> Check:
    def check(value: object, base: Path) -> int:
        # bool is an int to Python, never to a configuration file.
        if type(value) is not int:
            raise ValueError(f"{show(value)} is not a whole number")
        if not low <= value <= high:
            raise ValueError(f"{value} is out of range ({low}..{high})")
        return value

    return check


def check_dollars(value: object, base: Path) -> float:
    """A positive, finite amount of US dollars (a whole number too)."""
    if type(value) not in (int, float):  # bool is an int to Python, never to a file
        raise ValueError(f"{show(value)} is not a number")
    assert isinstance(value, int | float)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{show(value)} is not above 0")
    return float(value)


def one_of(options: Sequence[str], *, fold_case: bool = False) -> Check:
    def check(value: object, base: Path) -> str:
        text = value.lower() if isinstance(value, str) and fold_case else value
        if not isinstance(text, str) or text not in options:
            raise ValueError(f"{show(value)} is not one of {', '.join(options)}")
        return text

    return check


def check_effort(value: object, base: Path) -> str:
    checked = one_of(EFFORTS)(value, base)
    assert isinstance(checked, str)
    return checked


def check_model(value: object, base: Path) -> str:
    """A model name, or `{provider, id}` (pi's own spelling), which is `provider/id`."""
    if isinstance(value, dict):
        return model_of(value)
    if not isinstance(value, str) or not value or any(char.isspace() for char in value):
        raise ValueError(
            f"{show(value)} is not a model name (a non-empty word, no spaces, "
            "or an object {provider, id})"
        )
    return value


def model_of(value: Mapping[str, object]) -> str:
    """`{"provider": "anthropic", "id": "claude-sonnet-4-5"}` as `anthropic/claude-sonnet-4-5`."""
    unknown = sorted(set(value) - {"provider", "id"})
    if unknown:
        raise ValueError(f"unknown member {unknown[0]!r} (a model object is {{provider, id}})")
    parts = []
    for key in ("provider", "id"):
        part = value.get(key)
        if not isinstance(part, str) or not part or any(char.isspace() for char in part):
            raise ValueError(f"{key} {show(part)} is not a non-empty word without spaces")
        parts.append(part)
    if "/" in parts[0]:
        raise ValueError(f"provider {show(parts[0])} must not contain '/'")
    return "/".join(parts)


def check_bool(value: object, base: Path) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{show(value)} is not true or false")
    return value


def check_strings(value: object, base: Path) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise ValueError(f"{show(value)} is not an array of non-empty strings")
    return tuple(value)


def check_path(value: object, base: Path, *, whole: bool = True) -> Path:
    """`value` as an absolute path from `base`: resolved `whole`, else up to its own
    name (`file_path`)."""
    if not isinstance(value, str) or not value or "\0" in value:
        raise ValueError(f"{show(value)} is not a path")
    try:
        path = base / Path(value).expanduser()
        return path.resolve() if whole else file_path(path)
    except (OSError, RuntimeError) as exc:  # no home directory; a symlink loop
        raise ValueError(f"{show(value)}: {exc}") from None


def file_path(path: Path) -> Path:
    """`path` made absolute with its directories resolved, but not its own name: a
    special file such as `/dev/stderr` stays itself. Resolved, it would name the link's
    target, `/proc/PID/fd/pipe:[N]` for a pipe, which no one can open."""
    return path.parent.resolve() / path.name


def check_paths(value: object, base: Path) -> tuple[Path, ...]:
    if not isinstance(value, list):
        raise ValueError(f"{show(value)} is not an array of paths")
    return tuple(check_path(item, base) for item in value)


def check_state_dir(value: object, base: Path) -> Path:
    path = check_path(value, base)
    try:
        if path.exists() and not path.is_dir():
            raise ValueError(f"{path} exists and is not a directory")
    except OSError as exc:  # a directory on the way we may not search
        raise ValueError(f"{path} cannot be examined: {exc.strerror or exc}") from None
    return path


def check_log_file(value: object, base: Path) -> Path:
    """Like `--log-file`: the directory resolved, the file's own name kept (a symlink
    there is judged when the file is opened)."""
    path = check_path(value, base, whole=False)
    if path.name in ("", ".", ".."):
        raise ValueError(f"{show(value)} is a directory")
    try:
        if path.is_dir():
            raise ValueError(f"{path} is a directory")
        if not path.parent.is_dir():
            raise ValueError(f"the directory of {path} does not exist")
    except OSError as exc:
        raise ValueError(f"{path} cannot be examined: {exc.strerror or exc}") from None
    return path


def check_session(value: object, _base: Path) -> str:
    if not isinstance(value, str) or SESSION_ID_PATTERN.fullmatch(value) is None:
        raise ValueError(f"must be a session id: {SESSION_ID_RULE}")
    return value


def check_executor(value: object, _base: Path) -> ExecutorChoice:
    """`{kind, address?, namespace?}`: where children run; a cluster's fields only for one."""
    if not isinstance(value, dict):
        raise ValueError(f"{show(value)} is not an object {{kind, address, namespace}}")
    unknown = sorted(set(value) - {"kind", "address", "namespace"})
    if unknown:
        raise ValueError(
            f"unknown member {unknown[0]!r} (an executor is {{kind, address, namespace}})"
        )
    kind = value.get("kind")
    if kind not in EXECUTORS:
        raise ValueError(f"kind {show(kind)} is not one of {', '.join(EXECUTORS)}")
    words = {}
    for key in ("address", "namespace"):
        word = value.get(key)
        if word is None:
            continue
        if not isinstance(word, str) or not word or any(char.isspace() for char in word):
            raise ValueError(f"{key} {show(word)} is not a non-empty word without spaces")
        if kind == LOCAL:
            raise ValueError(f"{key} is for a cluster executor, not {LOCAL!r}")
        words[key] = word
    return ExecutorChoice(kind=str(kind), **words)


def check_backends(value: object, _base: Path) -> dict[str, str | AcpBackendSetting]:
    """`{pi|claude|codex: {executable}}`, the program each agent CLI runs, and
    `{<name>: {protocol: "acp", executable, args?, env?}}`, an ACP agent as a backend of
    its own (protocol.md §24.1)."""
    known = ", ".join(AGENT_BACKENDS)
    if not isinstance(value, dict):
        raise ValueError(
            f"{show(value)} is not an object {{{known}: {{executable}}, "
            '<name>: {protocol: "acp", executable, args, env}}'
        )
    found: dict[str, str | AcpBackendSetting] = {}
    for name, entry in value.items():
        if name in AGENT_BACKENDS:
            if not isinstance(entry, dict) or set(entry) != {"executable"}:
                raise ValueError(f"{name} {show(entry)} is not an object {{executable}}")
            found[name] = _executable(name, entry["executable"])
        else:
            found[name] = _acp_backend(name, entry)
    return found


def _acp_backend(name: str, entry: object) -> AcpBackendSetting:
    if not is_backend_name(name) or name in BACKENDS:
        raise ValueError(
            f"{show(name)} cannot name an ACP agent: a name is 1..32 of a-z 0-9 -, starting "
            f"with a letter, other than {', '.join(BACKENDS)}"
        )
    shape = '{protocol: "acp", executable, args, env}'
    if not isinstance(entry, dict) or entry.get("protocol") != ACP:
        raise ValueError(f"{name} {show(entry)} is not an object {shape}")
    unknown = sorted(set(entry) - {"protocol", "executable", "args", "env"})
    if unknown:
        raise ValueError(f"{name} has unknown keys {', '.join(unknown)} (it takes {shape})")
    executable = _executable(name, entry.get("executable"))
    args = entry.get("args", [])
    if not isinstance(args, list) or not all(_is_argument(arg) for arg in args):
        raise ValueError(f"{name}.args {show(args)} is not an array of strings")
    env = entry.get("env", {})
    if not isinstance(env, dict) or not all(
        _is_argument(key) and key and "=" not in key and _is_argument(text)
        for key, text in env.items()
    ):
        raise ValueError(f"{name}.env {show(env)} is not an object of strings")
    return AcpBackendSetting(executable=executable, args=tuple(args), env=dict(env))


def _executable(name: str, executable: object) -> str:
    if not isinstance(executable, str) or not executable or "\0" in executable:
        raise ValueError(f"{name}.executable {show(executable)} is not a non-empty string")
    return executable


def _is_argument(value: object) -> bool:
    return isinstance(value, str) and "\0" not in value


def check_backend_name(value: object, _base: Path) -> str:
    """A backend's name: a built-in one, or one an ACP agent is configured under (which
    file configures it is not known here: an unknown name is refused at launch)."""
    if not isinstance(value, str) or not is_backend_name(value):
        raise ValueError(f"{show(value)} is not a backend name ({', '.join(BACKENDS)}, ...)")
    return value


def check_agents(value: object, _base: Path) -> AgentLists:
    """`{enabled?, disabled?}`: arrays of agent names or fnmatch globs."""
    if not isinstance(value, dict):
        raise ValueError(f"{show(value)} is not an object {{enabled, disabled}}")
    unknown = sorted(set(value) - {"enabled", "disabled"})
    if unknown:
        raise ValueError(f"unknown member {unknown[0]!r} (agents is {{enabled, disabled}})")
    lists: dict[str, tuple[str, ...]] = {}
    for key in ("enabled", "disabled"):
        patterns = value.get(key)
        if patterns is None:
            continue
        if not isinstance(patterns, list) or not all(
            isinstance(item, str) and item.strip() and "\0" not in item for item in patterns
        ):
            raise ValueError(
                f"{key} {show(patterns)} is not an array of agent names or globs "
                "(non-empty strings)"
            )
        lists[key] = tuple(patterns)
    return AgentLists(**lists)


def check_log_level(value: object, base: Path) -> str:
    checked = one_of(LOG_LEVELS, fold_case=True)(value, base)
    assert isinstance(checked, str)
    return checked.upper()


FIELDS: Final[Mapping[str, FieldRule]] = {
    # Agent and run defaults: any file.
    "default_model": FieldRule(check_model),
    "timeout_ms": FieldRule(int_in_range(1, MAX_DURATION_MS)),
    "stall_timeout_ms": FieldRule(int_in_range(1, MAX_DURATION_MS)),
    "max_tokens": FieldRule(int_in_range(1, MAX_SAFE_INTEGER)),
    "max_cost_usd": FieldRule(check_dollars),
    "max_concurrency": FieldRule(int_in_range(1, MAX_CONCURRENCY)),
    # Server-wide, like max_concurrency, but a project must not raise the bound its user set.
    "max_queue": FieldRule(int_in_range(0, MAX_QUEUE), in_project=False),
    "default_tools": FieldRule(check_strings),
    "default_mode": FieldRule(one_of(MODES)),
    # The history of the whole state directory: a project's limit would prune other
    # projects' runs, and their worktrees.
    "history_limit": FieldRule(int_in_range(1, MAX_HISTORY_LIMIT), in_project=False),
    # Safety settings (safety=True): one that cannot be read stops the server, where its
    # default would weaken what the user asked for (protocol.md §19 says why for each).
    "enable_continue": FieldRule(check_bool, safety=True),
    # Narrowing only, in a project's file (settings/agent_filter.py).
    "agents": FieldRule(check_agents, safety=True),
    "default_backend": FieldRule(check_backend_name),
    "session_resources": FieldRule(one_of(SESSION_RESOURCES)),
    "approvals": FieldRule(one_of(tuple(Approvals))),
    # Server options: the global and --config files only.
    "state_dir": FieldRule(check_state_dir, in_project=False, safety=True),
    "framing": FieldRule(one_of(FRAMINGS), in_project=False),
    "process_tracking": FieldRule(one_of(PROCESS_TRACKING), in_project=False, safety=True),
    # A project must not send its user's children to another machine.
    "executor": FieldRule(check_executor, in_project=False, safety=True),
    "max_message_bytes": FieldRule(
        int_in_range(MIN_MESSAGE_BYTES, MAX_MESSAGE_BYTES), in_project=False
    ),
    "grace_ms": FieldRule(int_in_range(0, MAX_DURATION_MS), in_project=False),
    "resume_token_ttl_ms": FieldRule(
        int_in_range(MIN_RESUME_TOKEN_TTL_MS, MAX_DURATION_MS), in_project=False
    ),
    "log_level": FieldRule(check_log_level, in_project=False),
    "log_file": FieldRule(check_log_file, in_project=False),
    "log_format": FieldRule(one_of(LOG_FORMATS), in_project=False),
    "session": FieldRule(check_session, in_project=False),
    # A project must not relax the admission policy its user chose.
    "require_preflight": FieldRule(check_bool, in_project=False, safety=True),
    # Likewise the consent its user asks before prompts and files go to a model provider.
    "require_egress_consent": FieldRule(check_bool, in_project=False, safety=True),
    # Limits that have no option of their own (protocol.md §5).
    "max_parallel": FieldRule(int_in_range(1, MAX_PARALLEL), in_project=False),
    "workflow_parallelism": FieldRule(int_in_range(1, MAX_PARALLEL), in_project=False),
    "output_cap_bytes": FieldRule(int_in_range(MIN_CAP_BYTES, MAX_CAP_BYTES), in_project=False),
    "output_cap_lines": FieldRule(int_in_range(1, MAX_CAP_LINES), in_project=False),
    "previous_cap_bytes": FieldRule(int_in_range(MIN_CAP_BYTES, MAX_CAP_BYTES), in_project=False),
    # Which projects' definitions and settings are read, and which programs run.
    "trusted_projects": FieldRule(check_paths, in_project=False, safety=True),
    "backends": FieldRule(check_backends, in_project=False, safety=True),
}
# Fields read by their own code rather than by a FieldRule (any file; never a safety one).
SPECIAL_FIELDS: Final = ("model_profiles",)
KNOWN: Final = (*FIELDS, *SPECIAL_FIELDS, *EFFORT_KEYS)
