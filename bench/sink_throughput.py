"""Cloud Pub/Sub sink throughput: records/s, MB/s and peak memory of one micro-batch.

Runs against its own local stack (Kafka + pstest on free ports) with a warm Spark session, so the
number is the steady-state batch speed; Spark's start-up (~5-10 s) is reported separately.
Usage: python -m bench.sink_throughput [--records 100000] [--sizes 100,1024]
"""

from __future__ import annotations

import argparse
import os
import shutil
import time
import uuid

from rich.console import Console
from rich.table import Table

from bench.process_memory import PeakMemory
from bridgectl.local_stack import LocalStack
from bridgectl.paths import PROJECT_ROOT

SETTINGS = {
    "seed defaults": {},
    "tuned": {"maxBufferSize": 1000, "maxDelayThresholdMs": 20},
}


def produce(bootstrap: str, topic: str, count: int, size: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000, "log_level": 3})
    payload = os.urandom(size // 2).hex().encode()[:size]
    for i in range(count):
        while True:
            try:
                producer.produce(topic, key=str(i % 1000).encode(), value=payload)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args()

    home = PROJECT_ROOT / ".local" / "bench-stack"
    LocalStack(home).down(log=lambda line: None)
    shutil.rmtree(home, ignore_errors=True)
    stack = LocalStack(home, pick_free_ports=True)
    stack.up(log=lambda line: None)
    os.environ.update({k: v for k, v in stack.env().items() if k != "DAGSTER_HOME"})
    try:
        # The servers are our children too; the memory column is the bridge's own (driver, JVM, workers).
        run(args, os.environ["KAFKA_BOOTSTRAP_SERVERS"], frozenset(s.pid for s in stack.status()))
    finally:
        stack.down(log=lambda line: None)


def run(args, bootstrap: str, server_pids: frozenset[int]) -> None:
    from google.cloud import pubsub_v1

    from connectors.cloud_pubsub.clients import PubSubConnection
    from connectors.cloud_pubsub_sink.batch import run_sink_batch
    from connectors.cloud_pubsub_sink.config import CloudPubSubSinkConfig
    from connectors.config.bridges_file import BatchSettings
    from connectors.kafka.admin import KafkaAdmin
    from connectors.kafka.connection import KafkaConnection
    from resources.spark import SparkResource

    started = time.monotonic()
    spark = SparkResource().session()
    spark_start_s = time.monotonic() - started
    admin = KafkaAdmin(KafkaConnection(bootstrap))
    publisher = pubsub_v1.PublisherClient()
    connection = PubSubConnection(emulator_host=os.environ["PUBSUB_EMULATOR_HOST"])

    table = Table("record size", "settings", "records", "seconds", "records/s", "MB/s", "peak memory (MB)")
    for size in [int(s) for s in args.sizes.split(",")]:
        topic = f"bench-{size}-{uuid.uuid4().hex[:6]}"
        admin.create_topic(topic, args.partitions)
        publisher.create_topic(name=publisher.topic_path("bench", topic))
        produce(bootstrap, topic, args.records, size)
        for label, keys in SETTINGS.items():
            config = CloudPubSubSinkConfig.model_validate(
                {"topics": topic, "cps.project": "bench", "cps.topic": topic, **keys})
            with PeakMemory(exclude=server_pids) as memory:
                result = run_sink_batch(spark, "bench", config, connection, admin, {},
                                        BatchSettings(max_records=args.records, initial_offsets="earliest"),
                                        "connect-bench")
            assert result.totals["published"] == args.records, result.totals
            seconds = result.duration_s
            table.add_row(f"{size} B", label, f"{args.records:,}", f"{seconds:.1f}",
                          f"{args.records / seconds:,.0f}", f"{args.records * size / seconds / 1e6:.2f}",
                          f"{memory.peak / 1e6:,.0f}")
    console = Console()
    console.print(table)
    console.print(f"Spark session start (not in the numbers above): {spark_start_s:.1f} s; "
                  f"{os.cpu_count()} cores; Kafka {args.partitions} partitions; Pub/Sub: pstest emulator")


if __name__ == "__main__":
    main()
