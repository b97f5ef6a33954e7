"""Pub/Sub Lite throughput, both directions: records/s, MB/s and peak memory of one micro-batch.

Own local stack on free ports (the Lite server included), warm Spark session. The sink moves a Kafka
topic to a Lite topic; the source then moves that Lite topic's subscription into a new Kafka topic.
Usage: python -m bench.lite_throughput [--records 100000] [--sizes 100,1024]
"""

from __future__ import annotations

import os
import uuid

from bench.common import ResultTable, run_benchmark, warm_spark
from bench.process_memory import PeakMemory
from bench.sink_throughput import produce

LOCATION = "us-central1-a"
SINK_SETTINGS = {"sink, seed defaults": {}, "sink, ordering mode KAFKA": {"pubsublite.ordering.mode": "KAFKA"}}
SOURCE_SETTINGS = {"source, seed defaults": {}}


def main() -> None:
    run_benchmark(run, records=100_000, sizes="100,1024")


def run(args, server_pids: frozenset[int]) -> None:
    from google.cloud.pubsublite import Subscription, Topic

    from connectors.config.bridges_file import BatchSettings
    from connectors.kafka.admin import KafkaAdmin
    from connectors.kafka.connection import KafkaConnection
    from connectors.pubsublite.clients import LiteConnection, subscription_path, topic_path
    from connectors.pubsublite_sink.batch import run_lite_sink_batch
    from connectors.pubsublite_sink.config import PubSubLiteSinkConfig
    from connectors.pubsublite_source.batch import run_lite_source_batch
    from connectors.pubsublite_source.config import PubSubLiteSourceConfig

    spark, spark_start_s = warm_spark()
    bootstrap = os.environ["KAFKA_BOOTSTRAP_SERVERS"]
    admin = KafkaAdmin(KafkaConnection(bootstrap))
    connection = LiteConnection(api_endpoint=os.environ["PUBSUBLITE_API_ENDPOINT"],
                                ca_file=os.environ["GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"])
    table = ResultTable()
    for size in [int(s) for s in args.sizes.split(",")]:
        kafka_topic = f"bench-{size}-{uuid.uuid4().hex[:6]}"
        admin.create_topic(kafka_topic, args.partitions)
        produce(bootstrap, kafka_topic, args.records, size)
        for label, keys in SINK_SETTINGS.items():
            lite_topic = f"{kafka_topic}-{len(table.table.rows)}"
            path = topic_path("bench", LOCATION, lite_topic)
            lite_admin = connection.admin(path.location.region)
            lite_admin.create_topic(Topic(name=str(path), partition_config=Topic.PartitionConfig(count=args.partitions),
                                          retention_config=Topic.RetentionConfig(per_partition_bytes=30 * 1024**3)))
            lite_admin.create_subscription(Subscription(
                name=str(subscription_path("bench", LOCATION, lite_topic)), topic=str(path),
                delivery_config=Subscription.DeliveryConfig(
                    delivery_requirement=Subscription.DeliveryConfig.DeliveryRequirement.DELIVER_IMMEDIATELY)))
            config = PubSubLiteSinkConfig.model_validate({
                "topics": kafka_topic, "pubsublite.project": "bench", "pubsublite.location": LOCATION,
                "pubsublite.topic": lite_topic, **keys})
            with PeakMemory(exclude=server_pids) as memory:
                result = run_lite_sink_batch(spark, "bench", config, connection, admin, {},
                                             BatchSettings(max_records=args.records, initial_offsets="earliest"),
                                             "connect-bench")
            assert result.totals["published"] == args.records, result.totals
            table.add(size, label, args.records, result.duration_s, memory.peak)
        # The source reads back what the last sink row published.
        for label, keys in SOURCE_SETTINGS.items():
            back = f"{lite_topic}-back"
            admin.create_topic(back, args.partitions)
            config = PubSubLiteSourceConfig.model_validate({
                "pubsublite.project": "bench", "pubsublite.location": LOCATION,
                "pubsublite.subscription": lite_topic, "kafka.topic": back, **keys})
            with PeakMemory(exclude=server_pids) as memory:
                result = run_lite_source_batch(spark, config, connection, admin, {},
                                               BatchSettings(max_records=args.records))
            assert result.messages == args.records, result.messages
            table.add(size, label, result.messages, result.duration_s, memory.peak)
    table.print(spark_start_s, f"Kafka and Lite {args.partitions} partitions; Lite: the local Lite server")


if __name__ == "__main__":
    main()
