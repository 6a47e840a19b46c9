"""Reading one file: its text, its JSON and each field checked, into a `Layer` that
is not yet merged with the others; every problem becomes a diagnostic."""

from __future__ import annotations

import difflib
import enum
import json
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

import attrs

from subagent_host.settings.fields import (
    EFFORT_KEYS,
    FIELDS,
    KNOWN,
    PROFILE_EFFORT_KEYS,
    SPECIAL_FIELDS,
    FieldRule,
    check_effort,
    check_model,
    show,
)
from subagent_host.settings.model import ERROR, ModelProfile, SettingsDiagnostic
from subagent_host.values.facts import Severity

# A settings file is a few hundred bytes; a bigger one is a mistake, not settings.
MAX_FILE_BYTES: Final = 1024 * 1024
# The end of a refusal's line: what the server does about it.
REFUSED: Final = "the server does not start while a safety setting cannot be read"


class Scope(enum.Enum):
    """Where a file sits in the precedence order, and so what it may set."""

    GLOBAL = "global"
    PROJECT = "project"
    EXPLICIT = "explicit"


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
    diagnostics: list[SettingsDiagnostic] = attrs.Factory(list)

    @property
    def trusted(self) -> tuple[Path, ...]:
        """Its `trusted_projects`."""
        paths = self.values.get("trusted_projects", ())
        assert isinstance(paths, tuple)  # check_paths returned it
        return paths

    def warn(self, code: str, field: str | None, message: str) -> None:
        self._note("warning", code, field, message)

    def refuse(self, code: str, field: str | None, message: str) -> None:
        """A problem the server must not start with (a safety setting it cannot read)."""
        self._note(ERROR, code, field, f"{message}; {REFUSED}")

    def _note(self, severity: Severity, code: str, field: str | None, message: str) -> None:
        where = f"{self.path}: {field}" if field is not None else str(self.path)
        self.diagnostics.append(
            SettingsDiagnostic(severity, code, f"{where}: {message}", str(self.path), field)
        )


def read_layer(path: Path, scope: Scope, *, required: bool) -> Layer | None:
    """Read and check one file; None when an optional file does not exist.

    A file that exists (or is required) but cannot be read as a JSON object is a
    refusal: any safety setting it holds cannot be read.
    """
    layer = Layer(path=path, scope=scope)
    try:
        text = read_text(path)
    except (FileNotFoundError, NotADirectoryError) as exc:
        if not required:
            return None
        layer.refuse("unreadable", None, f"cannot read it ({exc})")
        return layer
    except (OSError, UnicodeDecodeError) as exc:
        layer.refuse("unreadable", None, f"cannot read it ({exc})")
        return layer
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        layer.refuse("invalid-json", None, f"not valid JSON ({exc})")
        return layer
    if not isinstance(data, dict):
        layer.refuse("not-an-object", None, "not a JSON object")
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
            read_unknown(layer, key)
            continue
        if value is None or key in EFFORT_KEYS:  # null leaves the field unset
            continue
        if rule is None:
            layer.profiles = read_profiles(layer, value)
            continue
        # A server option in a project's file is ignored, never read: the user's value
        # (or the default) stands, which a project could only have loosened.
        if not rule.in_project and not is_allowed(layer, key):
            continue
        checked = check_field(layer, key, value, rule, base)
        if checked is not None:
            layer.values[key] = checked
    read_effort(layer, data)


def read_unknown(layer: Layer, key: str) -> None:
    """An unknown field is ignored, unless it looks like a misspelled safety setting.

    `require_prefligt: true` ignored would leave admission open while the user believes
    it closed: that is a safety setting that cannot be read, and stops the server.
    """
    close = difflib.get_close_matches(key, KNOWN, n=2)
    if any(FIELDS[name].safety for name in close if name in FIELDS):
        layer.refuse("unknown-field", key, f"unknown field{did_you_mean(close)}")
    else:
        layer.warn("unknown-field", key, f"unknown field{did_you_mean(close)}; ignored")


def did_you_mean(close: Sequence[str]) -> str:
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


def check_field(layer: Layer, field: str, value: object, rule: FieldRule, base: Path) -> object:
    """The checked value, or None after a diagnostic (a refusal for a safety setting)."""
    try:
        return rule.check(value, base)
    except ValueError as exc:
        if rule.safety:
            layer.refuse("invalid-field", field, str(exc))
        else:
            layer.warn("invalid-field", field, f"{exc}; ignored")
        return None


def read_effort(layer: Layer, data: Mapping[str, object]) -> None:
    given = {key: data[key] for key in EFFORT_KEYS if data.get(key) is not None}
    effort = one_alias(layer, given, "default_effort")
    if effort is not None:
        key, value = effort
        checked = check_field(layer, key, value, FieldRule(check_effort), layer.path.parent)
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
        model = check_field(layer, f"{field}.model", entry["model"], FieldRule(check_model), base)
    effort = None
    given = {key: entry[key] for key in PROFILE_EFFORT_KEYS if entry.get(key) is not None}
    agreed = one_alias(layer, given, f"{field}.effort")
    if agreed is not None:
        key, value = agreed
        effort = check_field(layer, f"{field}.{key}", value, FieldRule(check_effort), base)
    return ModelProfile(
        model=model if isinstance(model, str) else None,
        effort=effort if isinstance(effort, str) else None,
    )
