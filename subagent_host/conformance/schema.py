"""Shapes: every answer and notification a case sees is checked here.

When `jsonschema` is installed (the optional extra `conformance`), results and
notifications are validated against this installation's OpenRPC document (what
`subagent-host schema` prints; `--schema FILE` names another). Until then, and without the library,
the keys protocol.md §12 and the method sections require are checked instead,
so a case never passes on a reply of the wrong shape either way.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Final, Protocol

# How long `subagent-host schema` may take to print the document (it imports the
# wire types; seconds on a loaded machine).
SCHEMA_TIMEOUT_S: Final = 60

SNAPSHOT_KEYS: Final = frozenset(
    {"runId", "sessionId", "kind", "status", "createdAt", "fingerprint", "lastSeq", "children"}
)
CHILD_KEYS: Final = frozenset({"index", "backend", "status", "attempt"})
SUMMARY_KEYS: Final = frozenset({"runId", "kind", "status", "createdAt"})
RESULT_KEYS: Final[dict[str, frozenset[str]]] = {
    "ping": frozenset(
        {
            "pong",
            "server",
            "protocolVersion",
            "sessionId",
            "methods",
            "backends",
            "limits",
            "processTracking",
            "persistence",
            "admission",
        }
    ),
    "preflight": frozenset({"accepted", "diagnostics"}),
    "agents/list": frozenset({"agents", "diagnostics"}),
    "initialize": frozenset({"protocolVersion", "serverInfo", "sessionId", "capabilities"}),
}
SNAPSHOT_METHODS: Final = frozenset({"spawn", "stop", "resume"})
# Methods whose result is null (LSP's `shutdown`, protocol.md §6); every other is an object.
NULL_RESULT_METHODS: Final = frozenset({"shutdown"})
EVENT_KEYS: Final = frozenset({"runId", "seq", "type", "at"})


class Validator(Protocol):
    name: str

    def result(self, method: str, value: Any) -> list[str]: ...

    def error(self, value: dict[str, Any]) -> list[str]: ...

    def notification(self, method: str, params: Any) -> list[str]: ...


class KnownKeys:
    """The required keys protocol.md names, checked without a schema."""

    name = "required keys (protocol.md §12)"

    def result(self, method: str, value: Any) -> list[str]:
        if method in NULL_RESULT_METHODS:
            return [] if value is None else [f"{method}: the result is not null"]
        if not isinstance(value, dict):
            return [f"{method}: the result is not an object"]
        if method in SNAPSHOT_METHODS or (method == "status" and "runs" not in value):
            return _snapshot_problems(method, value)
        if method == "status":
            return [
                f"status: a run summary lacks {', '.join(sorted(SUMMARY_KEYS - run.keys()))}"
                for run in value["runs"]
                if not isinstance(run, dict) or not SUMMARY_KEYS <= run.keys()
            ]
        missing = RESULT_KEYS.get(method, frozenset()) - value.keys()
        return [f"{method}: the result lacks {', '.join(sorted(missing))}"] if missing else []

    def error(self, value: dict[str, Any]) -> list[str]:
        problems = []
        if not isinstance(value.get("code"), int) or isinstance(value.get("code"), bool):
            problems.append("error.code is not an integer")
        if not isinstance(value.get("message"), str):
            problems.append("error.message is not a string")
        return problems

    def notification(self, method: str, params: Any) -> list[str]:
        if method != "run/event" or not isinstance(params, dict):
            return []
        missing = EVENT_KEYS - params.keys()
        return [f"run/event lacks {', '.join(sorted(missing))}"] if missing else []


def _snapshot_problems(method: str, value: dict[str, Any]) -> list[str]:
    problems = []
    missing = SNAPSHOT_KEYS - value.keys()
    if missing:
        problems.append(f"{method}: the snapshot lacks {', '.join(sorted(missing))}")
    for child in value.get("children") or []:
        if not isinstance(child, dict) or not CHILD_KEYS <= child.keys():
            problems.append(f"{method}: a child lacks one of {', '.join(sorted(CHILD_KEYS))}")
    return problems


class OpenRpc:
    """Results and notifications validated against the OpenRPC document's JSON Schemas."""

    def __init__(self, document: dict[str, Any], place: str) -> None:
        # Imported here: only a run that found the schema pays for jsonschema.
        from jsonschema import Draft202012Validator  # type: ignore[import-untyped,unused-ignore]
        from referencing import Registry
        from referencing.jsonschema import DRAFT202012

        self.name = f"OpenRPC schema ({place})"
        self._fallback = KnownKeys()
        registry: Any = Registry().with_resource(
            "urn:openrpc", DRAFT202012.create_resource(document)
        )
        self._results: dict[str, Any] = {}
        for index, method in enumerate(document.get("methods", [])):
            if isinstance(method, dict) and "result" in method:
                self._results[method["name"]] = Draft202012Validator(
                    {"$ref": f"urn:openrpc#/methods/{index}/result/schema"}, registry=registry
                )
        self._notifications: dict[str, Any] = {}
        for index, note in enumerate(document.get("x-notifications", [])):
            if not isinstance(note, dict):
                continue
            params = note.get("params", [])
            self._notifications[note["name"]] = Draft202012Validator(
                {
                    "type": "object",
                    "properties": {
                        param["name"]: {
                            "$ref": f"urn:openrpc#/x-notifications/{index}/params/{j}/schema"
                        }
                        for j, param in enumerate(params)
                    },
                    "required": [p["name"] for p in params if p.get("required")],
                },
                registry=registry,
            )

    def result(self, method: str, value: Any) -> list[str]:
        validator = self._results.get(method)
        if validator is None:
            return self._fallback.result(method, value)
        return [_describe(method, error) for error in validator.iter_errors(value)]

    def error(self, value: dict[str, Any]) -> list[str]:
        return self._fallback.error(value)

    def notification(self, method: str, params: Any) -> list[str]:
        validator = self._notifications.get(method)
        if validator is None:
            return self._fallback.notification(method, params)
        return [_describe(method, error) for error in validator.iter_errors(params)]


