"""One log format for the worker and the process it starts for the results index, so
their lines interleave readably in one stream."""

from __future__ import annotations

import logging
import sys


def log_to_stderr(level: str) -> None:
    logging.basicConfig(level=level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
