"""One local (or cluster) SparkSession with the connectors on its classpath.

Why a module: starting a session costs tens of seconds on a small machine, so the
CLI, the tests and the benchmark all take theirs from `spark_session`, which reuses a
running session (`getOrCreate`) and configures it the same way everywhere.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from juggler.spark import class_sharing, shipping
from juggler.spark.connectors import connector_jars

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MASTER_ENV = "JUGGLER_SPARK_MASTER"
"""The Spark master URL (default `local[*]`); e.g. `spark://host:7077` in production."""
PYTHON_WORK_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"
"""The local JVM's (driver and executor in one) JIT compiler for a job whose work is in
its Python workers (the shared backfill): C1 only. A command's JVM lives for one job,
and C2's compiler threads took the cores the workers needed. A job whose work is the
JVM's (the per-query reference: a Spark SQL join) was slower with C1 only, so it keeps
the JVM's defaults, as a cluster's executors do (docs/benchmarks.md, "Spark
backfill")."""


def spark_session(app_name: str = "juggler", *, ui: bool = False,
                  python_work: bool = False) -> SparkSession:
    """The process's SparkSession, created with the connector jars on first call.

    Local mode's Python workers (the engines of the shared backfill, the reference's
    exact checks) run this interpreter unless `PYSPARK_PYTHON` says otherwise: pyspark's
    default, a `python3` from PATH, need not have juggler installed. On a cluster the
    session ships juggler, its native operator and their dependencies to the executors
    (`juggler.spark.shipping`), whose Python is `PYSPARK_PYTHON` or the executors'
    `python3`. Shuffles use few partitions: the jobs' data is keyed by entity and the
    local default of 200 partitions only adds scheduling overhead. With `python_work`
    a local JVM compiles with C1 only (`PYTHON_WORK_JAVA_OPTIONS`; the first call of a
    process decides, as for every setting). A local JVM shares its classes through an
    archive that the first one writes (`juggler.spark.class_sharing`). The UI is on only
    with `ui` (the CLI's jobs print its address; tests and benchmarks need no web
    server).
    """
    import pyspark
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    master = os.environ.get(MASTER_ENV, "local[*]")
    local = master == "local" or master.startswith("local[")
    if local:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    jars = ",".join(str(jar) for jar in connector_jars())
    builder = (SparkSession.builder.appName(app_name)
               .master(master)
               .config("spark.jars", jars)
               .config("spark.ui.enabled", "true" if ui else "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "8")
               .config("spark.sql.session.timeZone", "UTC"))
    settings: dict[str, str] = {}
    if not local:
        settings = shipping.settings()
    elif SparkContext._gateway is None:  # this call starts the JVM: its options
        options = class_sharing.java_options(Path(pyspark.__file__).parent)
        if python_work:
            options = f"{PYTHON_WORK_JAVA_OPTIONS} {options}"
        settings = {"spark.driver.extraJavaOptions": options}
    for key, value in settings.items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
