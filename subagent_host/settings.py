"""Configuration files: what `subagents.json` says, merged into one `Settings`.

Three files, each a JSON object with snake_case keys, merged field by field
(a later file wins per field, and command-line options beat every file):

1. the global file, `<user config dir>/subagents.json`;
2. the project's `.pi/subagents.json`, read only when the project is trusted;
3. the `--config FILE`.

    {"default_model": "sonnet", "default_effort": "high", "timeout_ms": 600000,
     "model_profiles": {"scout": {"model": "haiku", "thinking": "low"}},
     "backends": {"pi": {"executable": "/opt/pi/bin/pi"}}}

Agent and run defaults are allowed in every file. Server options (CONTRACT §7:
state directory, framing, limits, logs, trusted projects, backend programs) are
allowed only in the global and `--config` files: a project must not redirect the
state directory or the logs, trust other projects, or choose which programs run.
Paths in a file are `~`-expanded, and a relative one is taken from the file's
own directory.

The server reads the files once at start and never writes them. A missing global
or project file is simply absent. Any problem (an unreadable file, bad JSON, an
unknown or invalid field) is a diagnostic naming the file and the field, and that
field keeps the default or the lower-precedence file's value: a bad line in a
configuration file never stops the server. This module reads files and nothing
else of ours: `cli.py` applies the command line on top, `app.py` logs the
diagnostics.
"""

from __future__ import annotations

import difflib
import enum
import json
import os
import stat
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Final, TypeVar

import attrs

from subagent_host.rpc.wire import SESSION_ID_PATTERN, SESSION_ID_RULE

FILE_NAME: Final = "subagents.json"
PROJECT_FILE: Final = Path(".pi") / FILE_NAME

# The ranges the command line accepts; a file is held to the same ones.
# Below MIN_MESSAGE_BYTES a single ping could not fit; above MAX_MESSAGE_BYTES one
# message could exhaust memory.
MIN_MESSAGE_BYTES: Final = 1024
MAX_MESSAGE_BYTES: Final = 1024 * 1024 * 1024
MAX_CONCURRENCY: Final = 256
MAX_DURATION_MS: Final = 24 * 60 * 60 * 1000
MAX_HISTORY_LIMIT: Final = 1_000_000
# A token that expires within a second could never be used.
MIN_RESUME_TOKEN_TTL_MS: Final = 1000
MAX_PARALLEL: Final = 64
MIN_CAP_BYTES: Final = 1024
MAX_CAP_BYTES: Final = 16 * 1024 * 1024
MAX_CAP_LINES: Final = 1_000_000

EFFORTS: Final = ("off", "minimal", "low", "medium", "high", "xhigh", "max")
MODES: Final = ("task", "background")
BACKENDS: Final = ("command", "pi", "claude", "codex")
AGENT_BACKENDS: Final = ("pi", "claude", "codex")
FRAMINGS: Final = ("auto", "lsp", "ndjson")
LOG_LEVELS: Final = ("debug", "info", "warning", "error", "critical")

# One setting, three spellings (pi's settings say `thinkingLevel`).
EFFORT_KEYS: Final = ("default_effort", "default_thinking_level", "thinkingLevel")
PROFILE_EFFORT_KEYS: Final = ("effort", "thinking")
# A settings file is a few hundred bytes; a bigger one is a mistake, not settings.
MAX_FILE_BYTES: Final = 1024 * 1024
# Longest slice of a bad value quoted in a diagnostic.
SHOWN_VALUE_CHARS: Final = 60

T = TypeVar("T")


@attrs.frozen
class SettingsDiagnostic:
    """One problem found in a configuration file; the server logs it and goes on."""

    severity: str
    """`warning` (a field or file was ignored) or `info` (worth knowing, nothing ignored
    that was meant to be read)."""
    code: str
    """unreadable, invalid-json, not-an-object, invalid-field, unknown-field,
    not-allowed-in-project, conflicting-aliases, untrusted-project."""
    message: str
    """One line naming the file and the field."""
    file: str
    field: str | None = None
    """A dotted path (`model_profiles.scout.model`); None for the whole file."""


