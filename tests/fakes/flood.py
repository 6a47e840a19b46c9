"""Write N megabytes to stdout as fast as possible, then exit 0. Usage: flood.py N"""

from __future__ import annotations

import sys

CHUNK = b"x" * 1023 + b"\n"

for _ in range(int(sys.argv[1]) * 1024):
    sys.stdout.buffer.write(CHUNK)
sys.stdout.buffer.flush()
