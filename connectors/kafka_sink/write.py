"""Executor side of the Kafka -> Kafka sink: one Spark partition's records produced to the target cluster with
their key, value, headers, timestamp and (by default) partition, by an idempotent producer (acks=all, no
duplicates or reordering from its own retries). The writer (sink_writer.SinkWriter) flushes only once the
target acknowledged every record, so the driver records offsets only for replicated data. Before a batch, the
driver makes the target topics ready (prepare_targets)."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

import pyarrow as pa

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
    from confluent_kafka import KafkaError

NO_TIMESTAMP = -1  # Spark's timestampType for a record without one
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
        self.refused: list[tuple[TalliedBatch, int, object]] = []
        self.failed: list[tuple[TalliedBatch, int, object]] = []

    def send(self, producer, slot: TalliedBatch, keep_going: Callable[[], bool] | None = None) -> None:
        """Hands the batch's records to the producer: key, value, headers, timestamp and (by default) partition."""
        from confluent_kafka import KafkaException

        cfg = self.task.config
        batch = slot.batch
        columns = {name: batch.column(name).to_pylist()
                   for name in ("topic", "partition", "key", "value", "headers", "timestamp_ms", "timestampType")}
        # With checkpoints, where each partition's last record of the batch landed (an always-on stream pairs source
        # and target positions from it): one row per partition, not a call per record acknowledged.
        landing_rows = _last_row_per_partition(slot, columns) if cfg.checkpoints else frozenset()

        def delivery(row: int):
            def report(error, message) -> None:
                if error is None:
                    slot.counts(row).published += 1
                    if row in landing_rows:
                        slot.tally.landed(columns["topic"][row], columns["partition"][row],
                                          batch.column("offset")[row].as_py() + 1, message.offset() + 1)
                elif refused_for_good(error) and not self.in_transaction:
                    self.refused.append((slot, row, error))
                else:
                    self.failed.append((slot, row, error))
            return report

        targets: dict[str, str] = {}  # source topic -> target topic, named once per batch
        for row in range(batch.num_rows):
            kwargs = {
                "key": columns["key"][row], "value": columns["value"][row],
                "headers": [(h["key"], h["value"]) for h in columns["headers"][row] or []],
                "on_delivery": delivery(row),
            }
            if columns["timestampType"][row] != NO_TIMESTAMP and columns["timestamp_ms"][row] is not None:
                kwargs["timestamp"] = columns["timestamp_ms"][row]
            if cfg.target_partition == "same":
                kwargs["partition"] = columns["partition"][row]
            target = targets.get(columns["topic"][row])
            if target is None:
                target = targets[columns["topic"][row]] = cfg.target_topic(columns["topic"][row])
            if self.task.target_max_bytes and (refusal := self.task.too_large(
                    target, kwargs["key"], kwargs["value"], kwargs["headers"])) is not None:
                self._refused_before_sending(slot, row, refusal)
                continue
            while True:
                try:
                    producer.produce(target, **kwargs)
                    break
                except BufferError:  # the local queue is full: let acknowledgements drain it
                    producer.poll(0.1 if keep_going is None else KEEP_GOING_LOOK_S)
                    self._look(producer, keep_going)
                except KafkaException as exc:
                    if not refused_for_good(exc.args[0]):
                        raise
                    self._refused_before_sending(slot, row, exc.args[0])
                    break
            if row % POLL_EVERY_RECORDS == POLL_EVERY_RECORDS - 1:
                producer.poll(0)
                self._look(producer, keep_going)

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
        if self.failed:
            slot, row, error = self.failed[0]
            raise BatchError(f"{slot.record(row).where}: the target Kafka at {cfg.target_bootstrap_servers} refused "
                             f"{len(self.failed)} records: {error.str()}")
        for slot, row, error in self.refused:
            tally.reject(slot.record(row), "KAFKA_PRODUCE", RecordError(f"the target Kafka refused it: {error.str()}"))
        self.refused = []
        tally.flush_dead_letters()


def _last_row_per_partition(slot: TalliedBatch, columns: dict[str, list]) -> frozenset[int]:
    if slot.single is not None:  # one partition (a task's range, a round's batch)
        return frozenset({slot.batch.num_rows - 1})
    return frozenset({(t, p): row for row, (t, p) in enumerate(zip(columns["topic"], columns["partition"]))}.values())


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
