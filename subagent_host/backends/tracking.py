"""How the supervisor knows every process a child started: chosen once, at start.

Three modes, best first (protocol.md §8.3):

- `cgroup`: each child runs in a cgroup of its own (cgroups.py), placed there
  before it can fork. Nothing it starts can leave, whatever it does to its
  session, parentage or environment; the cgroup outlives a server crash, and
  the next server on any state directory ends what is left in it.
- `subreaper`: the server is a child subreaper (Linux `PR_SET_CHILD_SUBREAPER`):
  orphans of a child's tree are reparented to it, found by the run marker in
  their environment, and an adopted process that belongs to no live child (it
  cleared its environment) is ended as well.
- `marker`: only the run marker (`SUBAGENT_HOST_RUN_ID`) in the environment,
  searched for in the whole process table.

The marker scan of recovery (store/recovery.py) runs in every mode as a last resort.
"""

from __future__ import annotations

import ctypes
import itertools
import logging
import os
import re
import sys
from typing import Final

import attrs

from subagent_host.backends import cgroups
from subagent_host.backends.cgroups import Group, Hierarchy

# `ping` reports the mode in force, so it is declared with the values the wire may import.
from subagent_host.values.choices import TrackingMode as TrackingMode

logger = logging.getLogger(__name__)

PR_SET_CHILD_SUBREAPER: Final = 36
AUTO: Final = "auto"
# A child's cgroup name: "<sequence>-<caller's name>", the name cut to keep it short.
CGROUP_NAME_CHARS: Final = 120
_UNSAFE_NAME: Final = re.compile(r"[^A-Za-z0-9._-]")
# Unique within this process, whichever Supervisor starts the child (tests make several).
_sequence = itertools.count(1)


CHOICES: Final = (AUTO, *(mode.value for mode in TrackingMode))


class TrackingUnavailable(Exception):
    """A forced tracking mode cannot work on this host; the message says why."""


def set_subreaper(on: bool) -> bool:
    """Make this process the reaper of its descendants' orphans, or stop being it (Linux)."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) != 0:
        logger.warning("cannot set the child subreaper flag: errno %d", ctypes.get_errno())
        return False
    return True


@attrs.define
class Tracking:
    """The mode in force, and this server's cgroup when it is `cgroup`."""

    mode: TrackingMode
    hierarchy: Hierarchy | None = None
    """The host's writable cgroup v2 hierarchy, if any: instances of gone servers are
    swept from it whatever the mode."""
    instance: Group | None = None
    """This server process's cgroup (cgroup mode only; kept after a fall back)."""
    is_subreaper: bool = False
    home: Group | None = None
    """The cgroup the server lives in, when it may step from there into a child's cgroup
    to fork the child inside (cgroup mode; cgroups.home_for); None: the trampoline."""

    def place(self, name: str) -> Group | None:
        """A new cgroup for one child (cgroup mode), None otherwise.

        Raises OSError if it cannot be created.
        """
        if self.instance is None or self.mode is not TrackingMode.CGROUP:
            return None
        safe = _UNSAFE_NAME.sub("_", name)[:CGROUP_NAME_CHARS] or "child"
        return self.instance.child(f"{next(_sequence)}-{safe}")

    def fall_back(self) -> TrackingMode:
        """Track later children without cgroups (one could not be made); return the mode
        now in force. Children already in a cgroup keep it."""
        self.mode = TrackingMode.SUBREAPER if self.is_subreaper else TrackingMode.MARKER
        self.home = None  # the instance stays: `close` removes what it holds
        return self.mode

    def close(self) -> None:
        """Remove this server's cgroups that are empty (all of them once its runs ended)."""
        if self.instance is None:
            return
        for group in self.instance.children():
            if not group.remove():
                logger.warning("cgroup %s still has processes; a later server ends them", group)
        self.instance.remove()


def choose(requested: str = AUTO) -> Tracking:
    """The tracking mode to use: `requested`, or with `auto` the best this host allows.

    Raises TrackingUnavailable when a forced mode cannot work here.
    """
    hierarchy = cgroups.find_hierarchy() if sys.platform.startswith("linux") else None
    if requested == AUTO:
        if hierarchy is not None:
            requested = TrackingMode.CGROUP.value
        elif sys.platform.startswith("linux"):
            requested = TrackingMode.SUBREAPER.value
        else:
            requested = TrackingMode.MARKER.value
    mode = TrackingMode(requested)
    if mode is TrackingMode.CGROUP:
        if hierarchy is None:
            raise TrackingUnavailable(
                "process tracking 'cgroup' is unavailable: no writable cgroup v2 hierarchy "
                "(looked for a cgroup2 mount where this user can create cgroups)"
            )
        ticks = cgroups.start_ticks(os.getpid())
        assert ticks is not None  # our own stat
        try:
            instance = hierarchy.instance(os.getpid(), ticks)
        except OSError as exc:
            raise TrackingUnavailable(
                f"process tracking 'cgroup' is unavailable: cannot create a cgroup ({exc})"
            ) from None
        return Tracking(
            mode,
            hierarchy,
            instance,
            is_subreaper=set_subreaper(True),
            home=cgroups.home_for(hierarchy, instance),
        )
    if mode is TrackingMode.SUBREAPER:
        if not set_subreaper(True):
            raise TrackingUnavailable(
                "process tracking 'subreaper' is unavailable: this host has no child "
                "subreaper (Linux prctl PR_SET_CHILD_SUBREAPER)"
            )
        return Tracking(mode, hierarchy, is_subreaper=True)
    set_subreaper(False)  # the marker alone: orphans go wherever the system sends them
    return Tracking(mode, hierarchy)
