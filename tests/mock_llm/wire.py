"""Encode a `Reply` in the shapes the three real APIs use, streamed (SSE) or not.

Called by `tests/mock_llm/server.py`. Each `*_stream` function returns a `Stream`: the
SSE events in order, and for a stalling reply how many of them to send before hanging
(up to and including the first text delta).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from tests.mock_llm.scenario import JSONObject, JSONValue, Reply, ToolCall

# Pieces a text or an argument string is cut into, so clients must join deltas.
_PIECES = 3


@dataclass(frozen=True)
class SseEvent:
    """One server-sent event: an optional `event:` name and a `data:` payload."""

    data: str
    name: str | None = None

    def encode(self) -> bytes:
        """The event's bytes, blank line included."""
        head = f"event: {self.name}\n" if self.name else ""
        return f"{head}data: {self.data}\n\n".encode()


@dataclass(frozen=True)
class Stream:
    """The events of one streamed reply; a stall sends only the first `stall_after`."""

    events: list[SseEvent]
    stall_after: int | None = None


def split_text(text: str, pieces: int = _PIECES) -> list[str]:
    """Cut `text` into up to `pieces` non-empty parts that join back to it."""
    size = max(1, -(-len(text) // pieces))
    return [text[start : start + size] for start in range(0, len(text), size)] or [""]


def chat_completion(reply: Reply, model: str) -> JSONObject:
    """A non-streamed `/v1/chat/completions` response."""
    message: JSONObject = {"role": "assistant", "content": reply.text}
    if reply.tool_call is not None:
        message["tool_calls"] = [_chat_tool_call(reply.tool_call, reply.tool_call.arguments_json)]
    return {
        "id": reply.response_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": _chat_finish_reason(reply),
                "logprobs": None,
            }
        ],
        "usage": _chat_usage(reply),
    }


def chat_completion_stream(reply: Reply, model: str) -> Stream:
    """A streamed `/v1/chat/completions` response: chunks, usage chunk, `[DONE]`."""
    created = int(time.time())

    def chunk(delta: JSONObject, finish_reason: str | None = None) -> SseEvent:
        choice: JSONObject = {"index": 0, "delta": delta, "finish_reason": finish_reason}
        return _data_event(_chat_chunk(reply, model, created, [choice]))

    events = [chunk({"role": "assistant", "content": ""})]
    stall_after: int | None = None
    if reply.text is not None:
        events += [chunk({"content": piece}) for piece in split_text(reply.text)]
        stall_after = 2
    if reply.tool_call is not None:
        pieces = split_text(reply.tool_call.arguments_json)
        events.append(chunk({"tool_calls": [_chat_tool_call(reply.tool_call, "")]}))
        events += [
            chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
            for piece in pieces
        ]
    events.append(chunk({}, _chat_finish_reason(reply)))
    usage_chunk = _chat_chunk(reply, model, created, [])
    usage_chunk["usage"] = _chat_usage(reply)
    events += [_data_event(usage_chunk), SseEvent("[DONE]")]
    return Stream(events, stall_after if reply.is_stall else None)


def responses_object(reply: Reply, model: str, *, status: str = "completed") -> JSONObject:
    """A `/v1/responses` response object (non-streamed, or inside completed events)."""
    is_done = status == "completed"
    output: list[JSONValue] = []
    if is_done and reply.text is not None:
        output.append(_responses_message(reply, reply.text, "completed"))
    if is_done and reply.tool_call is not None:
        output.append(_responses_tool_item(reply.tool_call, "completed"))
    usage: JSONObject = {
        "input_tokens": reply.input_tokens,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": reply.output_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": reply.input_tokens + reply.output_tokens,
    }
    return {
        "id": reply.response_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": status,
        "error": None,
        "incomplete_details": None,
        "model": model,
        "output": output,
        "parallel_tool_calls": False,
        "usage": usage if is_done else None,
    }


def responses_stream(reply: Reply, model: str) -> Stream:
    """A streamed `/v1/responses` response, event by event as the real API sends it."""
    events: list[SseEvent] = []

    def emit(kind: str, payload: JSONObject) -> None:
        body: JSONObject = {"type": kind, "sequence_number": len(events), **payload}
        events.append(SseEvent(json.dumps(body), kind))

    emit("response.created", {"response": responses_object(reply, model, status="in_progress")})
    emit("response.in_progress", {"response": responses_object(reply, model, status="in_progress")})
    stall_after: int | None = None
    index = 0
    if reply.text is not None:
        item_id = f"msg_{reply.response_id}"
        place: JSONObject = {"item_id": item_id, "output_index": index, "content_index": 0}
        empty_part: JSONObject = {"type": "output_text", "text": "", "annotations": []}
        added = _responses_message(reply, None, "in_progress")
        emit("response.output_item.added", {"output_index": index, "item": added})
        emit("response.content_part.added", {**place, "part": empty_part})
        for piece in split_text(reply.text):
            emit("response.output_text.delta", {**place, "delta": piece, "logprobs": []})
            stall_after = stall_after or len(events)
        emit("response.output_text.done", {**place, "text": reply.text, "logprobs": []})
        emit("response.content_part.done", {**place, "part": {**empty_part, "text": reply.text}})
        done = _responses_message(reply, reply.text, "completed")
        emit("response.output_item.done", {"output_index": index, "item": done})
        index += 1
    if reply.tool_call is not None:
        call = reply.tool_call
        added = _responses_tool_item(call, "in_progress")
        emit("response.output_item.added", {"output_index": index, "item": added})
        if not call.is_local_shell:
            place = {"item_id": call.item_id, "output_index": index}
            for piece in split_text(call.arguments_json):
                emit("response.function_call_arguments.delta", {**place, "delta": piece})
            emit(
                "response.function_call_arguments.done", {**place, "arguments": call.arguments_json}
            )
        done = _responses_tool_item(call, "completed")
        emit("response.output_item.done", {"output_index": index, "item": done})
    emit("response.completed", {"response": responses_object(reply, model)})
    return Stream(events, stall_after if reply.is_stall else None)


