"""Spark's Kafka source over an explicit offset range: the read side of every Kafka-sourced bridge."""

from __future__ import annotations

import json

from pyspark.sql import DataFrame, SparkSession

from connectors.kafka.admin import PartitionRange
from connectors.kafka.connection import KafkaConnection

KAFKA_RECORD_COLUMNS = ["topic", "partition", "offset", "timestamp", "timestampType", "key", "value", "headers"]


def read_offset_ranges(
    spark: SparkSession,
    connection: KafkaConnection,
    ranges: list[PartitionRange],
    timeout_s: int,
    reader_group: str,
    include_headers: bool = True,
) -> DataFrame:
    """Records of each [start, end) range; Spark makes one task per topic-partition. A broker silent for
    `timeout_s` fails the task (Spark's default is 120 s, then 3 more attempts in a cluster).

    `reader_group` is the consumers' group id. Spark pools its executors' Kafka consumers by group id and
    partition, and by default makes a new group id per read, so every micro-batch paid for new consumers
    (a fifth of a small batch's time); one id per bridge lets the next batch borrow them. With `assign`
    the group never joins or commits, so it does not touch the bridge's Kafka Connect group. Without
    `include_headers` the rows have no headers column."""
    assign: dict[str, list[int]] = {}
    starting: dict[str, dict[str, int]] = {}
    ending: dict[str, dict[str, int]] = {}
    for r in ranges:
        assign.setdefault(r.topic, []).append(r.partition)
        starting.setdefault(r.topic, {})[str(r.partition)] = r.start
        ending.setdefault(r.topic, {})[str(r.partition)] = r.end
    reader = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", connection.bootstrap_servers)
        .option("assign", json.dumps(assign))
        .option("startingOffsets", json.dumps(starting))
        .option("endingOffsets", json.dumps(ending))
        .option("includeHeaders", str(include_headers).lower())
        .option("kafka.group.id", reader_group)
        # The range is already in the log, so the broker never needs to wait for data; at the
        # default 500 ms, the consumer's last prefetch past the range end adds half a second per task.
        .option("kafka.fetch.max.wait.ms", "10")
        .option("kafkaConsumer.pollTimeoutMs", str(timeout_s * 1000))
        .option("kafka.request.timeout.ms", str(timeout_s * 1000))
        .option("kafka.default.api.timeout.ms", str(timeout_s * 1000))
    )
    for key, value in connection.java_client_options().items():
        reader = reader.option(f"kafka.{key}", value)
    return reader.load().select(*(c for c in KAFKA_RECORD_COLUMNS if include_headers or c != "headers"))
