"""The one Spark session factory.

A SparkSession is expensive (~10 s of JVM start) and its static config is fixed by the first one in
a process, so this returns the active session when there is one and builds it only once.
"""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession


def get_spark_session(
    jars: list[str],
    master: str = "local[*]",
    log4j2_config: str | None = None,
    app_name: str = "kafka-pubsub-bridge",
    extra_conf: dict[str, str] | None = None,
) -> SparkSession:
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
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.extraJavaOptions", java_options)
        .config("spark.executor.extraJavaOptions", java_options)
        .config("spark.sql.shuffle.partitions", "4")
        # Small Arrow batches keep an executor's memory flat however large the micro-batch is.
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "2000")
        .config("spark.python.worker.reuse", "true")
    )
    for key, value in (extra_conf or {}).items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
