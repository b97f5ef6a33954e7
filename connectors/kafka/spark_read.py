"""Driver side of every Kafka-reading bridge: one Spark task per planned offset range, each reading its range
in the Python worker (range_reader.py) and handing the records straight to the connector's delivery."""

from __future__ import annotations

import functools
from typing import Callable, Iterator

import pyarrow as pa
from pyspark.sql import Row, SparkSession

from connectors.kafka.admin import PartitionRange
from connectors.kafka.connection import KafkaConnection
from connectors.kafka.range_reader import ReaderSettings, read_ranges

__all__ = ["Deliver", "deliver_offset_ranges"]

# Takes a task's records (Arrow batches of range_reader.RECORD_SCHEMA) and yields its summary rows, only once
# the destination has acknowledged every record it was handed.
Deliver = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]


def deliver_offset_ranges(
    spark: SparkSession,
    connection: KafkaConnection,
    ranges: list[PartitionRange],
    timeout_s: int,
    deliver: Deliver,
    summary_schema: str,
    include_headers: bool = True,
    isolation_level: str = "read_uncommitted",
) -> list[Row]:
    """Run `deliver` over the records of every [start, end) range, one Spark task per range, and collect the
    summary rows (`summary_schema`, a Spark DDL string). A broker silent for `timeout_s` fails the task with
    one line naming the partition and offset. Without `include_headers` the records have no headers column."""
    settings = ReaderSettings({**connection.librdkafka_config(), "isolation.level": isolation_level},
                              connection.bootstrap_servers, timeout_s, include_headers)
    tasks = spark.range(0, len(ranges), 1, len(ranges))
    return tasks.mapInArrow(functools.partial(_read_and_deliver, settings, list(ranges), deliver),
                            summary_schema).collect()


def _read_and_deliver(settings: ReaderSettings, ranges: list[PartitionRange], deliver: Deliver,
                      task_ids: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    mine = [ranges[i] for ids in task_ids for i in ids.column(0).to_pylist()]
    if mine:
        yield from deliver(read_ranges(settings, mine))
