"""The packages shipped to a Spark cluster's executors are enough to run the shared
backfill's engines with nothing else installed."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from juggler.spark import shipping


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JUGGLER_CACHE", str(tmp_path / "cache"))


def test_an_interpreter_without_site_packages_runs_an_engine_from_the_archive(
        tmp_path: Path) -> None:
    settings = shipping.settings()
    archive, _, directory = settings["spark.archives"].partition("#")
    assert settings["spark.executorEnv.PYTHONPATH"] == directory
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path / directory, filter="data")
    script = ("import sys; sys.path.insert(0, sys.argv[1])\n"
              "import juggler.spark.shared, juggler_native\n"
              "from juggler.offline import make_engine\n"
              "from juggler.engine.events import EngineConfig\n"
              "make_engine('juggler', EngineConfig(allowed_lateness=0))\n"
              "print(juggler_native.__file__)\n")
    # -S: no site-packages, so every import comes from the unpacked archive
    done = subprocess.run([sys.executable, "-S", "-c", script, str(tmp_path / directory)],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(str(tmp_path / directory))


def test_the_archive_leaves_out_what_spark_brings_and_byte_code() -> None:
    with tarfile.open(shipping.packed()) as tar:
        names = tar.getnames()
    assert not [n for n in names if n.startswith(("pyspark/", "py4j/"))]
    assert not [n for n in names if n.endswith(".pyc")]
