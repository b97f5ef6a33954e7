"""Does memory grow with the batch size? One Cloud Pub/Sub sink micro-batch (1 KiB records, tuned
settings) per fresh process on the classic engine, where driver, executors and Python workers are all
this process's descendants:
    python -m bench.memory --topic T --records N
In one long-lived process the JVM keeps the heap it once grew to, so rows measured one after another
would say nothing about a single batch; hence a process per batch size.
"""

from __future__ import annotations

import argparse
import json
import os

from bench.common import run_sink_batch, warm_engine
from bench.data import pubsub_topic, unique_name
from bench.process_memory import PeakMemory
from bench.throughput import CLOUD_SINK_SETTINGS


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--topic", required=True, help="a Kafka topic holding at least --records records")
    parser.add_argument("--records", type=int, required=True)
    args = parser.parse_args()

    from connectors.cloud_pubsub.clients import PubSubConnection
    from connectors.cloud_pubsub_sink.write import pubsub_writer
    from connectors.cloud_pubsub_sink.config import CloudPubSubSinkConfig
    from connectors.bridge import BatchSettings
    from connectors.kafka.admin import KafkaAdmin
    from connectors.kafka.connection import KafkaConnection

    spark, _ = warm_engine("classic", None)
    destination = unique_name("memory")
    pubsub_topic(destination, subscribe=False)
    config = CloudPubSubSinkConfig.model_validate(
        {"topics": args.topic, "cps.project": "bench", "cps.topic": destination, **CLOUD_SINK_SETTINGS["tuned"]})
    admin = KafkaAdmin(KafkaConnection(os.environ["KAFKA_BOOTSTRAP_SERVERS"]))
    batch = BatchSettings(max_records=args.records, initial_offsets="earliest")
    with PeakMemory() as memory:
        connection = PubSubConnection(emulator_host=os.environ["PUBSUB_EMULATOR_HOST"])
        result = run_sink_batch(spark, config, admin, batch, pubsub_writer(config, connection, 30),
                                unique_name("connect-bench"))
    assert result.totals["published"] == args.records, result.totals
    print(json.dumps({"records": args.records, "seconds": round(result.duration_s, 2),
                      "peak_mb": round(memory.peak / 1e6),
                      "jvm_mb": round(memory.peak_by_kind["jvm"] / 1e6),
                      "python_mb": round(memory.peak_by_kind["python"] / 1e6)}))


if __name__ == "__main__":
    main()