def _describe(method: str, error: Any) -> str:
    where = "/".join(str(part) for part in error.absolute_path) or "(root)"
    return f"{method} {where}: {error.message[:200]}"


def packaged_schema() -> tuple[dict[str, Any], str] | None:
    """The OpenRPC document of this installation, as `subagent-host schema` prints it.

    Asked of the command, in a process of its own, not imported: the harness stays a
    client of servers, and the document is always the one this installation's wire
    types make (a source checkout's `schema/openrpc.json` is the same text, a test
    keeps them equal). None when the command cannot give it.
    """
    try:
        # Called once, before the harness starts its event loop: nothing is blocked.
        printed = subprocess.run(  # noqa: TID251
            [sys.executable, "-m", "subagent_host", "schema"],
            capture_output=True,
            check=True,
            timeout=SCHEMA_TIMEOUT_S,
        )
        return _document(printed.stdout.decode("utf-8")), "subagent-host schema"
    except (OSError, subprocess.SubprocessError, UnicodeDecodeError, ValueError):
        return None


def _document(text: str) -> dict[str, Any]:
    document = json.loads(text)
    if not isinstance(document, dict) or not isinstance(document.get("methods"), list):
        raise ValueError("not an OpenRPC document (no methods)")
    return document


def load_validator(schema: Path | None = None) -> Validator:
    """The strongest validator available: the given or packaged schema, else the keys.

    A schema named on the command line must be usable (jsonschema installed, a valid
    document); the packaged one is used when it can be.
    """
    if schema is not None:
        return OpenRpc(_document(schema.read_text(encoding="utf-8")), str(schema))
    found = packaged_schema()
    if found is None:
        return KnownKeys()
    try:
        return OpenRpc(*found)
    except ImportError:
        return KnownKeys()
