"""An LSP client's handshake and ending through the real method table, in memory.

vscode-languageclient's `initialize` params are taken as sent (LSP's fields
checked, only `processId` used); `initialized` is taken in silence; `shutdown`
answers null and marks the connection's lifecycle, `exit` ends it.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Final, cast

import pytest

from subagent_host.config import ServerConfig
from subagent_host.handlers.context import HandlerContext
from subagent_host.handlers.table import build_method_table
from subagent_host.rpc.dispatch import HostProtocol, make_protocol
from subagent_host.rpc.framing import Parsed
from subagent_host.values.choices import Persistence

# What vscode-languageclient 9 sends (VS Code 1.95), capabilities cut to a realistic part.
VSCODE_INITIALIZE: Final[dict[str, Any]] = {
    "processId": 1234,
    "clientInfo": {"name": "Visual Studio Code", "version": "1.95.0"},
    "locale": "en",
    "rootPath": "/tmp/x",
    "rootUri": "file:///tmp/x",
    "capabilities": {
        "workspace": {
            "applyEdit": True,
            "workspaceEdit": {"documentChanges": True, "resourceOperations": ["create"]},
            "didChangeConfiguration": {"dynamicRegistration": True},
            "workspaceFolders": True,
            "configuration": True,
        },
        "textDocument": {
            "synchronization": {"dynamicRegistration": True, "didSave": True},
            "hover": {"contentFormat": ["markdown", "plaintext"]},
        },
        "window": {
            "workDoneProgress": True,
            "showMessage": {"messageActionItem": {"additionalPropertiesSupport": True}},
        },
        "general": {"positionEncodings": ["utf-16"], "markdown": {"parser": "marked"}},
    },
    "trace": "off",
    "workspaceFolders": [{"uri": "file:///tmp/x", "name": "x"}],
}


class Session:
    """One connection's dispatcher over the real table; replies collected as JSON."""

    def __init__(self, tmp_path: Path) -> None:
        self.sent: list[Any] = []
        self.protocol: HostProtocol = make_protocol()
        self.ctx = HandlerContext(
            config=ServerConfig(state_dir=tmp_path),
            session_id="s-1",
            orchestrator=cast(Any, None),  # none of these messages reach runs
            store=cast(Any, SimpleNamespace(persistence=Persistence.SQLITE, durable=True)),
            progress=cast(Any, None),
            lifecycle=self.protocol.lifecycle,
        )
        self.protocol.attach(
            build_method_table(self.ctx), lambda body: self.sent.append(json.loads(body))
        )

    def send(self, method: str, params: Any = None, msg_id: int | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if msg_id is not None:
            message["id"] = msg_id
        if params is not None:
            message["params"] = params
        self.protocol.receive(Parsed(message))

    async def settle(self) -> list[Any]:
        await asyncio.wait_for(self.protocol.wait_answered(), 5)
        sent, self.sent = self.sent, []
        return sent


@pytest.fixture
def session(tmp_path: Path) -> Session:
    return Session(tmp_path)


async def test_vscode_languageclients_initialize_is_taken_as_sent_and_its_pid_logged(
    session: Session, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="subagent_host")
    session.send("initialize", VSCODE_INITIALIZE, msg_id=1)
    [reply] = await session.settle()
    assert reply["result"]["protocolVersion"] == "1"
    assert reply["result"]["sessionId"] == "s-1"
    assert "shutdown" in reply["result"]["capabilities"]["methods"]
    assert reply["result"]["capabilities"]["notifications"]["accepted"] == [
        "$/cancelRequest",
        "exit",
        "initialized",
        "run/detach",
        "window/workDoneProgress/cancel",
    ]
    assert "client: Visual Studio Code 1.95.0 (process 1234)" in caplog.messages


@pytest.mark.parametrize(
    ("params", "errors"),
    [
        (
            {"processId": "1234", "rootUrl": "file:///tmp"},
            [
                {"path": "processId", "message": "expected an integer, got a string"},
                {"path": "rootUrl", "message": "unknown field (did you mean rootUri?)"},
            ],
        ),
        (
            {"workspaceFolders": [{"uri": "file:///x", "name": "x", "index": 0}]},
            [{"path": "workspaceFolders[0].index", "message": "unknown field"}],
        ),
        (
            {"workspaceFolders": [{"uri": "file:///x"}]},
            [{"path": "workspaceFolders[0].name", "message": "required field missing"}],
        ),
        (
            {"trace": "loud"},
            [{"path": "trace", "message": "must be one of off, messages, verbose"}],
        ),
        (
            {"clientInfo": {"name": "x", "title": "X"}},
            [{"path": "clientInfo.title", "message": "unknown field"}],
        ),
    ],
)
async def test_initialize_still_checks_every_field_and_refuses_unknown_ones(
    session: Session, params: dict[str, Any], errors: list[dict[str, str]]
) -> None:
    session.send("initialize", params, msg_id=1)
    [reply] = await session.settle()
    assert reply["error"]["code"] == -32602
    assert reply["error"]["data"]["errors"] == errors


async def test_lsp_nulls_read_as_absent_and_any_initialization_options_are_taken(
    session: Session,
) -> None:
    params = {
        **VSCODE_INITIALIZE,
        "processId": None,
        "rootPath": None,
        "rootUri": None,
        "workspaceFolders": None,
        "initializationOptions": {"anything": [1, "two", {"three": None}]},
        "workDoneToken": "init-1",
    }
    session.send("initialize", params, msg_id=1)
    [reply] = await session.settle()
    assert "result" in reply, reply


async def test_initialized_is_taken_without_a_word_in_the_log(
    session: Session, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="subagent_host")
    session.send("initialized", {})
    session.send("ping", msg_id=1)  # answered once the notification has run
    [reply] = await session.settle()
    assert reply["result"]["pong"] is True
    assert caplog.records == []


async def test_shutdown_answers_null_then_only_exit_is_taken(
    session: Session, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="subagent_host")
    session.send("shutdown", msg_id=1)
    session.send("ping", msg_id=2)
    session.send("shutdown", [], msg_id=3)
    session.send("initialized", {})
    assert await session.settle() == [
        {"jsonrpc": "2.0", "id": 1, "result": None},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "error": {
                "code": -32600,
                "message": "invalid request: the server is shut down: "
                "after shutdown, only the exit notification is taken",
            },
        },
        {
            "jsonrpc": "2.0",
            "id": 3,
            "error": {
                "code": -32600,
                "message": "invalid request: the server is shut down: "
                "after shutdown, only the exit notification is taken",
            },
        },
    ]
    assert not session.ctx.lifecycle.has_exited
    session.send("exit")
    assert session.ctx.lifecycle.has_exited and session.ctx.lifecycle.exit_status == 0
    assert caplog.records == []


async def test_exit_without_shutdown_sets_exit_status_1(session: Session) -> None:
    session.send("exit", [])
    assert session.ctx.lifecycle.has_exited and session.ctx.lifecycle.exit_status == 1


async def test_exit_and_shutdown_sent_the_wrong_way_are_refused(session: Session) -> None:
    session.send("exit", msg_id=1)  # a request: exit is a notification
    session.send("shutdown", {"now": True}, msg_id=2)
    replies = await session.settle()
    assert replies[0]["error"] == {
        "code": -32601,
        "message": "method not found: exit is a notification (send no id)",
    }
    assert replies[1]["error"]["data"]["errors"] == [{"path": "now", "message": "unknown field"}]
    assert not session.ctx.lifecycle.is_shut_down and not session.ctx.lifecycle.has_exited
