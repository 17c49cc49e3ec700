"""The Spark JVM's class archive (`juggler.spark.class_sharing`) without a JVM: which
archive a JVM and a set of jars get, and what an interrupted writer leaves behind.
A real JVM writing and mapping one: tests/integration/test_spark_jvm_class_archive.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from juggler.spark import class_sharing


@pytest.fixture()
def spark_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("JUGGLER_CACHE", str(tmp_path / "cache"))
    home = tmp_path / "spark"
    (home / "jars").mkdir(parents=True)
    for name in ("spark-core.jar", "spark-sql.jar"):
        (home / "jars" / name).write_bytes(b"classes")
    return home


def test_another_jar_or_another_java_is_another_archive(
        spark_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = class_sharing._archive(spark_home)
    assert first.parent == tmp_path / "cache" / "spark-classes"
    assert class_sharing._archive(spark_home) == first  # the same installation
    (spark_home / "jars" / "spark-sql.jar").write_bytes(b"other classes")
    second = class_sharing._archive(spark_home)
    assert second != first
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "another-jdk"))
    assert class_sharing._archive(spark_home) not in (first, second)


def test_a_writer_that_died_leaves_no_partial_archive(spark_home: Path) -> None:
    archive = class_sharing._archive(spark_home)
    archive.parent.mkdir(parents=True)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    abandoned = archive.with_name(f"{archive.stem}.{dead}.partial")
    writing = archive.with_name(f"{archive.stem}.{os.getpid()}.partial")
    abandoned.write_bytes(b"torn")
    writing.write_bytes(b"being written")
    class_sharing._remove_abandoned(archive.parent)
    assert not abandoned.exists()
    assert writing.exists()  # its writer (this process) is alive


def test_only_the_most_recently_used_archives_are_kept(tmp_path: Path) -> None:
    for age, name in enumerate(["newest", "newer", "older", "oldest"]):
        archive = tmp_path / f"{name}.jsa"
        archive.write_bytes(b"classes")
        os.utime(archive, (1_000_000 - age, 1_000_000 - age))
    class_sharing._remove_unused(tmp_path)
    assert sorted(p.stem for p in tmp_path.iterdir()) == ["newer", "newest", "older"]
