"""Run the mock LLM until stdin closes: `python -m tests.mock_llm --port 0`.

Prints the port it listens on (one line on stdout), then serves on 127.0.0.1 until
end of input on stdin, for benchmarks and manual runs of the real CLIs.
"""

from __future__ import annotations

import argparse
import sys

from tests.mock_llm.scenario import DEFAULT_SLEEP_COMMAND, DEFAULT_TOOL_COMMAND
from tests.mock_llm.server import DEFAULT_MODEL, MockLLM


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, serve until stdin reaches EOF, return the exit status."""
    parser = argparse.ArgumentParser(prog="python -m tests.mock_llm", description=__doc__)
    parser.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1 (0 = free)")
    parser.add_argument("--model", default=DEFAULT_MODEL, help="model name when none is sent")
    parser.add_argument("--tool-command", default=DEFAULT_TOOL_COMMAND)
    parser.add_argument("--sleep-command", default=DEFAULT_SLEEP_COMMAND)
    args = parser.parse_args(argv)
    mock = MockLLM(
        port=args.port,
        model=args.model,
        tool_command=args.tool_command,
        sleep_command=args.sleep_command,
    )
    with mock:
        print(mock.port, flush=True)
        try:
            while sys.stdin.buffer.read(65536):
                pass  # Input is ignored; only its end matters.
        except KeyboardInterrupt:
            return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
