"""Spark's Kafka source/sink and Avro functions, fetched from Maven Central once.

Why: `format("kafka")` and `from_avro`/`to_avro` are not part of the pyspark wheel;
`spark.jars.packages` would resolve them with Ivy at every session start, and from
wherever Ivy is configured to look. The project fetches them once with Maven (the same
way as the Kafka broker, `juggler.maven`) into ``$JUGGLER_CACHE/spark-connectors-<v>``
and hands the jars to the session (`spark.jars`).

Versions: the connectors should match the installed pyspark, but Maven Central does
not hold a complete set for every release. For pyspark 4.3.0, `spark-sql-kafka-0-10`
4.3.0 and `spark-avro` 4.3.0 are missing (HTTP 404), and 4.0.0 is the newest release
whose three artifacts (`spark-sql-kafka-0-10`, `spark-token-provider-kafka-0-10`,
`spark-avro`) all resolve (checked 2026-11-21). `CONNECTORS` pins that choice per pyspark
minor version; the integration tests run the jobs against the real broker with it.
Jars that pyspark already ships (Scala, Hadoop client, slf4j...) are left out, so
pyspark's own versions are the only ones on the classpath.
"""

from __future__ import annotations

import re
from pathlib import Path

from juggler import maven

POM = Path(__file__).with_name("pom.xml")
SCALA_BINARY = "2.13"

CONNECTORS: dict[str, str] = {"4.3": "4.0.0"}
"""pyspark `major.minor` -> the connector release fetched for it (see the module doc);
any other pyspark uses connectors of its own version."""

_VERSIONED_JAR = re.compile(r"(.+?)-\d[\w.\-]*\.jar\Z")


def pyspark_version() -> str:
    import pyspark

    return pyspark.__version__


def connector_version(pyspark: str) -> str:
    minor = ".".join(pyspark.split(".")[:2])
    return CONNECTORS.get(minor, pyspark)


def connector_jars() -> list[Path]:
    """The jars to give `spark.jars`: fetched on first use, minus what pyspark ships."""
    version = connector_version(pyspark_version())
    libs = maven.fetch(
        POM, maven.cache_root() / f"spark-connectors-{version}" / "libs",
        {"kafka.connector.version": version, "avro.connector.version": version,
         "scala.binary.version": SCALA_BINARY},
        expect=f"spark-sql-kafka-0-10_{SCALA_BINARY}-{version}.jar",
        what=f"Spark's Kafka and Avro connectors {version}")
    shipped = {_artifact(jar) for jar in _pyspark_jars()}
    return [jar for jar in maven.jars(libs) if _artifact(jar) not in shipped]


def _pyspark_jars() -> list[Path]:
    import pyspark

    return sorted((Path(pyspark.__file__).parent / "jars").glob("*.jar"))


def _artifact(jar: Path) -> str:
    """`kafka-clients-3.9.0.jar` -> `kafka-clients`: the name without its version."""
    match = _VERSIONED_JAR.match(jar.name)
    return match.group(1) if match else jar.name
