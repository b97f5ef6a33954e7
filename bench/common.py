"""What every benchmark shares: its own local stack on free ports, a warm engine, a peak-memory probe."""

from __future__ import annotations

import os
import shutil
import time
from contextlib import contextmanager
from typing import Iterator

from bridgectl.local_stack import LocalStack
from bridgectl.paths import PROJECT_ROOT

BENCH_STACK_HOME = PROJECT_ROOT / ".local" / "bench-stack"


@contextmanager
def bench_stack() -> Iterator[LocalStack]:
    """A fresh stack for one benchmark run; this process's environment points at it."""
    LocalStack(BENCH_STACK_HOME).down(log=lambda line: None)
    shutil.rmtree(BENCH_STACK_HOME, ignore_errors=True)
    stack = LocalStack(BENCH_STACK_HOME, pick_free_ports=True)
    try:  # a server that fails to start stops the ones started before it
        stack.up(log=lambda line: None)
        os.environ.update({k: v for k, v in stack.env().items() if k not in ("DAGSTER_HOME", "BRIDGE_SPARK_REMOTE")})
        yield stack
    finally:
        stack.down(log=lambda line: None)


def attached_stack() -> LocalStack:
    """The stack `bench_stack` started, seen from a child process."""
    return LocalStack(BENCH_STACK_HOME)


def fresh_pubsub() -> None:
    """Restart pstest before a measurement that touches Pub/Sub. pstest keeps every message ever
    published in memory (for its Go test-inspection API), so each row would otherwise run slower than
    the last; the real service has no such cost."""
    stack = attached_stack()
    stack.down(log=lambda line: None, only=("pubsub",))
    stack.up(log=lambda line: None, only=("pubsub",))


def warm_engine(engine: str, remote: str | None):
    """The Spark session for `classic` or `connect`, and the seconds it took to get it. A first tiny
    Arrow job starts the Python workers, so no measured row pays for that."""
    from connectors.spark_session import start_python_workers
    from resources.spark import SparkResource

    started = time.monotonic()
    spark = SparkResource(remote=remote if engine == "connect" else None).session()
    start_python_workers(spark)
    return spark, time.monotonic() - started


def run_sink_batch(spark, config, admin, batch, open_writer, group: str):
    """One batch of a Kafka-reading sink through the shared driver, as its plugin runs it, with its writer (each
    sink's write.py); a fresh `group` per run: a batch's delivered commits would start the next one past them."""
    from connectors.kafka.sink_plugin import sink_deliver
    from connectors.kafka.sink_batch import run_kafka_sink_batch

    return run_kafka_sink_batch(spark, config, admin, {}, batch, group, sink_deliver("bench", config, admin, open_writer))
