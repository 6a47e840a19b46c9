"""The real server, watched by a profiler that records every call stack re-entering a module.

Usage: python traced_server.py REPORT-FILE SERVER-ARGS...

On every call of a function of the package, the modules of the package on the
call stack are listed from the bottom up (frames of other packages — asyncio,
pygls — are left out, and consecutive frames of one module count once). A
module that appears twice in that list was entered again from below: the call
path climbed back up. Every such list is written to REPORT-FILE (JSON) when the
server exits.

`rpc/pygls_hooks.py` counts as `rpc/dispatch.py`: it is the base class that
confines pygls's internals, and pygls calling the protocol's overrides is one
object's own round trip through its library, not a climb between layers.
"""

from __future__ import annotations

import json
import sys
import threading
from types import FrameType
from typing import Any, Final

PACKAGE: Final = "subagent_host"
SAME_MODULE: Final = {"subagent_host.rpc.pygls_hooks": "subagent_host.rpc.dispatch"}

reentries: set[tuple[str, ...]] = set()


def modules_on_stack(frame: FrameType | None) -> list[str]:
    names: list[str] = []
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if name.startswith(PACKAGE):
            name = SAME_MODULE.get(name, name)
            if not names or names[-1] != name:
                names.append(name)
        frame = frame.f_back
    return names[::-1]


def profile(frame: FrameType, event: str, _arg: Any) -> None:
    if event != "call" or not frame.f_globals.get("__name__", "").startswith(PACKAGE):
        return
    stack = modules_on_stack(frame)
    if len(set(stack)) != len(stack):
        reentries.add(tuple(stack))


def main() -> int:
    report, args = sys.argv[1], sys.argv[2:]
    sys.setprofile(profile)
    threading.setprofile(profile)
    from subagent_host import cli

    try:
        return cli.main(args)
    finally:
        sys.setprofile(None)
        with open(report, "w", encoding="utf-8") as out:
            json.dump(sorted(list(stack) for stack in reentries), out, indent=1)


if __name__ == "__main__":
    sys.exit(main())
