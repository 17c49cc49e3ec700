"""Esper (EsperTech, from Maven Central) as a peer: run `EsperPeer.java` on the event files.

Why a JVM subprocess and not a Python binding: Esper is a Java library; the fair way to
time it is in its own JVM, with the events already in memory and the external clock
driven by the events' `ts`, as an Esper user would run a replay. The jars are fetched
once with Maven (`juggler.maven`, like the Kafka broker's), and `EsperPeer.java` is
compiled with `javac` once per version of its source into the same cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from bench.peers.epl import statement
from bench.peers.files import EventFiles
from juggler import maven
from juggler.language import Query

VERSION = "9.0.0"
HERE = Path(__file__).resolve().parent
SOURCE = HERE / "EsperPeer.java"


def libs() -> Path:
    """Esper's jars and their dependencies, fetched from Maven Central on first use."""
    return maven.fetch(HERE / "pom.xml", maven.cache_root() / f"esper-{VERSION}",
                       {"esper.version": VERSION}, expect="esper-runtime-*.jar",
                       what=f"Esper {VERSION}")


def classes(jars: Path) -> Path:
    """`EsperPeer.class`, compiled once per content of the source."""
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:12]
    out = jars.parent / f"esper-peer-{digest}"
    if (out / "EsperPeer.class").exists():
        return out
    if shutil.which("javac") is None:
        raise RuntimeError("`javac` (a JDK, 17 or later) is needed to run the Esper peer")
    staging = Path(tempfile.mkdtemp(prefix="esper-peer-", dir=jars.parent))
    try:
        subprocess.run(["javac", "-nowarn", "-cp", f"{jars}/*", "-d", str(staging), str(SOURCE)],
                       check=True, capture_output=True, text=True)
        staging.rename(out)
    except subprocess.CalledProcessError as e:
        raise RuntimeError(f"javac failed on {SOURCE}:\n{e.stderr}") from e
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return out


def run(files: EventFiles, queries: list[Query], work: Path, timeout: float) -> dict:
    """Run every query in one Esper runtime over `files`; the measurements, with
    "results_file" naming the results (query id TAB positions in FROM order)."""
    jars = libs()
    compiled = classes(jars)
    epl = work / "queries.epl"
    epl.write_text("".join(f"{q.id}\t{statement(q)}\n" for q in queries))
    out = work / "esper-results.tsv"
    cmd = ["java", "-cp", f"{jars}/*{os.pathsep}{compiled}", "EsperPeer",
           str(files.directory), str(epl), str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"Esper peer failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(lines[-1]) | {"results_file": str(out)}
