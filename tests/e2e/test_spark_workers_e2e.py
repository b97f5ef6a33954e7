"""Spark's Python workers run without Spark's archives on sys.path (connectors/spark_worker_daemon.py),
on the classic engine and on the warm Spark Connect server, and import pyspark from site-packages; the classic
engine's JVM starts in a process group of its own."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.e2e
SCHEMA = "pyspark string, archives string"


# Defined in the script that runs it, so cloudpickle sends it by value: the Spark Connect server's workers
# can import the connectors package but not these tests.
WORKER_IMPORTS = """
def worker_imports(batches):
    import json, sys, pyarrow as pa, pyspark
    from connectors.spark_worker_daemon import is_spark_archive
    for _ in batches:
        pass
    yield pa.RecordBatch.from_pydict({"pyspark": [pyspark.__file__],
                                      "archives": [json.dumps([e for e in sys.path if is_spark_archive(e)])]})
"""


def check(rows) -> None:
    assert len(rows) == 2
    for row in rows:
        assert "/site-packages/pyspark/" in row["pyspark"], row["pyspark"]
        assert json.loads(row["archives"]) == []


def test_classic_workers(spark):
    namespace: dict = {}
    exec(WORKER_IMPORTS, namespace)
    check(spark.range(0, 2, 1, 2).mapInArrow(namespace["worker_imports"], SCHEMA).collect())


def test_warm_engine_workers(spark_remote):
    # Its own process: a Spark Connect client switches its whole process to remote mode.
    script = WORKER_IMPORTS + (
        "import json, sys\nfrom pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.remote(sys.argv[1]).getOrCreate()\n"
        f"rows = spark.range(0, 2, 1, 2).mapInArrow(worker_imports, {SCHEMA!r}).collect()\n"
        "print(json.dumps([r.asDict() for r in rows]))\n")
    done = subprocess.run([sys.executable, "-c", script, spark_remote], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    check(json.loads(done.stdout.strip().splitlines()[-1]))


def test_the_classic_sessions_jvm_is_started_in_a_process_group_of_its_own(spark):
    """So that its forked child runs no Python before exec (pyspark's preexec_fn did, and aborted once in a test
    worker full of threads), while a terminal's Ctrl-C to this process's group still does not reach it."""
    import os

    jvm = spark.sparkContext._gateway.proc
    assert os.getpgid(jvm.pid) == jvm.pid != os.getpgid(0)
