"""Logging setup: stderr or `--log-file`, never stdout (stdout is the wire)."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Final

LOG_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_logging(level: str, log_file: Path | None) -> None:
    """Send every log record at `level` or above to `log_file`, or to stderr."""
    handler: logging.Handler
    if log_file is not None:
        handler = logging.FileHandler(log_file, encoding="utf-8")
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # pygls logs again what we already answered and logged; keep its detail for debugging.
    if level != "DEBUG":
        logging.getLogger("pygls").setLevel(max(logging.getLevelName(level), logging.ERROR))
