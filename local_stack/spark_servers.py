"""Command lines of the Spark servers in the local stack, from the pyspark wheel's own launchers.

The wheel ships bin/spark-class and bin/spark-submit but not sbin/start-master.sh and friends, so the
servers are started the way those scripts do, in the foreground, as children the stack supervises.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from local_stack import fetch
from local_stack.paths import log4j2_config

# The local cluster: two workers of 2 cores and 2 GB each, so that two applications (the cluster's
# Spark Connect server and a classic run on `spark://`) each get an executor on both workers.
WORKER_CORES, WORKER_MEMORY, APP_CORES = 2, "2g", 2


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _java_options() -> str:
    return f"-Dlog4j2.configurationFile={log4j2_config()}"


def master_command(port: int, webui_port: int) -> list[str]:
    fetch.require_tool("java", "OpenJDK 17, to run Spark")
    return [str(spark_home() / "bin" / "spark-class"), "org.apache.spark.deploy.master.Master",
            "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(webui_port)]


def worker_command(master_url: str, webui_port: int, work_dir: Path) -> list[str]:
    return [str(spark_home() / "bin" / "spark-class"), "org.apache.spark.deploy.worker.Worker",
            "--host", "127.0.0.1", "--cores", str(WORKER_CORES), "--memory", WORKER_MEMORY,
            "--webui-port", str(webui_port), "--work-dir", str(work_dir), master_url]


def cluster_app_conf() -> dict[str, str]:
    """What an application on the local cluster sets: its share of the cores, and this interpreter
    (which has the connectors installed) for its executors' Python workers, as a remote cluster's
    workers would have the package installed."""
    return {"spark.cores.max": str(APP_CORES), "spark.executor.memory": "1g",
            "spark.pyspark.python": sys.executable,
            "spark.executor.extraJavaOptions": _java_options()}


def connect_server_command(port: int, master: str, conf: dict[str, str]) -> list[str]:
    """A Spark Connect server (as sbin/start-connect-server.sh launches it) on 127.0.0.1:`port`."""
    from connectors.spark_session import ENGINE_CONF

    fetch.require_tool("java", "OpenJDK 17, to run Spark")
    confs = {**ENGINE_CONF, "spark.connect.grpc.binding.address": "127.0.0.1",
             "spark.connect.grpc.binding.port": str(port),
             "spark.executor.extraJavaOptions": _java_options(), **conf}
    command = [str(spark_home() / "bin" / "spark-submit"),
               "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
               "--name", "kafka-pubsub-bridge-engine", "--master", master,
               "--driver-memory", os.environ.get("BRIDGE_SPARK_DRIVER_MEMORY", "2g"),
               "--driver-java-options", _java_options()]
    for key, value in confs.items():
        command += ["--conf", f"{key}={value}"]
    return command
