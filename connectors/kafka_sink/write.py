"""Executor side of the Kafka -> Kafka sink: one Spark partition's records produced to the target cluster with
their key, value, headers, timestamp and (by default) partition, by an idempotent producer (acks=all, no
duplicates or reordering from its own retries). The writer (sink_writer.SinkWriter) flushes only once the
target acknowledged every record, so the driver records offsets only for replicated data. Before a batch, the
driver makes the target topics ready (prepare_targets)."""

from __future__ import annotations

import collections
import functools
import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

import pyarrow as pa
import pyarrow.compute as pc

from connectors.errors import KEEP_GOING_LOOK_S, BatchError, DeliveryAbandoned, RecordError
from connectors.kafka.admin import KafkaAdmin
from connectors.kafka.connection import client_logger, kept_client, refused_for_good
from connectors.kafka.dead_letter import HEADERS_ALLOWANCE, PRODUCER_MAX_BYTES
from connectors.kafka.outages import kafka_outages_named
from connectors.framework.sink_tally import SinkTally, TalliedBatch
from connectors.framework.sink_writer import SinkWriter
from connectors.kafka.transactions import PositionsTopic
from connectors.kafka_sink.config import KafkaSinkConfig
from connectors.outage import Unreachable

if TYPE_CHECKING:
    from confluent_kafka import KafkaError, Message

NO_TIMESTAMP = -1  # Spark's timestampType for a record without one
UNASSIGNED_PARTITION = -1  # librdkafka's partitioner picks the partition (RD_KAFKA_PARTITION_UA)
# A record batch's own framing (61 bytes) and one record's (its length, attributes, deltas: at most about 30 bytes):
# what a record adds to its key, value and headers on the wire.
RECORD_FRAMING_BYTES = 100


@dataclass(frozen=True)
class ReplicaTarget:
    """What the driver hands each task (prepare_targets made the topics ready)."""

    config: KafkaSinkConfig
    max_message_bytes: int  # the largest record a source topic may hold, and its headers
    outage_timeout_s: float
    # The max.message.bytes of each target topic that takes less than its source (only there can a record that
    # the source holds be refused for its size). The broker refuses a record batch over it whole, every record in it
    # (librdkafka, unlike the Java producer, does not split the batch and try again): so batches are kept under the
    # smallest, and a record over its topic's is refused alone before it is sent.
    target_max_bytes: dict[str, int] = field(default_factory=dict)
    # exactly.once.support=required: the positions topic on the target, and how many partitions its slots share
    positions: PositionsTopic | None = None
    positions_partitions: int = 0

    def producer_config(self) -> dict:
        """The target producer's settings, transactional or not."""
        batch = {"batch.size": min(self.target_max_bytes.values())} if self.target_max_bytes else {}
        return {**self.config.target_connection().librdkafka_config(), "message.max.bytes": self.max_message_bytes,
                **batch,
                # A target that does not answer fails the batch after the outage timeout, not librdkafka's 5 minutes.
                "message.timeout.ms": int(self.outage_timeout_s * 1000), "logger": client_logger(), "log_level": 3}

    def too_large(self, topic: str, key: bytes | None, value: bytes | None, headers: list) -> KafkaError | None:
        """Why the target topic will refuse this record for its size, or None."""
        from confluent_kafka import KafkaError

        limit = self.target_max_bytes.get(topic)
        size = len(key or b"") + len(value or b"") + sum(len(k) + len(v or b"") for k, v in headers)
        if limit is None or size + RECORD_FRAMING_BYTES <= limit:
            return None
        return KafkaError(KafkaError.MSG_SIZE_TOO_LARGE,
                          f"a record of {size} bytes; target topic {topic} takes at most {limit} (max.message.bytes)")


# Delivery reports are served every this many records handed to the producer, and all of them by settle's flush:
# a poll after each record was 16 % of a task's CPU (py-spy, 1 KiB records), and the reports only need serving before
# the batch settles (librdkafka sends its batches without being polled).
POLL_EVERY_RECORDS = 1000


