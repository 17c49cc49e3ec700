"""One local (or cluster) SparkSession with the connectors on its classpath.

Why a module: starting a session costs tens of seconds on a small machine, so the
CLI, the tests and the benchmark all take theirs from `spark_session`, which reuses a
running session (`getOrCreate`) and configures it the same way everywhere.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from juggler.spark.connectors import connector_jars

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MASTER_ENV = "JUGGLER_SPARK_MASTER"
"""The Spark master URL (default `local[*]`); e.g. `spark://host:7077` in production."""


def spark_session(app_name: str = "juggler", *, ui: bool = False) -> SparkSession:
    """The process's SparkSession, created with the connector jars on first call.

    Python workers (backfill's exact checks) run this interpreter unless
    `PYSPARK_PYTHON` says otherwise; on a cluster the executors need the juggler
    package installed too. Shuffles use few partitions: the jobs' data is keyed by entity and the local
    default of 200 partitions only adds scheduling overhead. The UI is on only with `ui`
    (the CLI's jobs print its address; tests and benchmarks need no web server).
    Executors import juggler and its native operator: on a cluster, ship them a packed
    environment (docs/spark.md, "On a cluster").
    """
    from pyspark.sql import SparkSession

    # pyspark starts UDF workers with $PYSPARK_PYTHON, else a `python3` from PATH
    # that need not have juggler installed
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    jars = ",".join(str(jar) for jar in connector_jars())
    builder = (SparkSession.builder.appName(app_name)
               .master(os.environ.get(MASTER_ENV, "local[*]"))
               .config("spark.jars", jars)
               .config("spark.ui.enabled", "true" if ui else "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "8")
               .config("spark.sql.session.timeZone", "UTC"))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
