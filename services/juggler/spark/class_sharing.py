"""Class data sharing (CDS) for the local Spark JVM: the classes a session loads,
kept in an archive that later JVMs map instead of loading and verifying them again.

Why: a local session's JVM spends most of its start, and most of its first job's
planning, loading Spark's classes (thousands of them); mapped from an archive, both
take about half as long (docs/spark.md, docs/benchmarks.md "Spark backfill"). The JDK
writes such an archive when a JVM started with `-XX:ArchiveClassesAtExit` exits (JDK
13 and later; JDK 19 can do it by itself, but Debian's is 17), so the first local
session of an installation writes it, seconds at its process's exit, and every later
one maps it.

The archive is named by a hash of what CDS checks it against: the JVM and the jars on
Spark's classpath. A JVM that still finds it does not match ignores it: sharing is
`-Xshare:auto` (the default), and CDS's own log lines are off, as they would go to
the command's stdout. Each writer dumps to a file of its own and renames it into place
once its JVM has exited, so concurrent first sessions (parallel test runs) cannot
leave a torn archive.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from juggler.maven import cache_root

QUIET = "-Xlog:cds*=off"
"""CDS's log lines (a writer warns about every class it cannot archive) switched off."""
EXIT_WAIT = 120.0
"""Seconds the writing process waits, at its exit, for its JVM to write the archive."""
KEPT = 3
"""Archives kept (the most recently used): each installation (a checkout's virtual
environment, a CI clone at a new path) has its own, of about 180 MB."""


def java_options(spark_home: Path) -> str:
    """The JVM options of a local session whose Spark is at `spark_home`: map the
    archive, or, if there is none yet, write one when the JVM exits (`finish`)."""
    archive = _archive(spark_home)
    if archive.exists():
        os.utime(archive)  # used: `_remove_unused` keeps the most recently used
        return f"-XX:SharedArchiveFile={archive} {QUIET}"
    archive.parent.mkdir(parents=True, exist_ok=True)
    _remove_abandoned(archive.parent)
    partial = archive.with_name(f"{archive.stem}.{os.getpid()}.partial")
    atexit.register(finish, partial, archive)
    return f"-XX:ArchiveClassesAtExit={partial} {QUIET}"


def finish(partial: Path, archive: Path) -> None:
    """At the process's exit: end the session's JVM (it exits when its stdin closes,
    writing the archive first) and put the archive in place if it wrote one."""
    from pyspark import SparkContext

    gateway: Any = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if proc is None:
        return
    sys.stderr.write("juggler: writing the Spark JVM's class archive for faster starts "
                     "(once per installation) ...\n")
    try:
        if SparkContext._active_spark_context is not None:
            SparkContext._active_spark_context.stop()
        if proc.stdin is not None:
            proc.stdin.close()
        written = proc.wait(EXIT_WAIT) == 0 and partial.exists()
    except Exception:  # noqa: BLE001 - at exit, a failed dump only costs later starts
        written = False
    if written:
        os.replace(partial, archive)
        _remove_unused(archive.parent)
    else:
        partial.unlink(missing_ok=True)


def _archive(spark_home: Path) -> Path:
    """The archive for this JVM (Spark's: `JAVA_HOME`'s, else the `java` on PATH) and
    these jars."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    digest = hashlib.sha256(f"{os.path.realpath(java) if java else None}\n".encode())
    for jar in sorted((spark_home / "jars").glob("*.jar")):  # by path, as CDS checks
        stat = jar.stat()
        digest.update(f"{jar.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return cache_root() / "spark-classes" / f"{digest.hexdigest()[:16]}.jsa"


def _remove_abandoned(directory: Path) -> None:
    """Partial archives whose writer is gone (killed before its exit)."""
    for partial in directory.glob("*.partial"):
        try:
            os.kill(int(partial.suffixes[-2].lstrip(".")), 0)
        except (ProcessLookupError, ValueError, IndexError):
            partial.unlink(missing_ok=True)
        except PermissionError:  # another user's live process
            pass


def _remove_unused(directory: Path) -> None:
    """All but the `KEPT` most recently used archives (a JVM mapping one keeps its
    mapping when the file goes)."""
    def used(archive: Path) -> float:
        try:
            return archive.stat().st_mtime
        except FileNotFoundError:  # removed by another process meanwhile
            return 0.0

    for stale in sorted(directory.glob("*.jsa"), key=used, reverse=True)[KEPT:]:
        stale.unlink(missing_ok=True)
