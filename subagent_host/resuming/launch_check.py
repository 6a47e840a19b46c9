"""A resume runs only the agent CLI that was approved (protocol.md §15).

An agent child's projection records what its launch ran: the argv (`argvTemplate`)
and the file its program was (`executable`: real path, digest, version). Before
a resume is approved, and again before it runs, the launch is rebuilt from the
projection with today's adapter and today's file, and compared:

- `argv`: the projection rendered again by the adapter as a launch (no session to
  continue, its own limits and access: the resume's own flags and lowered limits
  aside) must be the stored template;
- `executable`, `digest`: the file exec would start now (the program named by that
  argv, on the child's PATH) must be the recorded one, byte for byte;
- `version`: what that file's `--version` prints must be the recorded version (a
  configured ACP agent's: the `agentInfo.version` it answered the server's probe with;
  it is never run with `--version`).

The version is asked only of the recorded file itself: a file that is not the
approved one is never run, not even with `--version`. A projection recorded
before programs were (no `executable`) resumes unchecked, as it always did:
its contract says `launchCheck: "legacy"`; a checked one says `verified`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import attrs

from subagent_host.backends.base import Backend
from subagent_host.backends.identity import ProgramIdentities
from subagent_host.planning.access import default_tools
from subagent_host.planning.plan import prepared
from subagent_host.planning.projection import child_of
from subagent_host.planning.views import Projection
from subagent_host.values.choices import ACP

LAUNCH_CHANGED: Final = "launch-changed"
VERIFIED: Final = "verified"
LEGACY: Final = "legacy"


@attrs.frozen
class LaunchChange:
    """What differs between the approved launch and the one a resume would run now."""

    changed: tuple[str, ...]
    """`executable`, `digest`, `version`, `argv`: in that order, those that differ."""
    expected: Mapping[str, Any]
    """The approved value of each changed item."""
    actual: Mapping[str, Any]
    """Its value now (null: no file would be found, or its version was not asked)."""

    def data(self) -> dict[str, Any]:
        return {
            "changed": list(self.changed),
            "expected": dict(self.expected),
            "actual": dict(self.actual),
        }

    def sentence(self) -> str:
        named = {
            "executable": "its program is another file",
            "digest": "its program's file changed",
            "version": "its program reports another version",
            "argv": "its command line would be another",
        }
        return "; ".join(named[item] for item in self.changed)


def launch_check(projection: Projection) -> str | None:
    """The contract's `launchCheck`: None for a `command` child (its argv is the stored one)."""
    if projection.backend == "command":
        return None
    return LEGACY if projection.executable is None else VERIFIED


async def compare_launch(
    projection: Projection,
    backend: Backend,
    identities: ProgramIdentities | None,
    path: str | None,
) -> LaunchChange | None:
    """How the launch a resume would make differs from the approved one (None: it does not,
    or the projection predates the comparison). `path` is the child's PATH (None: the
    server's)."""
    approved = projection.executable
    if launch_check(projection) != VERIFIED or approved is None:
        return None
    expected: dict[str, Any] = {}
    actual: dict[str, Any] = {}
    argv = _rendered(projection, backend)
    acp_agent = backend.id if backend.protocol == ACP else None
    if argv != projection.argv_template:
        expected["argv"], actual["argv"] = list(projection.argv_template), list(argv)
    if identities is not None:  # else nothing identifies programs here (a bare test server)
        now = await identities.locate(argv[0], projection.cwd, path)
        if now is None or now.path != approved.path:
            expected["executable"], actual["executable"] = approved.path, now and now.path
        if now is None or now.digest != approved.digest:
            expected["digest"], actual["digest"] = approved.digest, now and now.digest
        elif (version := await identities.version(now, acp_agent=acp_agent)) != approved.version:
            # Asked only of the approved file's bytes: another file is never run (an ACP
            # agent's is the version it answered the server's probe with: nothing runs).
            expected["version"], actual["version"] = approved.version, version
    if not expected:
        return None
    order = ("executable", "digest", "version", "argv")
    return LaunchChange(
        changed=tuple(item for item in order if item in expected),
        expected=expected,
        actual=actual,
    )


def _rendered(projection: Projection, backend: Backend) -> tuple[str, ...]:
    """The projection's launch as today's adapter renders it; of its two renderings when its
    tools are the backend's default ones (a request may have named them, or named none),
    the one that is the stored template if either is."""
    child = child_of(projection)
    argv = prepared(child, backend).argv
    if argv != projection.argv_template and child.tools == default_tools(backend):
        unnamed = prepared(attrs.evolve(child, tools=None), backend).argv
        if unnamed == projection.argv_template:
            return unnamed
    return argv
