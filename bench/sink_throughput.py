"""Cloud Pub/Sub sink throughput: records/s, MB/s and peak memory of one micro-batch.

Runs against its own local stack (Kafka + pstest on free ports) with a warm Spark session, so the
number is the steady-state batch speed; Spark's start-up (~5-10 s) is reported separately.
Usage: python -m bench.sink_throughput [--records 100000] [--sizes 100,1024]
"""

from __future__ import annotations

import os
import uuid

from bench.common import ResultTable, run_benchmark, warm_spark
from bench.process_memory import PeakMemory

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
    run_benchmark(run, records=100_000, sizes="100,1024")


def run(args, server_pids: frozenset[int]) -> None:
    from google.cloud import pubsub_v1

    from connectors.cloud_pubsub.clients import PubSubConnection
    from connectors.cloud_pubsub_sink.batch import run_sink_batch
    from connectors.cloud_pubsub_sink.config import CloudPubSubSinkConfig
    from connectors.config.bridges_file import BatchSettings
    from connectors.kafka.admin import KafkaAdmin
    from connectors.kafka.connection import KafkaConnection
    
    spark, spark_start_s = warm_spark()
    bootstrap = os.environ["KAFKA_BOOTSTRAP_SERVERS"]
    admin = KafkaAdmin(KafkaConnection(bootstrap))
    publisher = pubsub_v1.PublisherClient()
    connection = PubSubConnection(emulator_host=os.environ["PUBSUB_EMULATOR_HOST"])

    table = ResultTable()
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
            table.add(size, label, args.records, seconds, memory.peak)
    table.print(spark_start_s, f"Kafka {args.partitions} partitions; Pub/Sub: pstest emulator")


if __name__ == "__main__":
    main()