@attrs.frozen
class ModelProfile:
    """The model and effort one agent runs with unless the spawn names its own."""

    model: str | None = None
    effort: str | None = None


NO_PROFILES: Final[Mapping[str, ModelProfile]] = MappingProxyType({})
NO_EXECUTABLES: Final[Mapping[str, str]] = MappingProxyType({})


@attrs.frozen
class Settings:
    """What the files said, merged; None (or empty) means no file set it."""

    default_model: str | None = None
    default_effort: str | None = None
    timeout_ms: int | None = None
    stall_timeout_ms: int | None = None
    max_concurrency: int | None = None
    default_tools: tuple[str, ...] | None = None
    default_mode: str | None = None
    history_limit: int | None = None
    enable_continue: bool | None = None
    """False disables resume."""
    default_backend: str | None = None
    user_profiles: Mapping[str, ModelProfile] = attrs.field(default=NO_PROFILES, hash=False)
    """By lowercase agent name, from the global and `--config` files: for the user's agents."""
    project_profiles: Mapping[str, ModelProfile] = attrs.field(default=NO_PROFILES, hash=False)
    """By lowercase agent name, from the project's file: for the project's agents."""
    backend_executables: Mapping[str, str] = attrs.field(default=NO_EXECUTABLES, hash=False)
    """The program each agent backend runs, by backend id, where a file set one."""
    state_dir: Path | None = None
    framing: str | None = None
    """auto, lsp or ndjson."""
    max_message_bytes: int | None = None
    grace_ms: int | None = None
    resume_token_ttl_ms: int | None = None
    log_level: str | None = None
    """Upper case, as `logging` spells it."""
    log_file: Path | None = None
    session: str | None = None
    """The session the connection is bound to from the start (as `--session`)."""
    max_parallel: int | None = None
    workflow_parallelism: int | None = None
    output_cap_bytes: int | None = None
    output_cap_lines: int | None = None
    previous_cap_bytes: int | None = None
    trusted_projects: tuple[Path, ...] = ()
    """Resolved, from the global and `--config` files together."""
    files: tuple[str, ...] = ()
    """The files whose settings were used, lowest precedence first."""
    diagnostics: tuple[SettingsDiagnostic, ...] = ()


class Scope(enum.Enum):
    """Where a file sits in the precedence order, and so what it may set."""

    GLOBAL = "global"
    PROJECT = "project"
    EXPLICIT = "explicit"


Check = Callable[[object, Path], object]
"""Parse a field's JSON value (paths relative to the given directory); raise
ValueError with the reason when it is invalid."""


@attrs.frozen
class FieldRule:
    check: Check
    in_project: bool = True


def load_settings(
    *, config_dir: Path, project_dir: Path, explicit: Path | None, trusted: Sequence[Path]
) -> tuple[Settings, bool]:
    """Read the global, project and explicit files; return the merged settings and
    whether the project is trusted.

    Called once by `cli.parse_config`, before the server starts. The project is
    trusted when its real path is that of a `trusted` directory (`--trust-project`)
    or of a `trusted_projects` entry of the global or explicit file; only then is
    its `.pi/subagents.json` read. Never raises for a file's content.
    """
    explicit_real = _realpath(explicit) if explicit is not None else None
    global_path = config_dir / FILE_NAME
    global_layer = None
    # A file named twice (`--config` naming the global file) is read once: as the
    # explicit file, else as the global one.
    if _realpath(global_path) != explicit_real:
        global_layer = read_layer(global_path, Scope.GLOBAL, required=False)
    explicit_layer = None
    if explicit is not None:
        explicit_layer = read_layer(explicit, Scope.EXPLICIT, required=True)

    trusted_by_files = [
        path for layer in (global_layer, explicit_layer) if layer for path in layer.trusted
    ]
    project_real = _realpath(project_dir)
    is_trusted = project_real in {_realpath(path) for path in (*trusted, *trusted_by_files)}
    project_path = project_dir / PROJECT_FILE
    project_layer = None
    notes: list[SettingsDiagnostic] = []
    if not is_trusted:
        if project_path.is_file():
            notes.append(
                SettingsDiagnostic(
                    "info",
                    "untrusted-project",
                    f"{project_path}: not read: the project {project_dir} is not trusted "
                    "(trust it with --trust-project or trusted_projects)",
                    str(project_path),
                )
            )
    elif _realpath(project_path) not in (explicit_real, _realpath(global_path)):
        project_layer = read_layer(project_path, Scope.PROJECT, required=False)

    layers = [layer for layer in (global_layer, project_layer, explicit_layer) if layer]
    return merge_layers(layers, notes), is_trusted


