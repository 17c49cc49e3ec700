"""The juggler package, its native operator and their dependencies, packed for the
executors of a Spark cluster.

Why a packed directory and not a wheel on `--py-files`: `--py-files` puts zips on the
executors' `sys.path`, and Python cannot import an extension module from a zip (the
native operator, fastavro's and confluent-kafka's compiled modules). So the installed
packages are packed as a directory tree (a `.tar.gz`) that `spark.archives` unpacks in
each executor's working directory, and `spark.executorEnv.PYTHONPATH` names it. The
executors' interpreter (`PYSPARK_PYTHON`) needs nothing installed: the tree holds the
packages and Spark adds its own pyspark. It must be the driver's Python version on
the driver's platform, since the compiled modules are the driver's.

The archive is built once per set of installed files (a hash of their names, sizes
and modification times names it) in the project's cache, as the connector jars are.
"""

from __future__ import annotations

import hashlib
import re
import sys
import tarfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

from juggler.maven import cache_root

ROOTS = ("juggler", "juggler-native")
"""The distributions the executors import, with their requirements."""

FROM_SPARK = frozenset({"pyspark", "py4j"})
"""Put on the executors' path by Spark itself (its pyspark.zip and py4j's)."""

UNPACKED = "juggler-packages"
"""The archive's directory in each executor's working directory."""

_NAME = re.compile(r"[A-Za-z0-9._-]+")


def settings() -> dict[str, str]:
    """The session settings that ship the packages to a cluster's executors."""
    archive = packed()
    return {"spark.archives": f"{archive}#{UNPACKED}",
            "spark.executorEnv.PYTHONPATH": UNPACKED}


def packed() -> Path:
    """The packages' archive in the cache, built if these installed files have none."""
    files = sorted(set(installed_files()))
    digest = hashlib.sha256()
    for name, path in files:
        stat = path.stat()
        digest.update(f"{name}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    version = f"py{sys.version_info.major}{sys.version_info.minor}"
    target = cache_root() / "spark-packages" / f"{version}-{digest.hexdigest()[:16]}.tar.gz"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".partial")
        with tarfile.open(partial, "w:gz", compresslevel=1) as tar:
            for name, path in files:
                tar.add(path, arcname=name, recursive=False)
        partial.replace(target)
    return target


def installed_files() -> Iterator[tuple[str, Path]]:
    """(path in the archive, installed file) for every module file the executors may
    import: the juggler package's own tree (an editable install records none of it)
    and every other distribution's recorded files, byte code left out."""
    import juggler

    package = Path(juggler.__file__).parent
    for path in package.rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            yield f"juggler/{path.relative_to(package).as_posix()}", path
    for dist in _closure():
        if dist.metadata["Name"] == "juggler":
            continue
        root = Path(str(dist.locate_file(""))).resolve()
        for recorded in dist.files or ():
            path = Path(str(dist.locate_file(recorded))).resolve()
            if (path.is_file() and path.is_relative_to(root) and path.suffix != ".pyc"
                    and path.suffix != ".pth"):
                yield path.relative_to(root).as_posix(), path


def _closure() -> Iterator[metadata.Distribution]:
    """ROOTS and their installed requirements, transitively, except extras' and
    Spark's own: a requirement that is not installed is not needed here either."""
    seen: set[str] = set()
    todo = list(ROOTS)
    while todo:
        name = _canonical(todo.pop())
        if name in seen or name in FROM_SPARK:
            continue
        seen.add(name)
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        yield dist
        for requirement in dist.requires or ():
            marker = requirement.partition(";")[2]
            match = _NAME.match(requirement.strip())
            if match and "extra" not in marker:
                todo.append(match.group())


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()
