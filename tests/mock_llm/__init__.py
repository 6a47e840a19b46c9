"""A stdlib-only mock LLM HTTP server on 127.0.0.1 for tests and benchmarks.

It speaks the three APIs the real agent CLIs use (OpenAI chat completions, OpenAI
responses, Anthropic messages) and decides each answer statelessly from the request:
a tool result last -> final text `MOCK-FINAL: ...`; else keywords in the latest user
text: `ANSWER-NOW` (final text), `SLEEP-TOOL` (a long shell tool call), `STALL`
(stream starts, then hangs until close); else one shell tool call. `LOOP-TOOL` in the
latest user text makes a shell tool call every time, even after a tool result;
`NARRATE-TOOL` a response with text and a shell tool call; `DELEGATE-MCP` calls of an
MCP `spawn` tool (a command child, then a pi agent), then final text. See
`tests/mock_llm/scenario.py` for the rules and `tests/mock_llm/server.py` for the API.
"""

from tests.mock_llm.scenario import (
    BASE_INPUT_TOKENS,
    DEFAULT_SLEEP_COMMAND,
    DEFAULT_TOOL_COMMAND,
    DELEGATED_AGENT_PROMPT,
    DELEGATED_COMMAND_TEXT,
    DELEGATIONS,
    ESCALATION_JUSTIFICATION,
    FINAL_TEXT_PREFIX,
    KEYWORD_ANSWER_NOW,
    KEYWORD_DELEGATE_MCP,
    KEYWORD_ESCALATE,
    KEYWORD_LOOP_TOOL,
    KEYWORD_NARRATE_TOOL,
    KEYWORD_REPEAT,
    KEYWORD_REPORT_TOOL,
    KEYWORD_SLEEP_TOOL,
    KEYWORD_STALL,
    NARRATION_TEXT,
    OUTPUT_TOKENS,
    STALL_TEXT,
    TOOL_SAID,
    JSONObject,
    JSONValue,
    Scenario,
)
from tests.mock_llm.server import LOOPBACK_HOST, MockLLM, RecordedRequest, refuse_non_loopback

__all__ = [
    "BASE_INPUT_TOKENS",
    "DEFAULT_SLEEP_COMMAND",
    "DELEGATED_AGENT_PROMPT",
    "DELEGATED_COMMAND_TEXT",
    "DELEGATIONS",
    "DEFAULT_TOOL_COMMAND",
    "ESCALATION_JUSTIFICATION",
    "FINAL_TEXT_PREFIX",
    "KEYWORD_ANSWER_NOW",
    "KEYWORD_DELEGATE_MCP",
    "KEYWORD_ESCALATE",
    "KEYWORD_LOOP_TOOL",
    "KEYWORD_NARRATE_TOOL",
    "KEYWORD_REPEAT",
    "KEYWORD_REPORT_TOOL",
    "KEYWORD_SLEEP_TOOL",
    "KEYWORD_STALL",
    "LOOPBACK_HOST",
    "NARRATION_TEXT",
    "OUTPUT_TOKENS",
    "STALL_TEXT",
    "TOOL_SAID",
    "JSONObject",
    "JSONValue",
    "MockLLM",
    "RecordedRequest",
    "Scenario",
    "refuse_non_loopback",
]