# --- one file -------------------------------------------------------------------


@attrs.define
class Layer:
    """What one file says, checked but not yet merged."""

    path: Path
    scope: Scope
    is_used: bool = False
    """The file was read and is a JSON object, so its fields count."""
    values: dict[str, object] = attrs.Factory(dict)
    profiles: dict[str, ModelProfile] = attrs.Factory(dict)
    backends: dict[str, str] = attrs.Factory(dict)
    trusted: tuple[Path, ...] = ()
    diagnostics: list[SettingsDiagnostic] = attrs.Factory(list)

    def warn(self, code: str, field: str | None, message: str) -> None:
        where = f"{self.path}: {field}" if field is not None else str(self.path)
        self.diagnostics.append(
            SettingsDiagnostic("warning", code, f"{where}: {message}", str(self.path), field)
        )


def read_layer(path: Path, scope: Scope, *, required: bool) -> Layer | None:
    """Read and check one file; None when an optional file does not exist."""
    layer = Layer(path=path, scope=scope)
    try:
        text = read_text(path)
    except (FileNotFoundError, NotADirectoryError) as exc:
        if not required:
            return None
        layer.warn("unreadable", None, f"cannot read it ({exc}); its settings are ignored")
        return layer
    except (OSError, UnicodeDecodeError) as exc:
        layer.warn("unreadable", None, f"cannot read it ({exc}); its settings are ignored")
        return layer
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        layer.warn("invalid-json", None, f"not valid JSON ({exc}); its settings are ignored")
        return layer
    if not isinstance(data, dict):
        layer.warn("not-an-object", None, "not a JSON object; its settings are ignored")
        return layer
    layer.is_used = True
    read_fields(layer, data)
    return layer


def read_text(path: Path) -> str:
    """The file's text. Raises OSError for anything but a regular file of sane size:
    reading a FIFO or a device would block the start, or never end."""
    info = path.stat()
    if not stat.S_ISREG(info.st_mode):
        raise OSError(f"not a regular file: {path}")
    if info.st_size > MAX_FILE_BYTES:
        raise OSError(f"larger than {MAX_FILE_BYTES} bytes")
    return path.read_text(encoding="utf-8")


def read_fields(layer: Layer, data: Mapping[str, object]) -> None:
    base = layer.path.parent
    for key, value in data.items():
        rule = FIELDS.get(key)
        if rule is None and key not in SPECIAL_FIELDS and key not in EFFORT_KEYS:
            layer.warn("unknown-field", key, f"unknown field{did_you_mean(key)}; ignored")
            continue
        if value is None or key in EFFORT_KEYS:  # null leaves the field unset
            continue
        in_project = rule.in_project if rule is not None else key not in SERVER_ONLY_SPECIAL
        if not in_project and not is_allowed(layer, key):
            continue
        if rule is not None:
            checked = check_field(layer, key, value, rule.check, base)
            if checked is not None:
                layer.values[key] = checked
        elif key == "model_profiles":
            layer.profiles = read_profiles(layer, value)
        elif key == "backends":
            layer.backends = read_backends(layer, value)
        else:
            trusted = check_field(layer, key, value, check_paths, base)
            if isinstance(trusted, tuple):
                layer.trusted = trusted
    read_effort(layer, data)


def did_you_mean(key: str) -> str:
    close = difflib.get_close_matches(key, KNOWN, n=2)
    return f" (did you mean {' or '.join(close)}?)" if close else ""


