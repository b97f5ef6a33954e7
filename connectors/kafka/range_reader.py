"""Executor side of every Kafka-reading bridge: one task reads its offset ranges with librdkafka, straight into
Arrow batches of the columns the sinks' delivery takes (`RECORD_SCHEMA`).

Why not Spark's Kafka source: it reads in the JVM and hands rows to Python through Arrow, and that route cost
about as much CPU per record as a whole warm Kafka Connect worker (README, Measured). librdkafka fetches and
decompresses in C, and a record costs the Python task a few attribute reads. The consumer never joins a
group and never commits: `assign` at the range's start, read to its end, `unassign`. It is kept for the next
task of the same Python worker (Spark reuses its Python workers), so a small batch does not pay for a new
connection (connection.kept_client: a task that failed leaves its consumer behind, the next one starts clean).

A range ends when a record at or past its end arrives, or when the partition's end is reached at or past it:
offsets the range cannot return (compacted away, aborted transactions under read_committed, transaction
markers) never make it wait.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Iterator

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, TopicPartition

from connectors.kafka.admin import PartitionRange
from connectors.kafka.connection import client_logger, kept_client
from connectors.kafka.outages import KAFKA_UNREACHABLE_CODES
from connectors.outage import Unreachable

# The rows every Kafka-reading delivery path takes (Spark's Kafka source had them, with the timestamp in ms).
RECORD_SCHEMA = pa.schema([
    ("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()), ("timestamp_ms", pa.int64()),
    ("timestampType", pa.int32()), ("key", pa.binary()), ("value", pa.binary()),
])
HEADERS_FIELD = pa.field("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))
RECORD_SCHEMA_WITH_HEADERS = RECORD_SCHEMA.append(HEADERS_FIELD)

# Records per Arrow batch, as spark.sql.execution.arrow.maxRecordsPerBatch was: it bounds a task's memory
# (a batch stays referenced until its records are acknowledged) whatever the range's size.
BATCH_RECORDS = 2_000
# How long one consume call may wait for the records it asked for before the task looks again; short, because
# the last records of a range can be fewer than asked for (gaps) and the partition's end event ends it.
_CONSUME_WAIT_S = 0.1
# A range that gets no record and no partition end for this long is read on through a new consumer
# (RangeConsumer.reopen); librdkafka reconnects to a broker back from a restart within its 10 s backoff.
STALL_REOPEN_S = 15.0
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReaderSettings:
    """What a task needs to read Kafka: the librdkafka config (secrets included: it travels inside the Spark
    plan like every client config, never logged), and how long a silent broker may take."""

    client_config: dict[str, str] = field(repr=False)
    bootstrap_servers: str
    outage_timeout_s: float
    include_headers: bool = True
    batch_records: int = BATCH_RECORDS

    def consumer_config(self) -> dict[str, object]:
        return {
            # librdkafka's consumer wants a group id even when it never joins: assign() only, no commits.
            "group.id": "kafka-pubsub-bridge-range-reader",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            # The range is in the log already; at the default 500 ms, the fetch at a partition's end waits for
            # records that are not coming before it reports the end.
            "fetch.wait.max.ms": 10,
            # Fewer, larger fetches: a 1 KiB record range is 1,000 records per round trip at the 1 MiB default.
            "max.partition.fetch.bytes": 8 << 20,
            # What the consumer fetches ahead of the task (librdkafka's default is 64 MiB): delivery is slower than
            # reading, so more only holds memory.
            "queued.max.messages.kbytes": 16 << 10,
            # When that is full, fetch again as soon as there is room: at librdkafka's default of 1 s, a 1 KiB
            # range of 100 MB took 2-4 s to read for 0.3 s of CPU.
            "fetch.queue.backoff.ms": 5,
            # A start offset that retention deleted after the batch was planned fails the task (and the run):
            # the next run's plan moves past the gap and reports it as records lost to retention.
            "auto.offset.reset": "error",
            "log_level": 3,
            **self.client_config,
        }


class RangeReadError(RuntimeError):
    """Kafka refused to serve a range (an error other than a broker that does not answer)."""


class RangeConsumer:
    """The librdkafka consumer range reads go through, made again in place when a read stalls."""

    def __init__(self, config: dict[str, object]):
        self._config = {**config, "logger": client_logger()}
        self.consumer = Consumer(self._config)

    def reopen(self) -> None:
        # librdkafka's consumer can stop fetching an assigned partition after a broker restart and never start
        # again (confluentinc/librdkafka#5153, open; seen here once: a range stalled 90 s after a 2 s broker
        # stop); a new consumer fetches at once.
        self.consumer.close()
        self.consumer = Consumer(self._config)

    def close(self) -> None:
        self.consumer.close()


def read_ranges(settings: ReaderSettings, ranges: list[PartitionRange],
                consumer: RangeConsumer | None = None) -> Iterator[pa.RecordBatch]:
    """The records of each [start, end) range, in offset order, as Arrow batches of `RECORD_SCHEMA` (with
    headers when `include_headers`); through `consumer`, else through the one this process keeps for its next
    task."""
    if consumer is None:
        with kept_client(settings.consumer_config(), make=RangeConsumer) as kept:
            yield from _read_ranges(kept, settings, ranges)
    else:
        yield from _read_ranges(consumer, settings, ranges)


def _read_ranges(consumer: RangeConsumer, settings: ReaderSettings,
                 ranges: list[PartitionRange]) -> Iterator[pa.RecordBatch]:
    for partition_range in ranges:
        if partition_range.count > 0:
            try:
                yield from _read_range(consumer, settings, partition_range)
            finally:
                consumer.consumer.unassign()


def _read_range(kept: RangeConsumer, settings: ReaderSettings, r: PartitionRange) -> Iterator[pa.RecordBatch]:
    kept.consumer.assign([TopicPartition(r.topic, r.partition, r.start)])
    next_offset = r.start
    pending: list = []
    last_progress = last_look = time.monotonic()
    while next_offset < r.end:
        wanted = max(1, min(settings.batch_records - len(pending), r.end - next_offset))
        messages = kept.consumer.consume(num_messages=wanted, timeout=_CONSUME_WAIT_S)
        progressed = False
        # Errors are rare and come as messages of their own (librdkafka retries a silent broker itself, and the
        # outage timeout bounds that); a range's records come in offset order.
        failed = [m for m in messages if m.error() is not None]
        for message in failed:
            error = message.error()
            if error.code() == KafkaError._PARTITION_EOF:
                progressed = True
                if message.offset() >= r.end:
                    next_offset = r.end  # what is left of the range is gaps
            elif not error.retriable() and error.code() not in KAFKA_UNREACHABLE_CODES:
                raise RangeReadError(f"Kafka refused topic {r.topic} partition {r.partition} at offset "
                                     f"{next_offset}: {error.str()}")
        records = [m for m in messages if m.error() is None] if failed else messages
        if records and records[-1].offset() >= r.end:
            records = [m for m in records if m.offset() < r.end]
            next_offset = r.end
        if records:
            progressed = True
            pending += records
            next_offset = max(next_offset, records[-1].offset() + 1)
        if len(pending) >= settings.batch_records or (pending and next_offset >= r.end):
            yield arrow_batch(r.topic, r.partition, pending, settings.include_headers)
            pending = []
        now = time.monotonic()
        if progressed:
            last_progress = last_look = now
        elif now - last_progress > settings.outage_timeout_s:
            raise Unreachable(f"Kafka at {settings.bootstrap_servers} did not answer for "
                              f"{settings.outage_timeout_s:.0f} s while reading topic {r.topic} partition "
                              f"{r.partition} at offset {next_offset}; the run recorded nothing")
        elif now - last_look > STALL_REOPEN_S:
            _log.warning("Kafka at %s sent nothing for %.0f s for topic %s partition %d at offset %d: reading it "
                         "through a new consumer", settings.bootstrap_servers, now - last_progress, r.topic,
                         r.partition, next_offset)
            kept.reopen()
            kept.consumer.assign([TopicPartition(r.topic, r.partition, next_offset)])
            last_look = now


def arrow_batch(topic: str, partition: int, messages: list, include_headers: bool) -> pa.RecordBatch:
    """One partition's consumed messages as an Arrow batch of `RECORD_SCHEMA` (with headers when asked)."""
    n = len(messages)
    timestamps = [m.timestamp() for m in messages]
    columns = [
        pa.array([topic] * n, pa.string()),
        pa.array([partition] * n, pa.int32()),
        pa.array([m.offset() for m in messages], pa.int64()),
        pa.array([t[1] for t in timestamps], pa.int64()),
        # librdkafka: 0 none, 1 create time, 2 log append time; Kafka's Java types are one less.
        pa.array([t[0] - 1 for t in timestamps], pa.int32()),
        pa.array([m.key() for m in messages], pa.binary()),
        pa.array([m.value() for m in messages], pa.binary()),
    ]
    if not include_headers:
        return pa.RecordBatch.from_arrays(columns, schema=RECORD_SCHEMA)
    columns.append(pa.array([m.headers() for m in messages], HEADERS_FIELD.type))
    return pa.RecordBatch.from_arrays(columns, schema=RECORD_SCHEMA_WITH_HEADERS)
