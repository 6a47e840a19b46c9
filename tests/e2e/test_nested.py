"""A server run as a child of another server ends with that child (protocol.md §8.3).

The outer run's child starts a nested server that starts a child ignoring
SIGTERM. Stopping the outer run must end that grandchild too, in every mode:
with cgroups, the nested server makes its cgroups below its own (the outer
child's), where `cgroup.kill` reaches them; without, the grandchild is a
descendant of the outer child. The nested server's own grace is far longer than
the outer one, so only the outer stop can end it in time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

from tests.backends.conftest import assert_gone, poll_until
from tests.e2e.harness import EXIT_TIMEOUT_S, result_of, running_server, server_executable
from tests.e2e.test_detach import alive
from tests.e2e.test_leftovers import mode, server_args, stopped

__all__ = ["mode"]  # the fixture, parametrised over the tracking modes

# $0 the nested server, $1 its request, $2 its state directory, $3 its tracking mode:
# its stdin stays open (the sleep), so it lives until the outer stop ends it. Not a
# delegated subagent (its depth unset, so it may start children): a tool the child runs.
NESTING: Final = (
    '(printf "%s\\n" "$1"; exec sleep 1000) | env -u SUBAGENT_HOST_DEPTH "$0" '
    '--state-dir "$2" --session nested --process-tracking "$3" --grace-ms 60000 '
    ">/dev/null 2>&1"
)
# $0 the file to write its pid to: it ignores SIGTERM (and keeps ignoring it in sleep).
IGNORING: Final = 'trap \'\' TERM; echo $$ > "$0.new" && mv "$0.new" "$0"; exec sleep 1000'


async def test_a_stop_ends_the_children_of_a_server_nested_in_the_run(
    tmp_path: Path, mode: str
) -> None:
    told = tmp_path / "grandchild.pid"
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "spawn",
        "params": {"command": ["sh", "-c", IGNORING, str(told)]},
    }
    nested = [server_executable(), json.dumps(request), str(tmp_path / "nested"), mode]
    async with running_server(*server_args(tmp_path / "outer", mode)) as outer:
        run = await result_of(outer, "spawn", {"command": ["sh", "-c", NESTING, *nested]})
        assert await poll_until(told.exists, EXIT_TIMEOUT_S)
        grandchild = int(told.read_text())
        await stopped(outer, run["runId"])
        # Ended by the time the stop is answered, not later by the nested server's grace.
        assert not alive(grandchild)
        await assert_gone([grandchild])
        assert (await outer.finish())[0] == 0