def is_allowed(layer: Layer, key: str) -> bool:
    if layer.scope is not Scope.PROJECT:
        return True
    layer.warn(
        "not-allowed-in-project",
        key,
        "not allowed in a project's file (only the global and --config files may set "
        "server options); ignored",
    )
    return False


def check_field(layer: Layer, field: str, value: object, check: Check, base: Path) -> object:
    """The checked value, or None after a diagnostic."""
    try:
        return check(value, base)
    except ValueError as exc:
        layer.warn("invalid-field", field, f"{exc}; ignored")
        return None


def read_effort(layer: Layer, data: Mapping[str, object]) -> None:
    given = {key: data[key] for key in EFFORT_KEYS if data.get(key) is not None}
    effort = one_alias(layer, given, "default_effort")
    if effort is not None:
        key, value = effort
        checked = check_field(layer, key, value, check_effort, layer.path.parent)
        if checked is not None:
            layer.values["default_effort"] = checked


def one_alias(layer: Layer, given: Mapping[str, object], field: str) -> tuple[str, object] | None:
    """The one value several spellings agree on; None (after a diagnostic) if they differ."""
    if not given:
        return None
    key, value = next(iter(given.items()))
    if any(other != value or type(other) is not type(value) for other in given.values()):
        shown = ", ".join(f"{name}={show(other)}" for name, other in given.items())
        layer.warn(
            "conflicting-aliases",
            field,
            f"spellings of one setting disagree ({shown}); none of them is used",
        )
        return None
    return key, value


def read_profiles(layer: Layer, value: object) -> dict[str, ModelProfile]:
    """`model_profiles`: each bad entry or field is a diagnostic and is skipped."""
    if not isinstance(value, dict):
        layer.warn("invalid-field", "model_profiles", "must be an object; ignored")
        return {}
    profiles: dict[str, ModelProfile] = {}
    spelled: dict[str, str] = {}
    for name, entry in value.items():
        field = f"model_profiles.{name}"
        key = name.lower()
        if not name.strip():
            layer.warn("invalid-field", field, "an agent name must not be blank; skipped")
            continue
        if key in spelled:
            layer.warn("invalid-field", field, f"names the same agent as {spelled[key]!r}; skipped")
            continue
        spelled[key] = name
        if entry is None:
            continue
        if not isinstance(entry, dict):
            layer.warn("invalid-field", field, "must be an object {model?, effort?}; skipped")
            continue
        profile = read_profile(layer, field, entry)
        if profile != ModelProfile():
            profiles[key] = profile
    return profiles


def read_profile(layer: Layer, field: str, entry: Mapping[str, object]) -> ModelProfile:
    base = layer.path.parent
    for key in entry:
        if key not in ("model", *PROFILE_EFFORT_KEYS):
            layer.warn(
                "unknown-field", f"{field}.{key}", "unknown field (known: model, effort); ignored"
            )
    model = None
    if entry.get("model") is not None:
        model = check_field(layer, f"{field}.model", entry["model"], check_model, base)
    effort = None
    given = {key: entry[key] for key in PROFILE_EFFORT_KEYS if entry.get(key) is not None}
    agreed = one_alias(layer, given, f"{field}.effort")
    if agreed is not None:
        key, value = agreed
        effort = check_field(layer, f"{field}.{key}", value, check_effort, base)
    return ModelProfile(
        model=model if isinstance(model, str) else None,
        effort=effort if isinstance(effort, str) else None,
    )