def anthropic_message(reply: Reply, model: str) -> JSONObject:
    """A non-streamed `/v1/messages` response."""
    content: list[JSONValue] = []
    if reply.text is not None:
        content.append({"type": "text", "text": reply.text})
    if reply.tool_call is not None:
        content.append(_anthropic_tool_use(reply.tool_call, reply.tool_call.arguments))
    return {
        **_anthropic_message_head(reply, model),
        "content": content,
        "stop_reason": _anthropic_stop_reason(reply),
        "usage": _anthropic_usage(reply, reply.output_tokens),
    }


def anthropic_stream(reply: Reply, model: str) -> Stream:
    """A streamed `/v1/messages` response: message_start ... message_stop."""
    events: list[SseEvent] = []

    def emit(kind: str, payload: JSONObject) -> None:
        events.append(SseEvent(json.dumps({"type": kind, **payload}), kind))

    start: JSONObject = {
        **_anthropic_message_head(reply, model),
        "content": [],
        "stop_reason": None,
        "usage": _anthropic_usage(reply, 1),
    }
    emit("message_start", {"message": start})
    emit("ping", {})
    stall_after: int | None = None
    index = 0
    if reply.text is not None:
        emit("content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}})
        for piece in split_text(reply.text):
            emit(
                "content_block_delta",
                {"index": index, "delta": {"type": "text_delta", "text": piece}},
            )
            stall_after = stall_after or len(events)
        emit("content_block_stop", {"index": index})
        index += 1
    if reply.tool_call is not None:
        block = _anthropic_tool_use(reply.tool_call, {})
        emit("content_block_start", {"index": index, "content_block": block})
        for piece in split_text(reply.tool_call.arguments_json):
            delta: JSONObject = {"type": "input_json_delta", "partial_json": piece}
            emit("content_block_delta", {"index": index, "delta": delta})
        emit("content_block_stop", {"index": index})
    stop: JSONObject = {"stop_reason": _anthropic_stop_reason(reply), "stop_sequence": None}
    emit("message_delta", {"delta": stop, "usage": {"output_tokens": reply.output_tokens}})
    emit("message_stop", {})
    return Stream(events, stall_after if reply.is_stall else None)


def _data_event(payload: JSONObject) -> SseEvent:
    return SseEvent(json.dumps(payload))


def _chat_chunk(reply: Reply, model: str, created: int, choices: list[JSONValue]) -> JSONObject:
    return {
        "id": reply.response_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": choices,
    }


def _chat_tool_call(call: ToolCall, arguments: str) -> JSONObject:
    return {
        "index": 0,
        "id": call.call_id,
        "type": "function",
        "function": {"name": call.name, "arguments": arguments},
    }


def _chat_finish_reason(reply: Reply) -> str:
    return "tool_calls" if reply.tool_call is not None else "stop"


def _chat_usage(reply: Reply) -> JSONObject:
    return {
        "prompt_tokens": reply.input_tokens,
        "completion_tokens": reply.output_tokens,
        "total_tokens": reply.input_tokens + reply.output_tokens,
    }


def _responses_message(reply: Reply, text: str | None, status: str) -> JSONObject:
    content: list[JSONValue] = []
    if text is not None:
        content.append({"type": "output_text", "text": text, "annotations": []})
    return {
        "id": f"msg_{reply.response_id}",
        "type": "message",
        "status": status,
        "role": "assistant",
        "content": content,
    }


def _responses_tool_item(call: ToolCall, status: str) -> JSONObject:
    if call.is_local_shell:
        action: JSONObject = {"type": "exec", "env": {}, **call.arguments}
        return {
            "id": call.item_id,
            "type": "local_shell_call",
            "call_id": call.call_id,
            "status": status,
            "action": action,
        }
    arguments = call.arguments_json if status == "completed" else ""
    return {
        "id": call.item_id,
        "type": "function_call",
        "status": status,
        "call_id": call.call_id,
        "name": call.name,
        "arguments": arguments,
    }


def _anthropic_message_head(reply: Reply, model: str) -> JSONObject:
    return {
        "id": reply.response_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "stop_sequence": None,
    }


def _anthropic_tool_use(call: ToolCall, tool_input: JSONObject) -> JSONObject:
    return {"type": "tool_use", "id": call.call_id, "name": call.name, "input": tool_input}


def _anthropic_stop_reason(reply: Reply) -> str:
    return "tool_use" if reply.tool_call is not None else "end_turn"


def _anthropic_usage(reply: Reply, output_tokens: int) -> JSONObject:
    return {
        "input_tokens": reply.input_tokens,
        "output_tokens": output_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }
