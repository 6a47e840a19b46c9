"""Hand memory freed by a big run back to the OS.

CPython frees a finished run's events to the C allocator, which keeps them in
its heap for reuse: after a run that streamed megabytes the process would stay
that much bigger. glibc's `malloc_trim` returns the free pages; elsewhere this
does nothing.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from typing import Final

# Trimming walks the allocator's free lists: worth it only after this much was freed.
TRIM_AFTER_BYTES: Final = 1024 * 1024


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    # The symbols the interpreter already has (libc among them): no library search,
    # which would run `ldconfig` in a subprocess and block the loop.
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):  # not glibc
        return None
    return trim


def trim_heap(freed_bytes: int) -> None:
    """Return free heap pages to the OS if `freed_bytes` were just released."""
    trim = _malloc_trim()
    if trim is not None and freed_bytes >= TRIM_AFTER_BYTES:
        trim(0)