def read_backends(layer: Layer, value: object) -> dict[str, str]:
    """`backends`: `{pi|claude|codex: {executable}}`; a bad entry keeps its default."""
    if not isinstance(value, dict):
        layer.warn("invalid-field", "backends", "backends must be an object; ignored")
        return {}
    found: dict[str, str] = {}
    for name, entry in value.items():
        field = f"backends.{name}"
        if name not in AGENT_BACKENDS:
            layer.warn(
                "invalid-field", field, f"unknown backend (known: {', '.join(AGENT_BACKENDS)})"
            )
            continue
        if isinstance(entry, dict):
            for key in entry:
                if key != "executable":
                    layer.warn(
                        "unknown-field", f"{field}.{key}", "unknown field (known: executable)"
                    )
        executable = entry.get("executable") if isinstance(entry, dict) else None
        if not isinstance(executable, str) or not executable or "\0" in executable:
            layer.warn(
                "invalid-field", f"{field}.executable", "must be a non-empty string; default kept"
            )
            continue
        found[name] = executable
    return found


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
    if not isinstance(value, str) or not value or any(char.isspace() for char in value):
        raise ValueError(f"{show(value)} is not a model name (a non-empty word, no spaces)")
    return value


def check_bool(value: object, base: Path) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{show(value)} is not true or false")
    return value


def check_strings(value: object, base: Path) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise ValueError(f"{show(value)} is not an array of non-empty strings")
    return tuple(value)


def check_path(value: object, base: Path) -> Path:
    if not isinstance(value, str) or not value or "\0" in value:
        raise ValueError(f"{show(value)} is not a path")
    try:
        return (base / Path(value).expanduser()).resolve()
    except (OSError, RuntimeError) as exc:  # no home directory; a symlink loop
        raise ValueError(f"{show(value)}: {exc}") from None


def check_paths(value: object, base: Path) -> tuple[Path, ...]:
    if not isinstance(value, list):
        raise ValueError(f"{show(value)} is not an array of paths")
    return tuple(check_path(item, base) for item in value)


def check_state_dir(value: object, base: Path) -> Path:
    path = check_path(value, base)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{path} exists and is not a directory")
    return path


def check_log_file(value: object, base: Path) -> Path:
    path = check_path(value, base)
    if path.is_dir():
        raise ValueError(f"{path} is a directory")
    if not path.parent.is_dir():
        raise ValueError(f"the directory of {path} does not exist")
    return path


def check_session(value: object, _base: Path) -> str:
    if not isinstance(value, str) or SESSION_ID_PATTERN.fullmatch(value) is None:
        raise ValueError(f"must be a session id: {SESSION_ID_RULE}")
    return value


def check_log_level(value: object, base: Path) -> str:
    checked = one_of(LOG_LEVELS, fold_case=True)(value, base)
    assert isinstance(checked, str)
    return checked.upper()


FIELDS: Final[Mapping[str, FieldRule]] = {
    # Agent and run defaults: any file.
    "default_model": FieldRule(check_model),
    "timeout_ms": FieldRule(int_in_range(1, MAX_DURATION_MS)),
    "stall_timeout_ms": FieldRule(int_in_range(1, MAX_DURATION_MS)),
    "max_concurrency": FieldRule(int_in_range(1, MAX_CONCURRENCY)),
    "default_tools": FieldRule(check_strings),
    "default_mode": FieldRule(one_of(MODES)),
    "history_limit": FieldRule(int_in_range(1, MAX_HISTORY_LIMIT)),
    "enable_continue": FieldRule(check_bool),
    "default_backend": FieldRule(one_of(BACKENDS)),
    # Server options: the global and --config files only.
    "state_dir": FieldRule(check_state_dir, in_project=False),
    "framing": FieldRule(one_of(FRAMINGS), in_project=False),
    "max_message_bytes": FieldRule(
        int_in_range(MIN_MESSAGE_BYTES, MAX_MESSAGE_BYTES), in_project=False
    ),
    "grace_ms": FieldRule(int_in_range(0, MAX_DURATION_MS), in_project=False),
    "resume_token_ttl_ms": FieldRule(
        int_in_range(MIN_RESUME_TOKEN_TTL_MS, MAX_DURATION_MS), in_project=False
    ),
    "log_level": FieldRule(check_log_level, in_project=False),
    "log_file": FieldRule(check_log_file, in_project=False),
    "session": FieldRule(check_session, in_project=False),
    # CONTRACT §6 limits that have no option of their own.
    "max_parallel": FieldRule(int_in_range(1, MAX_PARALLEL), in_project=False),
    "workflow_parallelism": FieldRule(int_in_range(1, MAX_PARALLEL), in_project=False),
    "output_cap_bytes": FieldRule(int_in_range(MIN_CAP_BYTES, MAX_CAP_BYTES), in_project=False),
    "output_cap_lines": FieldRule(int_in_range(1, MAX_CAP_LINES), in_project=False),
    "previous_cap_bytes": FieldRule(int_in_range(MIN_CAP_BYTES, MAX_CAP_BYTES), in_project=False),
}
# Fields read by their own code rather than by a FieldRule.
SPECIAL_FIELDS: Final = ("model_profiles", "backends", "trusted_projects")
SERVER_ONLY_SPECIAL: Final = ("backends", "trusted_projects")
KNOWN: Final = (*FIELDS, *SPECIAL_FIELDS, *EFFORT_KEYS)


