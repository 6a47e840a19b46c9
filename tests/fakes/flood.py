"""Write N megabytes to stdout as fast as possible, then exit 0. Usage: flood.py N"""

from __future__ import annotations

import sys

# Lines of 1 KiB broken by spaces: a long run of letters would be redacted (protocol.md §12.1).
CHUNK = b"x " * 511 + b"x\n"

for _ in range(int(sys.argv[1]) * 1024):
    sys.stdout.buffer.write(CHUNK)
sys.stdout.buffer.flush()
