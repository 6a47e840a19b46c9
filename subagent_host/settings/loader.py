"""Loading: find the global, project and explicit files, read each, and merge them
field by field into one `Settings`."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TypeVar

from subagent_host.settings.agent_filter import AgentLists, merge_agent_lists
from subagent_host.settings.layers import Layer, Scope, read_layer
from subagent_host.settings.model import (
    FILE_NAME,
    PROJECT_FILE,
    AcpBackendSetting,
    ExecutorChoice,
    ModelProfile,
    Settings,
    SettingsDiagnostic,
)

T = TypeVar("T")


def load_settings(
    *, config_dir: Path, project_dir: Path, explicit: Path | None, trusted: Sequence[Path]
) -> tuple[Settings, bool]:
    """Read the global, project and explicit files; return the merged settings and
    whether the project is trusted.

    Called once by `command_line.parse_config`, before the server starts. The project is
    trusted when its real path is that of a `trusted` directory (`--trust-project`)
    or of a `trusted_projects` entry of the global or explicit file; only then is
    its `.pi/subagents.json` read. Never raises for a file's content: a problem the
    server must not start with is an `error` diagnostic (`Settings.refusal`).
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


# --- merging --------------------------------------------------------------------


def merge_layers(layers: Sequence[Layer], notes: Iterable[SettingsDiagnostic]) -> Settings:
    """One Settings from the files, lowest precedence first (later wins per field)."""
    values: dict[str, object] = {}
    executables: dict[str, str] = {}
    acp_backends: dict[str, AcpBackendSetting] = {}
    trusted: list[Path] = []
    user_agents: list[tuple[AgentLists, str]] = []
    project_agents: list[tuple[AgentLists, str]] = []
    for layer in layers:
        own = dict(layer.values)
        if layer.scope is Scope.PROJECT and own.get("enable_continue") is True:
            # A project may turn resume off for itself, never back on against its user.
            del own["enable_continue"]
        values.update(own)
        # Per backend, per path, per list: these fields merge below the field's level.
        for name, backend in (pick(layer.values, "backends", dict) or {}).items():
            if isinstance(backend, AcpBackendSetting):
                acp_backends[name] = backend
            else:
                executables[name] = backend
        trusted.extend(path for path in layer.trusted if path not in trusted)
        if (lists := pick(layer.values, "agents", AgentLists)) is not None:
            is_project = layer.scope is Scope.PROJECT
            (project_agents if is_project else user_agents).append((lists, str(layer.path)))
    user = [layer.profiles for layer in layers if layer.scope is not Scope.PROJECT]
    project = [layer.profiles for layer in layers if layer.scope is Scope.PROJECT]
    return Settings(
        default_model=pick(values, "default_model", str),
        default_effort=pick(values, "default_effort", str),
        timeout_ms=pick(values, "timeout_ms", int),
        stall_timeout_ms=pick(values, "stall_timeout_ms", int),
        max_tokens=pick(values, "max_tokens", int),
        max_cost_usd=pick(values, "max_cost_usd", float),
        max_concurrency=pick(values, "max_concurrency", int),
        max_queue=pick(values, "max_queue", int),
        default_tools=pick(values, "default_tools", tuple),
        default_mode=pick(values, "default_mode", str),
        history_limit=pick(values, "history_limit", int),
        enable_continue=pick(values, "enable_continue", bool),
        default_backend=pick(values, "default_backend", str),
        session_resources=pick(values, "session_resources", str),
        approvals=pick(values, "approvals", str),
        user_profiles=MappingProxyType(merge_profiles(user)),
        project_profiles=MappingProxyType(merge_profiles(project)),
        backend_executables=MappingProxyType(executables),
        acp_backends=MappingProxyType(acp_backends),
        state_dir=pick(values, "state_dir", Path),
        framing=pick(values, "framing", str),
        process_tracking=pick(values, "process_tracking", str),
        executor=pick(values, "executor", ExecutorChoice),
        max_message_bytes=pick(values, "max_message_bytes", int),
        grace_ms=pick(values, "grace_ms", int),
        resume_token_ttl_ms=pick(values, "resume_token_ttl_ms", int),
        log_level=pick(values, "log_level", str),
        log_file=pick(values, "log_file", Path),
        log_format=pick(values, "log_format", str),
        session=pick(values, "session", str),
        max_parallel=pick(values, "max_parallel", int),
        workflow_parallelism=pick(values, "workflow_parallelism", int),
        output_cap_bytes=pick(values, "output_cap_bytes", int),
        output_cap_lines=pick(values, "output_cap_lines", int),
        previous_cap_bytes=pick(values, "previous_cap_bytes", int),
        require_preflight=pick(values, "require_preflight", bool),
        require_egress_consent=pick(values, "require_egress_consent", bool),
        trusted_projects=tuple(trusted),
        agents=merge_agent_lists(user_agents, project_agents),
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
