"""The one Spark session factory: a classic local/cluster session, or a Spark Connect client.

A classic SparkSession is expensive (~10 s of JVM start) and its static config is fixed by the first
one in a process, so this returns the active session when there is one and builds it only once.
With a Spark Connect `remote` (sc://host:port) the engine is already warm: the session is a thin
gRPC client, made in well under a second. Connector code uses only DataFrame APIs that both modes
support (mapInArrow, createDataFrame, the Kafka source), so it runs unchanged in either.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import subprocess
import sys
import uuid
from typing import Protocol

from pyspark.sql import SparkSession

# Spark's Python daemon as we start it (see that module); its workers are forked with its command line.
PYTHON_DAEMON_MODULE = "connectors.spark_worker_daemon"
# Static settings of every engine we start, classic or the local Spark Connect server.
ENGINE_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "4",
    # Small Arrow batches keep an executor's memory flat however large the micro-batch is.
    "spark.sql.execution.arrow.maxRecordsPerBatch": "2000",
    "spark.python.worker.reuse": "true",
    # Workers without Spark's zips and jar on sys.path: a tenth of a second less per task (see the module).
    "spark.python.daemon.module": PYTHON_DAEMON_MODULE,
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
        return with_bounded_retries(SparkSession.builder.remote(remote).getOrCreate())
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    _start_the_jvm_without_python_in_the_child()
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


def _popen_in_its_own_process_group(command, **kwargs) -> subprocess.Popen:
    kwargs.pop("preexec_fn", None)
    return subprocess.Popen(command, process_group=0, **kwargs)


def _start_the_jvm_without_python_in_the_child() -> None:
    """pyspark starts a classic session's JVM with a `preexec_fn` that ignores Ctrl-C: Python code run in the forked
    child before exec, which Python's subprocess documentation calls unsafe in a process with threads, and which was
    seen to abort the child ("Fatal Python error: Aborted" in threading._after_fork, in a test worker with gRPC and
    Kafka client threads: JAVA_GATEWAY_EXITED). A JVM in a process group of its own is as deaf to a terminal's Ctrl-C
    and the child runs no Python; the JVM still ends when this process does (it exits at the end of its stdin).
    pyspark has no option for it, so its module's Popen is replaced."""
    from pyspark import java_gateway

    java_gateway.Popen = _popen_in_its_own_process_group


class SessionIdStore(Protocol):
    """Where the id of the shared Spark Connect session is kept between runs (the Dagster instance)."""

    def get(self) -> str | None: ...

    def set(self, session_id: str) -> None: ...


def shared_connect_session(remote: str, store: SessionIdStore) -> SparkSession:
    """A client of the one server-side session every run of this deployment shares.

    Why share: a Spark Connect server starts a Python worker daemon per session and keeps it until it
    stops, so a new session per run costs ~1.2 s of worker start and leaks a process every run. Runs
    of different bridges may share a session: they use no session state (temp views, confs) and
    Spark Connect runs each request as its own operation. A session the server closed (released or
    idle past its timeout) cannot be reopened under its id, so then a new id is made and stored.
    """
    session_id = store.get()
    if session_id:
        spark = with_bounded_retries(SparkSession.builder.remote(_with_session_id(remote, session_id)).create())
        try:
            spark.version  # one round trip: a closed session fails here, not in the middle of a batch
            return spark
        except Exception as exc:
            if "SESSION_CLOSED" not in str(exc):
                raise
            # Drop the dead client, so that it stops being this process's active session.
            spark.release_session_on_close = False
            spark.stop()
    session_id = str(uuid.uuid4())
    store.set(session_id)
    return with_bounded_retries(SparkSession.builder.remote(_with_session_id(remote, session_id)).create())


# Retries of a call the server did not answer: 50 ms x4 each time, 5 times; with pyspark 4.3 a call to a server
# that is down gives up after about 35 s (measured; its execute path retries within the retries). The client's
# default keeps trying for at least 10 minutes, a silent hang when the engine is down; this still rides over a
# Spark Connect server restart.
CONNECT_RETRIES = 5


def with_bounded_retries(spark: SparkSession) -> SparkSession:
    from pyspark.sql.connect.client.retries import DefaultPolicy

    spark.client.set_retry_policies([DefaultPolicy(max_retries=CONNECT_RETRIES)])
    # pyspark's exit hook asks the server to clean the session's ML cache, with no deadline; that command waited
    # behind a stream's job still running on the server, so a run that had ended (failed, or a materialization that
    # had succeeded) never exited. Closing the client first makes pyspark's hook skip it (hooks run last first); the
    # session is shared and kept on the server, and this project keeps no ML models in it.
    if id(spark.client) not in _closed_at_exit:  # getOrCreate hands back the same session: one hook per client
        _closed_at_exit.add(id(spark.client))
        atexit.register(_close_quietly, spark.client)
    return spark


_closed_at_exit: set[int] = set()


def _close_quietly(client) -> None:
    with contextlib.suppress(Exception):  # a client closed already, or a server gone: nothing left to close
        client.close()


def connect_url_of(remote: str, spark: SparkSession) -> str:
    """The URL that reaches `spark`'s server-side session from another process."""
    return _with_session_id(remote, spark.session_id)


def with_token(remote: str, token: str | None) -> str:
    """sc://... with `;token=` added (the client then dials TLS and sends it as a bearer token)."""
    if not token:
        return remote
    if any(part.startswith("token=") for part in remote.split(";")):
        raise ValueError("the Spark Connect URL names a token and remote_token is set too; keep one")
    return _with_param(remote, f"token={token}")


def without_secrets(remote: str) -> str:
    """The URL with any `;token=` removed: what may be logged or used as a storage key."""
    return ";".join(part for part in remote.split(";") if not part.startswith("token="))


def _with_param(remote: str, param: str) -> str:
    return f"{remote};{param}" if "/;" in remote else f"{remote.rstrip('/')}/;{param}"


def _with_session_id(remote: str, session_id: str) -> str:
    """sc://host:port[/;key=value...] with session_id added, unless the URL names one itself."""
    if ";session_id=" in remote:
        return remote
    return _with_param(remote, f"session_id={session_id}")


def start_python_workers(spark: SparkSession) -> None:
    """Run a tiny Arrow job so Spark's Python workers are up before anything is measured."""
    spark.range(0, 4, 1, 2).mapInArrow(_pass_through, "id long").collect()


def _pass_through(batches):
    # Lives here, not in the caller: a Spark Connect server's workers import it by module name.
    yield from batches
