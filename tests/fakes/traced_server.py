"""The real server, watched by a profiler that records how calls travel between modules.

Usage: python traced_server.py REPORT-FILE SERVER-ARGS...

On every call of a function of the package, the modules on the call stack are
listed from the bottom up: each module of the package under its own name, each
frame of a library that must stay a leaf (pygls, lsprotocol) under the
library's name, frames of anything else (asyncio, cattrs, the stdlib) left out,
and consecutive frames of one module counted once. No module stands for
another: each is its own stop on the path. Written to REPORT-FILE (JSON) when
the server exits:
- `reentries`: every list in which a module appears twice: it was entered again
  from below, so the call path climbed back up;
- `calledByLibraries`: every list with a leaf library below the called function:
  that library called into the package;
- `entered`: every module of the package one of whose functions was called.
"""

from __future__ import annotations

import json
import sys
import threading
from types import FrameType
from typing import Any, Final

PACKAGE: Final = "subagent_host"
LEAF_LIBRARIES: Final = ("pygls", "lsprotocol")

reentries: set[tuple[str, ...]] = set()
called_by_libraries: set[tuple[str, ...]] = set()
entered: set[str] = set()


def is_ours(module: str) -> bool:
    return module == PACKAGE or module.startswith(PACKAGE + ".")


def listed_as(module: str) -> str | None:
    """The name a frame of `module` is listed under, or None for a frame left out."""
    if is_ours(module):
        return module
    library = module.partition(".")[0]
    return library if library in LEAF_LIBRARIES else None


def modules_on_stack(frame: FrameType | None) -> list[str]:
    names: list[str] = []
    while frame is not None:
        name = listed_as(frame.f_globals.get("__name__", ""))
        if name is not None and (not names or names[-1] != name):
            names.append(name)
        frame = frame.f_back
    return names[::-1]


def profile(frame: FrameType, event: str, _arg: Any) -> None:
    if event != "call" or not is_ours(frame.f_globals.get("__name__", "")):
        return
    stack = modules_on_stack(frame)
    entered.add(stack[-1])
    if len(set(stack)) != len(stack):
        reentries.add(tuple(stack))
    if any(name in LEAF_LIBRARIES for name in stack):
        called_by_libraries.add(tuple(stack))


def main() -> int:
    report, args = sys.argv[1], sys.argv[2:]
    sys.setprofile(profile)
    threading.setprofile(profile)
    from subagent_host import cli

    try:
        return cli.main(args)
    finally:
        sys.setprofile(None)
        found = {
            "reentries": sorted(list(stack) for stack in reentries),
            "calledByLibraries": sorted(list(stack) for stack in called_by_libraries),
            "entered": sorted(entered),
        }
        with open(report, "w", encoding="utf-8") as out:
            json.dump(found, out, indent=1)


if __name__ == "__main__":
    sys.exit(main())