# --- merging --------------------------------------------------------------------


def merge_layers(layers: Sequence[Layer], notes: Iterable[SettingsDiagnostic]) -> Settings:
    """One Settings from the files, lowest precedence first (later wins per field)."""
    values: dict[str, object] = {}
    executables: dict[str, str] = {}
    trusted: list[Path] = []
    for layer in layers:
        values.update(layer.values)
        executables.update(layer.backends)
        trusted.extend(path for path in layer.trusted if path not in trusted)
    user = [layer.profiles for layer in layers if layer.scope is not Scope.PROJECT]
    project = [layer.profiles for layer in layers if layer.scope is Scope.PROJECT]
    return Settings(
        default_model=pick(values, "default_model", str),
        default_effort=pick(values, "default_effort", str),
        timeout_ms=pick(values, "timeout_ms", int),
        stall_timeout_ms=pick(values, "stall_timeout_ms", int),
        max_concurrency=pick(values, "max_concurrency", int),
        default_tools=pick(values, "default_tools", tuple),
        default_mode=pick(values, "default_mode", str),
        history_limit=pick(values, "history_limit", int),
        enable_continue=pick(values, "enable_continue", bool),
        default_backend=pick(values, "default_backend", str),
        user_profiles=MappingProxyType(merge_profiles(user)),
        project_profiles=MappingProxyType(merge_profiles(project)),
        backend_executables=MappingProxyType(executables),
        state_dir=pick(values, "state_dir", Path),
        framing=pick(values, "framing", str),
        max_message_bytes=pick(values, "max_message_bytes", int),
        grace_ms=pick(values, "grace_ms", int),
        resume_token_ttl_ms=pick(values, "resume_token_ttl_ms", int),
        log_level=pick(values, "log_level", str),
        log_file=pick(values, "log_file", Path),
        session=pick(values, "session", str),
        max_parallel=pick(values, "max_parallel", int),
        workflow_parallelism=pick(values, "workflow_parallelism", int),
        output_cap_bytes=pick(values, "output_cap_bytes", int),
        output_cap_lines=pick(values, "output_cap_lines", int),
        previous_cap_bytes=pick(values, "previous_cap_bytes", int),
        trusted_projects=tuple(trusted),
        files=tuple(str(layer.path) for layer in layers if layer.is_used),
        diagnostics=(*(note for layer in layers for note in layer.diagnostics), *notes),
    )


def merge_profiles(layers: Iterable[Mapping[str, ModelProfile]]) -> dict[str, ModelProfile]:
    """Per agent name, per field: a later file's model or effort wins."""
    merged: dict[str, ModelProfile] = {}
    for profiles in layers:
        for name, profile in profiles.items():
            before = merged.get(name, ModelProfile())
            merged[name] = ModelProfile(
                model=profile.model if profile.model is not None else before.model,
                effort=profile.effort if profile.effort is not None else before.effort,
            )
    return merged


def pick(values: Mapping[str, object], key: str, kind: type[T]) -> T | None:
    value = values.get(key)
    if value is None:
        return None
    assert isinstance(value, kind), (key, value)  # the field's check returned this type
    return value


def _realpath(path: Path) -> Path:
    return Path(os.path.realpath(path))
