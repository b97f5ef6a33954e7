"""Executor side of the Kafka -> Kafka sink: one Spark partition's records produced to the target cluster with
their key, value, headers, timestamp and (by default) partition, by an idempotent producer (acks=all, no
duplicates or reordering from its own retries). Counts are yielded only after the target acknowledged every
record, so the driver records offsets only for replicated data."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa

from connectors.errors import BatchError
from connectors.kafka.connection import client_logger, kept_producer, refused_for_good
from connectors.kafka.record import RecordError
from connectors.kafka.sink_tally import SinkTally, TalliedBatch
from connectors.kafka_sink.config import KafkaSinkConfig
from connectors.outage import Unreachable

NO_TIMESTAMP = -1  # Spark's timestampType for a record without one


@dataclass(frozen=True)
class ReplicaTask:
    bridge_name: str
    config: KafkaSinkConfig
    dead_letter_client_config: dict[str, str]
    max_message_bytes: int  # the largest record a source topic may hold, and its headers
    outage_timeout_s: float


def produce_arrow_batches(task: ReplicaTask, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    cfg = task.config
    tally = SinkTally(task.bridge_name, cfg, task.dead_letter_client_config)
    with kept_producer({  # kept for this Python worker's next task
        **cfg.target_connection().librdkafka_config(), "enable.idempotence": True, "acks": "all",
        "linger.ms": 5, "message.max.bytes": task.max_message_bytes,
        # A target that does not answer fails the batch after the outage timeout, not librdkafka's 5 minutes.
        "message.timeout.ms": int(task.outage_timeout_s * 1000), "logger": client_logger(), "log_level": 3,
    }) as producer:
        _produce(task, tally, producer, batches)
    yield tally.summary()


def _produce(task: ReplicaTask, tally: SinkTally, producer, batches: Iterator[pa.RecordBatch]) -> None:
    from confluent_kafka import KafkaException

    cfg = task.config
    refused: list[tuple[TalliedBatch, int, object]] = []  # for good (too large, invalid): errors.tolerance
    failed: list[tuple[TalliedBatch, int, object]] = []  # the target's fault: the task fails

    def delivery(slot: TalliedBatch, row: int):
        def report(error, message) -> None:
            if error is None:
                slot.counts(row).published += 1
            else:
                (refused if refused_for_good(error) else failed).append((slot, row, error))
        return report

    same_partition = cfg.target_partition == "same"
    for batch in batches:
        slot = TalliedBatch(batch, tally)
        columns = {name: batch.column(name).to_pylist()
                   for name in ("topic", "partition", "key", "value", "headers", "timestamp_ms", "timestampType")}
        for row in range(batch.num_rows):
            timestamp_type = columns["timestampType"][row]
            kwargs = {
                "key": columns["key"][row], "value": columns["value"][row],
                "headers": [(h["key"], h["value"]) for h in columns["headers"][row] or []],
                "on_delivery": delivery(slot, row),
            }
            if timestamp_type != NO_TIMESTAMP and columns["timestamp_ms"][row] is not None:
                kwargs["timestamp"] = columns["timestamp_ms"][row]
            if same_partition:
                kwargs["partition"] = columns["partition"][row]
            target = cfg.target_topic(columns["topic"][row])
            while True:
                try:
                    producer.produce(target, **kwargs)
                    break
                except BufferError:  # the local queue is full: let acknowledgements drain it
                    producer.poll(0.1)
                except KafkaException as exc:
                    if not refused_for_good(exc.args[0]):
                        raise
                    refused.append((slot, row, exc.args[0]))
                    break
            producer.poll(0)
    left = producer.flush(task.outage_timeout_s)
    if left:
        raise Unreachable(f"Kafka at {cfg.target_bootstrap_servers} did not acknowledge {left} records within "
                          f"{task.outage_timeout_s:.0f} s; the run recorded nothing")
    if failed:
        slot, row, error = failed[0]
        raise BatchError(f"{slot.record(row).where}: the target Kafka at {cfg.target_bootstrap_servers} refused "
                         f"{len(failed)} records: {error.str()}")
    for slot, row, error in refused:
        tally.reject(slot.record(row), "KAFKA_PRODUCE", RecordError(f"the target Kafka refused it: {error.str()}"))
    tally.flush_dead_letters()
