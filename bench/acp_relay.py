"""A relay between an ACP client and its agent that notes the agent's own times.

    python bench/acp_relay.py LOG PROGRAM [ARG ...]

Starts PROGRAM with piped stdin and stdout, copies the client's lines to it and its
lines back, one line at a time, and when the agent has exited appends one JSON line to
LOG: `{"started", "firstTool", "exited"}`, moments on the machine's monotonic clock
(CLOCK_MONOTONIC, which `time.perf_counter()` reads in every process alike): when the
relay started the agent, when the agent wrote its first `tool_call` update (null: none)
and when it exited. bench/acp.py puts the relay in front of the agent on both of its
paths, the SDK's and the server's, so that it costs both the same, and subtracts what
the agent itself took from what each client saw. Exits with the agent's status.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from typing import IO

TOOL_CALL = b'"sessionUpdate":"tool_call"'


def forward(source: IO[bytes], target: IO[bytes]) -> None:
    """The client's lines to the agent; the client's end closes the agent's stdin."""
    for line in source:
        target.write(line)
        target.flush()
    target.close()


def is_tool_call(line: bytes) -> bool:
    # A cheap look first: most lines are message chunks.
    if TOOL_CALL not in line.replace(b" ", b""):
        return False
    message = json.loads(line)
    update = message.get("params", {}).get("update", {})
    return bool(
        message.get("method") == "session/update" and update.get("sessionUpdate") == "tool_call"
    )


def main(argv: list[str]) -> int:
    log, program = argv[0], argv[1:]
    started = time.perf_counter()
    agent = subprocess.Popen(program, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert agent.stdin is not None and agent.stdout is not None
    threading.Thread(target=forward, args=(sys.stdin.buffer, agent.stdin), daemon=True).start()
    first_tool: float | None = None
    for line in agent.stdout:
        if first_tool is None and is_tool_call(line):
            first_tool = time.perf_counter()
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
    status = agent.wait()
    exited = time.perf_counter()
    with open(log, "a", encoding="utf-8") as out:
        out.write(json.dumps({"started": started, "firstTool": first_tool, "exited": exited}))
        out.write("\n")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