@dataclass
class HandedBatch:
    """One batch's records handed to the producer, and the delivery reports that said one failed. Only its records'
    delivery callbacks hold it (and with it the batch) until its last report, unless one failed."""

    slot: TalliedBatch
    target_of: dict[str, str]  # source topic -> target topic
    same_partition: bool  # target.partition=same: a record's target partition is its source partition
    skipped: set[int] = field(default_factory=set)  # rows refused before they were sent
    undelivered: list[tuple[KafkaError, Message]] = field(default_factory=list)
    reports: int = 0
    sent: int | None = None  # known once every record was handed over

    def undelivered_rows(self) -> list[tuple[int, KafkaError]]:
        """The rows the failed reports are about. A report carries its record's target topic, partition, key and
        value, not its row (a row per report would be an object per record kept until it is acknowledged, and the
        garbage collector's walks over those took a quarter of the sending thread's time): each is the first row not
        matched yet that holds the same. Rows alike in all of these share their fate: Kafka refuses a record for good
        for what it holds (its size, a missing key), and a failure of any other kind fails the whole task. The one
        exception is a produce request refused as a whole (RECORD_LIST_TOO_LARGE), where a row alike to a refused one
        may be named in its place: same content, another offset."""
        if not self.undelivered:
            return []
        columns = [self.slot.batch.column(name).to_pylist() for name in ("topic", "partition", "key", "value")]
        rows_holding: dict[tuple, list[int]] = collections.defaultdict(list)  # last row first: pop() is the first
        for row, (topic, partition, key, value) in reversed(list(enumerate(zip(*columns)))):
            if row not in self.skipped:
                rows_holding[self._held(self.target_of[topic], partition, key, value)].append(row)
        return [(rows_holding[self._held(message.topic(), message.partition(), message.key(), message.value())].pop(),
                 error) for error, message in self.undelivered]

    def _held(self, target: str, partition: int, key: bytes | None, value: bytes | None) -> tuple:
        """What a record is matched on: its target topic, its partition when it keeps it, its key and value."""
        return target, partition if self.same_partition else None, key, value

    def count_published(self, not_published: set[int]) -> None:
        if self.slot.single is not None:
            self.slot.single.published += self.slot.batch.num_rows - len(self.skipped) - len(not_published)
            return
        for row in range(self.slot.batch.num_rows):
            if row not in self.skipped and row not in not_published:
                self.slot.counts(row).published += 1


