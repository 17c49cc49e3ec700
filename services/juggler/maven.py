"""Resolve jars from Maven Central into the project's cache, once.

Why one module: the local Kafka broker (`juggler.kafka.broker`) and the Spark jobs'
connectors (`juggler.spark.connectors`) both need jars from Maven Central, and neither
may depend on anything but Maven and the network it reaches. Each ships a small
`pom.xml` that lists what it needs; `fetch` runs
`mvn dependency:copy-dependencies` on it into a cache directory, so the transitive
closure is Maven's own, not a hand-kept list.

Environment: ``JUGGLER_CACHE`` is the cache root (default ``~/.cache/juggler``).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

COMPLETE_MARKER = ".complete"
CENTRAL = "https://repo.maven.apache.org/maven2"

_SETTINGS = f"""<settings xmlns="http://maven.apache.org/SETTINGS/1.0.0">
  <mirrors>
    <mirror>
      <id>central-only</id>
      <mirrorOf>*</mirrorOf>
      <url>{CENTRAL}</url>
    </mirror>
  </mirrors>
</settings>
"""
"""Every repository a pom names is read from Maven Central. Spark's parent pom lists a
Google Cloud mirror first; an unreachable host there is a hard failure for Maven rather
than a miss, so the mirror entry sends those requests to Central instead."""


class MavenError(RuntimeError):
    """Maven is missing or could not resolve the jars; str() carries Maven's output."""


def cache_root() -> Path:
    """Where fetched jars live; ``JUGGLER_CACHE`` overrides ``~/.cache/juggler``."""
    env = os.environ.get("JUGGLER_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "juggler"


def fetch(pom: Path, libs: Path, properties: Mapping[str, str], *, expect: str,
          what: str) -> Path:
    """Copy the runtime dependencies of `pom` (with `-Dname=value` for each of
    `properties`) into `libs` once; return `libs`.

    Idempotent: a ``.complete`` marker is written only after Maven succeeded and
    `expect` (a glob) matched a jar, and a file lock keeps two processes (parallel test
    sessions) from fetching at once. Jars are copied into a temporary sibling first and
    renamed into place, so a killed fetch never leaves a half-filled dir that looks
    usable.
    """
    if (libs / COMPLETE_MARKER).exists():
        return libs
    if shutil.which("mvn") is None:
        raise MavenError(f"`mvn` (Maven) is needed to fetch the jars of {what} "
                         f"(bin/setup installs it)")
    if not pom.exists():
        raise MavenError(f"missing {pom}; it must be shipped with the package")
    libs.parent.mkdir(parents=True, exist_ok=True)
    with open(libs.parent / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (libs / COMPLETE_MARKER).exists():  # another process finished meanwhile
            return libs
        staging = Path(tempfile.mkdtemp(prefix=f"{libs.name}-", dir=libs.parent))
        try:
            settings = staging / "settings.xml"
            settings.write_text(_SETTINGS)
            cmd = ["mvn", "-q", "-B", "-U", "-s", str(settings), "-f", str(pom),
                   "dependency:copy-dependencies",
                   *(f"-D{name}={value}" for name, value in properties.items()),
                   f"-DoutputDirectory={staging}"]
            proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
            if proc.returncode != 0:
                raise MavenError(f"fetching {what} with Maven failed:\n{proc.stdout}\n"
                                 f"{proc.stderr}")
            if not any(staging.glob(expect)):
                raise MavenError(f"Maven ran but {expect} is missing in {staging}")
            settings.unlink()
            (staging / COMPLETE_MARKER).write_text(" ".join(properties.values()) + "\n")
            shutil.rmtree(libs, ignore_errors=True)
            staging.rename(libs)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return libs


def jars(libs: Path) -> list[Path]:
    """The jars of a fetched directory, sorted (a stable classpath order)."""
    return sorted(libs.glob("*.jar"))
