"""The local Spark JVM's class archive with real JVMs: the first session of an
installation writes it at its process's exit, and the next session's JVM maps it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

SESSION = """
from pyspark import SparkContext
from juggler.spark.session import spark_session
spark = spark_session()
assert spark.range(3).count() == 3
print(Path(f"/proc/{SparkContext._gateway.proc.pid}/maps").read_text())
"""


def run_session(cache: Path) -> str:
    """A session in a process of its own (a JVM's options are fixed at its start):
    the memory map of its JVM."""
    env = {**os.environ, "JUGGLER_CACHE": str(cache), "JUGGLER_SPARK_MASTER": "local[1]"}
    return subprocess.run([sys.executable, "-c", "from pathlib import Path\n" + SESSION],
                          env=env, capture_output=True, text=True, check=True,
                          timeout=300).stdout


def test_the_first_session_writes_the_archive_and_the_next_maps_it(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = run_session(cache)
    written = list((cache / "spark-classes").iterdir())
    assert [p.suffix for p in written] == [".jsa"], written  # no partial file left
    assert str(written[0]) not in first
    assert str(written[0]) in run_session(cache)
