"""One Spark Structured Streaming query for bench.streaming_shapes, in a process of its own (a classic local session
with Spark's Kafka source on its classpath): Kafka `--topic` -> the Pub/Sub topic of the same name, through a Python
`foreach` writer, with `--trigger` (DataStreamWriter.trigger's keyword arguments, as JSON). Prints QUERY STARTED once
the query runs; stops it on SIGTERM."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading

from bench.data import PROJECT

PARTITIONS = 4


class PubSubForeach:
    """Publishes each row's value, batched as the Cloud sink's seed defaults batch (100 records or 100 ms); a task's
    epoch ends once Pub/Sub acknowledged everything it published."""

    def __init__(self, topic: str):
        self.topic = f"projects/{PROJECT}/topics/{topic}"

    def open(self, partition_id: int, epoch_id: int) -> bool:
        from google.cloud import pubsub_v1

        self.client = pubsub_v1.PublisherClient(pubsub_v1.types.BatchSettings(max_messages=100, max_latency=0.1))
        self.futures = []
        return True

    def process(self, row) -> None:
        self.futures.append(self.client.publish(self.topic, bytes(row.value)))

    def close(self, error) -> None:
        for future in self.futures:
            future.result(60)



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--trigger", required=True, help='e.g. {"realTime": "5 seconds"}')
    parser.add_argument("--checkpoint", required=True)
    args = parser.parse_args()
    from pyspark.sql import SparkSession

    from local_stack.fetch import spark_kafka_jars

    os.environ["PYSPARK_PYTHON"] = sys.executable  # the Python workers: this virtualenv's (a local session reads it)
    spark = (SparkSession.builder.master(f"local[{PARTITIONS}]")
             .config("spark.jars", ",".join(str(jar) for jar in sorted(spark_kafka_jars().glob("*.jar"))))
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", str(PARTITIONS))
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    # The topic is made for this query: everything in it is to be moved. ("latest" is resolved when the first batch
    # is planned, seconds after the query starts on a busy machine, and skipped the warm-up's first records.)
    records = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", os.environ["KAFKA_BOOTSTRAP_SERVERS"])
               .option("subscribe", args.topic).option("startingOffsets", "earliest").load().select("value"))
    writer = records.writeStream.foreach(PubSubForeach(args.topic)).option("checkpointLocation", args.checkpoint)
    trigger = json.loads(args.trigger)
    if "realTime" in trigger:
        writer = writer.outputMode("update")  # the only output mode real-time mode takes
    query = writer.trigger(**trigger).start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print("QUERY STARTED", flush=True)
    while not stop.wait(0.5):
        if not query.isActive:
            raise SystemExit(f"the query ended: {query.exception()}")
    query.stop()
    spark.stop()


if __name__ == "__main__":
    main()
