"""Cloud Pub/Sub source throughput: records/s, MB/s and peak memory of one micro-batch.

Own local stack on free ports, warm Spark session; messages are published to the pstest emulator
first, then one run pulls them all and writes them to Kafka.
Usage: python -m bench.source_throughput [--records 50000] [--sizes 100,1024]
"""

from __future__ import annotations

import os
import uuid

from bench.common import ResultTable, run_benchmark, warm_spark
from bench.process_memory import PeakMemory

SETTINGS = {
    "seed defaults": {},
    "tuned": {"cps.maxBatchSize": 1000},
    "streaming pull": {"cps.streamingPull.enabled": True, "cps.streamingPull.parallelStreams": 2},
}


def publish(topic_path: str, count: int, size: int) -> None:
    from google.cloud import pubsub_v1

    publisher = pubsub_v1.PublisherClient(pubsub_v1.types.BatchSettings(max_messages=1000, max_latency=0.05))
    payload = os.urandom(size // 2).hex().encode()[:size]
    futures = [publisher.publish(topic_path, payload) for _ in range(count)]
    for future in futures:
        future.result(120)


def main() -> None:
    run_benchmark(run, records=50_000, sizes="100,1024")


def run(args, server_pids: frozenset[int]) -> None:
    from google.cloud import pubsub_v1

    from connectors.cloud_pubsub.clients import PubSubConnection
    from connectors.cloud_pubsub_source.batch import run_source_batch
    from connectors.cloud_pubsub_source.config import CloudPubSubSourceConfig
    from connectors.config.bridges_file import BatchSettings
    from connectors.kafka.admin import KafkaAdmin
    from connectors.kafka.connection import KafkaConnection
    
    spark, spark_start_s = warm_spark()
    admin = KafkaAdmin(KafkaConnection(os.environ["KAFKA_BOOTSTRAP_SERVERS"]))
    publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
    connection = PubSubConnection(emulator_host=os.environ["PUBSUB_EMULATOR_HOST"])

    table = ResultTable()
    for size in [int(s) for s in args.sizes.split(",")]:
        for label, keys in SETTINGS.items():
            name = f"bench-{size}-{uuid.uuid4().hex[:6]}"
            topic_path = publisher.topic_path("bench", name)
            publisher.create_topic(name=topic_path)
            subscriber.create_subscription(name=subscriber.subscription_path("bench", name), topic=topic_path)
            admin.create_topic(name, args.partitions)
            publish(topic_path, args.records, size)
            config = CloudPubSubSourceConfig.model_validate(
                {"cps.project": "bench", "cps.subscription": name, "kafka.topic": name, **keys})
            with PeakMemory(exclude=server_pids) as memory:
                result = run_source_batch(spark, config, connection, admin, BatchSettings(max_records=args.records))
            # A run ends when its tasks find the subscription empty; with two tasks, one may stop while
            # the other still leases the last messages, which then wait for the next run.
            table.add(size, label, result.written, result.duration_s, memory.peak)
    table.print(spark_start_s, f"Kafka {args.partitions} partitions; Pub/Sub: pstest emulator")


if __name__ == "__main__":
    main()
