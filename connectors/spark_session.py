"""The one Spark session factory: a classic local/cluster session, or a Spark Connect client.

A classic SparkSession is expensive (~10 s of JVM start) and its static config is fixed by the first
one in a process, so this returns the active session when there is one and builds it only once.
With a Spark Connect `remote` (sc://host:port) the engine is already warm: the session is a thin
gRPC client, made in well under a second. Connector code uses only DataFrame APIs that both modes
support (mapInArrow, createDataFrame, the Kafka source), so it runs unchanged in either.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

# Static settings of every engine we start, classic or the local Spark Connect server.
ENGINE_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    # Small Arrow batches keep an executor's memory flat however large the micro-batch is.
    "spark.sql.execution.arrow.maxRecordsPerBatch": "2000",
    "spark.python.worker.reuse": "true",
}


def get_spark_session(
    jars: list[str],
    master: str = "local[*]",
    log4j2_config: str | None = None,
    app_name: str = "kafka-pubsub-bridge",
    extra_conf: dict[str, str] | None = None,
    remote: str | None = None,
) -> SparkSession:
    if remote:
        # The server has the jars and static settings; a client only names it.
        return SparkSession.builder.remote(remote).getOrCreate()
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    # Executors' Python workers must import this project and reach loopback servers.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    java_options = f"-Dlog4j2.configurationFile={log4j2_config}" if log4j2_config else ""
    builder = (
        SparkSession.builder.appName(app_name)
        .master(master)
        .config("spark.jars", ",".join(jars))
        .config("spark.driver.extraJavaOptions", java_options)
        .config("spark.executor.extraJavaOptions", java_options)
    )
    for key, value in {**ENGINE_CONF, **(extra_conf or {})}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def start_python_workers(spark: SparkSession) -> None:
    """Run a tiny Arrow job so Spark's Python workers are up before anything is measured."""
    spark.range(0, 4, 1, 2).mapInArrow(_pass_through, "id long").collect()


def _pass_through(batches):
    # Lives here, not in the caller: a Spark Connect server's workers import it by module name.
    yield from batches