class Sends:
    """What became of the records a task handed its producer: refused for good (too large, invalid: through
    errors.tolerance) or failed (the target's fault: the task fails). In a transaction a record refused after it
    was sent fails the task too: the transaction must then abort, and no record of it can be skipped alone.

    `keep_going` (SinkWriter.keep_going), when given, is asked every POLL_EVERY_RECORDS records handed over and every
    KEEP_GOING_LOOK_S of a wait on the producer; once it says no, the producer's queue and in-flight requests are
    purged and DeliveryAbandoned raised: librdkafka would otherwise go on sending a killed run's queue (a batch's
    whole task) after the run is gone."""

    def __init__(self, task: ReplicaTarget, in_transaction: bool = False):
        self.task, self.in_transaction = task, in_transaction
        self.undelivered: list[HandedBatch] = []  # batches with a failed report, since the last settle

    def send(self, producer, slot: TalliedBatch, keep_going: Callable[[], bool] | None = None) -> None:
        """Hands the batch's records to the producer: key, value, headers, timestamp and (by default) partition."""
        from confluent_kafka import KafkaException

        cfg = self.task.config
        batch = slot.batch
        topics, partitions = batch.column("topic").to_pylist(), batch.column("partition").to_pylist()
        handed = HandedBatch(slot, {topic: cfg.target_topic(topic) for topic in set(topics)},
                             cfg.target_partition == "same")
        undelivered = handed.undelivered.append

        def reported(error, message) -> None:  # every record's report but a landing row's
            if error is not None:
                undelivered((error, message))
            handed.reports += 1
            if handed.reports == handed.sent:
                self._all_reported(handed)

        def landed(row: int, error, message) -> None:
            reported(error, message)
            if error is None:
                slot.tally.landed(topics[row], partitions[row], batch.column("offset")[row].as_py() + 1,
                                  message.offset() + 1)

        # With checkpoints, where each partition's last record of the batch landed (an always-on stream pairs source
        # and target positions from it): one row per partition reports its offset.
        landing_rows = _last_row_per_partition(slot, topics, partitions) if cfg.checkpoints else frozenset()
        # The loop below is the task's hottest Python: the columns are read whole, each record is one produce call
        # with its arguments ready (a kwargs dict and a delivery closure per record had doubled a task's CPU).
        target_partitions = partitions if handed.same_partition else [UNASSIGNED_PARTITION] * len(topics)
        limited = bool(self.task.target_max_bytes)
        produce = producer.produce
        for row, (topic, partition, key, value, timestamp, headers) in enumerate(zip(
                topics, target_partitions, batch.column("key").to_pylist(), batch.column("value").to_pylist(),
                _timestamps(batch), _headers(batch))):
            target = handed.target_of[topic]
            if limited and (refusal := self.task.too_large(target, key, value, headers or [])) is not None:
                handed.skipped.add(row)
                self._refused_before_sending(slot, row, refusal)
                continue
            report = reported if row not in landing_rows else functools.partial(landed, row)
            while True:
                try:
                    produce(target, value=value, key=key, partition=partition, on_delivery=report,
                            timestamp=timestamp, headers=headers)
                    break
                except BufferError:  # the local queue is full: let acknowledgements drain it
                    producer.poll(0.1 if keep_going is None else KEEP_GOING_LOOK_S)
                    self._look(producer, keep_going)
                except KafkaException as exc:
                    if not refused_for_good(exc.args[0]):
                        raise
                    handed.skipped.add(row)
                    self._refused_before_sending(slot, row, exc.args[0])
                    break
            if row % POLL_EVERY_RECORDS == POLL_EVERY_RECORDS - 1:
                producer.poll(0)
                self._look(producer, keep_going)
        handed.sent = len(topics) - len(handed.skipped)
        if handed.reports == handed.sent:
            self._all_reported(handed)

    def _all_reported(self, handed: HandedBatch) -> None:
        if handed.undelivered:
            self.undelivered.append(handed)  # its rows are found when the task settles
        else:
            handed.count_published(set())

    def _flush(self, producer, timeout_s: float, keep_going: Callable[[], bool] | None) -> int:
        """The producer's flush, looking at `keep_going` between waits of KEEP_GOING_LOOK_S; what is left unsent."""
        if keep_going is None:
            return producer.flush(timeout_s)
        deadline = time.monotonic() + timeout_s
        while True:
            left = producer.flush(max(0.0, min(KEEP_GOING_LOOK_S, deadline - time.monotonic())))
            if not left or time.monotonic() >= deadline:
                return left
            self._look(producer, keep_going)

    def _look(self, producer, keep_going: Callable[[], bool] | None) -> None:
        if keep_going is None or keep_going():
            return
        left = len(producer)
        producer.purge(in_queue=True, in_flight=True, blocking=False)
        raise DeliveryAbandoned(f"producing to Kafka at {self.task.config.target_bootstrap_servers} stopped with "
                                f"{left} records not acknowledged")

    @staticmethod
    def _refused_before_sending(slot: TalliedBatch, row: int, error: KafkaError) -> None:
        """Through errors.tolerance at once (never part of a transaction): with `none` the task fails here, and no
        record behind it is sent."""
        slot.tally.reject(slot.record(row), "KAFKA_PRODUCE", RecordError(f"the target Kafka refused it: {error.str()}"))

    def settle(self, producer, tally: SinkTally, keep_going: Callable[[], bool] | None = None) -> None:
        """Waits for every acknowledgement; raises for what failed; sends what was refused for good through
        errors.tolerance (the dead-letter topic, on the source cluster)."""
        cfg, timeout_s = self.task.config, self.task.outage_timeout_s
        left = self._flush(producer, timeout_s, keep_going)
        if left:
            raise Unreachable(f"Kafka at {cfg.target_bootstrap_servers} did not acknowledge {left} records within "
                              f"{timeout_s:.0f} s; the run recorded nothing")
        batches, self.undelivered = self.undelivered, []
        refused, failed = [], []
        for batch in batches:
            undelivered = batch.undelivered_rows()
            for row, error in undelivered:
                refused_alone = refused_for_good(error) and not self.in_transaction
                (refused if refused_alone else failed).append((batch.slot, row, error))
            batch.count_published({row for row, _ in undelivered})
        if failed:
            slot, row, error = failed[0]
            raise BatchError(f"{slot.record(row).where}: the target Kafka at {cfg.target_bootstrap_servers} refused "
                             f"{len(failed)} records: {error.str()}")
        for slot, row, error in refused:
            tally.reject(slot.record(row), "KAFKA_PRODUCE", RecordError(f"the target Kafka refused it: {error.str()}"))
        tally.flush_dead_letters()


