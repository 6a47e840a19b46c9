"""ACP's messages as this client writes and reads them, on the official SDK's schema
models (`acp.schema`): the handshake's request and what its answer says, the agent's
authentication methods, a tool call's name and kind, usage counts, errors, and the
JSON-RPC lines themselves. The conversation (acp_client.py) and the probe of a
configured agent (backends/acp_probe.py) share them; like the conversation, this
module is imported only once an ACP agent is talked to (it loads the SDK).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

import pydantic
from acp import schema

from subagent_host.backends.acp import AcpAnswer
from subagent_host.backends.events import ToolKind
from subagent_host.backends.interactive.base import Write
from subagent_host.backends.reports import short
from subagent_host.values.facts import (
    AcpAgentCapabilities,
    AcpAgentInfo,
    AcpPromptCapabilities,
    Usage,
)

PROTOCOL_VERSION: Final = 1
METHOD_NOT_FOUND: Final = -32601
AUTH_REQUIRED_CODE: Final = -32000
"""ACP's error `auth_required` (the SDK's `RequestError.auth_required`)."""
ERROR_CHARS: Final = 500  # of the agent's error message, in a failure's reason


AuthMethod = schema.EnvVarAuthMethod | schema.TerminalAuthMethod | schema.AuthMethodAgent


def auth_method_for(methods: Sequence[AuthMethod], env_names: frozenset[str]) -> str | None:
    """The first `env_var` method whose required variables are all in `env_names`."""
    for method in methods:
        if isinstance(method, schema.EnvVarAuthMethod) and all(
            var.name in env_names for var in method.vars if not var.optional
        ):
            return method.id
    return None


def auth_methods_text(methods: Sequence[AuthMethod]) -> str:
    """What the agent offers, for a reason: each method's id, type and the variables it
    needs (names only), or why the host cannot use it."""
    if not methods:
        return "it offers no method"
    said = []
    for method in methods:
        if isinstance(method, schema.EnvVarAuthMethod):
            names = ", ".join(
                f"{var.name} (optional)" if var.optional else var.name for var in method.vars
            )
            said.append(f"{method.id} (env_var: {names or 'no variable'})")
        elif isinstance(method, schema.TerminalAuthMethod):
            said.append(f"{method.id} (terminal: the host has no terminal to run it)")
        else:
            said.append(f"{method.id} (agent: the host has no person to sign in)")
    return short("its methods: " + "; ".join(said), ERROR_CHARS)


def initialize_request() -> schema.InitializeRequest:
    """What the client says first: ACP version 1, no `fs`, no `terminal` (the probe of a
    configured agent, backends/acp_probe.py, says the same)."""
    capabilities = schema.ClientCapabilities(
        fs=schema.FileSystemCapabilities(read_text_file=False, write_text_file=False),
        terminal=False,
    )
    return schema.InitializeRequest(
        protocol_version=PROTOCOL_VERSION, client_capabilities=capabilities
    )


def initialize_line(request_id: int) -> bytes:
    """`initialize_request()` as the line a conversation's first request is."""
    params = dump(initialize_request())
    return write_line({"id": request_id, "method": "initialize", "params": params}).data


def read_initialize(result: Mapping[str, Any]) -> AcpAnswer:
    """The facts of an agent's answer to `initialize`, checked by the SDK's model
    (pydantic.ValidationError when it is not ACP's)."""
    answer = schema.InitializeResponse.model_validate(result)
    info = answer.agent_info
    capabilities = answer.agent_capabilities or schema.AgentCapabilities()
    prompts = capabilities.prompt_capabilities or schema.PromptCapabilities()
    return AcpAnswer(
        protocol_version=answer.protocol_version,
        agent_info=AcpAgentInfo(name=info.name, version=info.version, title=info.title)
        if info is not None
        else None,
        capabilities=AcpAgentCapabilities(
            load_session=bool(capabilities.load_session),
            prompt_capabilities=AcpPromptCapabilities(
                image=bool(prompts.image),
                audio=bool(prompts.audio),
                embedded_context=bool(prompts.embedded_context),
            ),
        ),
        auth_methods=tuple(_auth_id(method) for method in answer.auth_methods or ()),
    )


def _auth_id(method: Any) -> str:
    # An auth method is one of several models (the SDK's union), each with its `id`.
    inner = getattr(method, "root", method)
    return str(getattr(inner, "id", "?"))


def tool_name(meta: Mapping[str, Any] | None, kind: str | None) -> tuple[str, ToolKind]:
    """A tool call's name (the agent's `_meta.toolName`, else its kind) and kind."""
    known = {member.value for member in ToolKind}
    tool_kind = ToolKind(kind) if kind is not None and kind in known else ToolKind.OTHER
    name = (meta or {}).get("toolName")
    return (short(name) if isinstance(name, str) and name else tool_kind.value), tool_kind


def usage_of(counts: Mapping[str, Any]) -> Usage | None:
    """ACP's token counts (`inputTokens`, `outputTokens`, `cachedReadTokens`,
    `cachedWriteTokens`) as usage; None when they are not counts."""
    names = ("inputTokens", "outputTokens", "cachedReadTokens", "cachedWriteTokens")
    values = [counts.get(name) or 0 for name in names]
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in values):
        return None
    return Usage(
        input_tokens=values[0],
        output_tokens=values[1],
        cache_read_tokens=values[2],
        cache_write_tokens=values[3],
    )


def dump(model: pydantic.BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def result_line(request_id: int | str, result: pydantic.BaseModel) -> Write:
    return write_line({"id": request_id, "result": dump(result)})


def write_line(message: Mapping[str, Any]) -> Write:
    return Write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")


def error_code(error: object) -> object:
    return error.get("code") if isinstance(error, dict) else None


def error_text(error: object) -> str:
    message = error.get("message") if isinstance(error, dict) else None
    return short(message, ERROR_CHARS) if isinstance(message, str) else "an error"


def validation_errors(error: pydantic.ValidationError) -> str:
    details = error.errors()
    if not details:
        return "invalid"
    where = ".".join(str(part) for part in details[0]["loc"])
    return short(f"{where}: {details[0]['msg']}", ERROR_CHARS)