def _last_row_per_partition(slot: TalliedBatch, topics: list[str], partitions: list[int]) -> frozenset[int]:
    if slot.single is not None:  # one partition (a task's range, a round's batch)
        return frozenset({slot.batch.num_rows - 1})
    return frozenset({place: row for row, place in enumerate(zip(topics, partitions))}.values())


def _timestamps(batch: pa.RecordBatch) -> list[int]:
    """Each record's timestamp, or 0 where it has none (librdkafka then stamps it when it is produced)."""
    no_timestamp = pc.fill_null(pc.equal(batch.column("timestampType"), NO_TIMESTAMP), False)
    return pc.fill_null(pc.if_else(no_timestamp, 0, batch.column("timestamp_ms")), 0).to_pylist()


def _headers(batch: pa.RecordBatch) -> list[list[tuple[str, bytes | None]] | None]:
    """Each record's headers as (key, value) pairs, or None where it has none."""
    column = batch.column("headers")
    if not pc.sum(pc.fill_null(pc.list_value_length(column), 0)).as_py():  # the usual batch: no record has any
        return [None] * len(column)
    return [[(h["key"], h["value"]) for h in headers] if headers else None for headers in column.to_pylist()]


class ReplicaWriter(SinkWriter):
    """A task's records through this process's kept idempotent producer."""

    def __init__(self, target: ReplicaTarget, tally: SinkTally):
        super().__init__(tally)
        config = {**target.producer_config(), "enable.idempotence": True, "acks": "all", "linger.ms": 5}
        self._kept = kept_client(config)  # kept for this Python worker's next task, unless this one fails
        self._producer = self._kept.__enter__()
        self._sends = Sends(target)

    def put(self, records: pa.RecordBatch) -> None:
        self._sends.send(self._producer, TalliedBatch(records, self.tally), self.keep_going)

    def flush(self) -> None:
        self._sends.settle(self._producer, self.tally, self.keep_going)

    def __exit__(self, *exc_info) -> bool | None:
        return self._kept.__exit__(*exc_info)


def prepare_targets(config: KafkaSinkConfig, source: KafkaAdmin, target: KafkaAdmin,
                    outage_timeout_s: float) -> ReplicaTarget:
    """Driver side: each source topic's target exists with enough partitions (created like its source when
    allowed), and the producers are sized for the largest record any of them may carry."""
    largest, target_limits = _make_topics(config, source, target)
    return ReplicaTarget(config, min(largest + HEADERS_ALLOWANCE, PRODUCER_MAX_BYTES), outage_timeout_s,
                         target_max_bytes=target_limits)


def _make_topics(config: KafkaSinkConfig, source: KafkaAdmin, target: KafkaAdmin) -> tuple[int, dict[str, int]]:
    """The largest record a source topic may hold, and the max.message.bytes of each target topic that takes less
    than its source."""
    sources = source.partitions(config.topic_list() or None, config.topics_regex)
    if not sources:
        return 1_048_588, {}
    limits = source.topic_max_message_bytes(list(sources))
    wanted = {config.target_topic(topic): topic for topic in sources}
    with kafka_outages_named(config.target_bootstrap_servers, "looking up the target topics"):
        existing = target.partitions(None, "|".join(re.escape(name) for name in wanted))
        for name, topic in wanted.items():
            count = len(sources[topic])
            if name not in existing:
                if not config.target_topic_create:
                    raise BatchError(f"target topic {name} does not exist on {config.target_bootstrap_servers} "
                                     "(target.topic.create=false)")
                target.create_topic(name, count, {"max.message.bytes": str(limits[topic])},
                                    config.target_topic_replication_factor)
            elif config.target_partition == "same" and len(existing[name]) < max(sources[topic]) + 1:
                if not config.target_topic_create:
                    raise BatchError(f"target topic {name} has {len(existing[name])} partitions, source topic {topic} "
                                     f"has {count}: target.partition=same needs as many (or target.partition=key, "
                                     "or target.topic.create=true to add them)")
                # As MirrorMaker 2 does when a source topic gains partitions: the target gains them too.
                target.ensure_partitions(name, max(sources[topic]) + 1)
        # A topic made here takes what its source does: only the ones that were there are looked up.
        made_before = [name for name in wanted if name in existing]
        target_limits = target.topic_max_message_bytes(made_before) if made_before else {}
    narrower = {name: limit for name, limit in target_limits.items() if limit < limits.get(wanted[name], 0)}
    return max(limits.values()), narrower
