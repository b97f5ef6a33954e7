"""Driver side of a Kafka sink: plan one micro-batch, run it on Spark, report where it got to."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from pyspark.sql import SparkSession

from connectors.bridge import BatchSettings
from connectors.config.common import KafkaTopicsKeys
from connectors.kafka.admin import BatchPlan, KafkaAdmin, Offsets
from connectors.framework.delivered import past_delivered
from connectors.kafka.outages import kafka_outages_named
from connectors.framework.sink_tally import COUNTERS, SUMMARY_SCHEMA
from connectors.framework.spark_read import BatchProgress, Deliver, deliver_offset_ranges


@dataclass
class SinkBatchResult:
    plan: BatchPlan
    duration_s: float
    totals: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    per_partition: dict[str, dict[str, int]] = field(default_factory=dict)  # "topic-partition" -> counts
    dead_letter_refusals: list[str] = field(default_factory=list)  # the records named, a few per partition

    @property
    def next_offsets(self) -> Offsets:
        return self.plan.next_offsets

    @property
    def records_per_second(self) -> float:
        return self.totals["records"] / self.duration_s if self.duration_s > 0 else 0.0


def run_kafka_sink_batch(
    spark: SparkSession,
    config: KafkaTopicsKeys,
    kafka: KafkaAdmin,
    recorded: Offsets,
    batch: BatchSettings,
    consumer_group: str,
    deliver: Deliver,
) -> SinkBatchResult:
    """Move records from the recorded offsets towards the end offsets seen now.

    `deliver` runs in the executors over each task's records and yields `SinkTally.summary()` only after the
    destination acknowledged every message (or the DLQ took it); any failure fails the run, and then
    nothing may be recorded: the next run reads the same range again.
    """
    started = time.monotonic()
    bootstrap = kafka.connection.bootstrap_servers
    with kafka_outages_named(bootstrap, f"planning the batch of {config.topics or config.topics_regex}"):
        partitions = kafka.partitions(config.topic_list() or None, config.topics_regex)
        # An earlier batch's part delivered but not recorded (its run was killed) is not sent again.
        recorded = past_delivered(kafka, consumer_group, partitions, recorded)
        plan = kafka.plan_batch(partitions, recorded, batch.max_records, batch.initial_offsets, consumer_group,
                                config.isolation_level)
    result = SinkBatchResult(plan=plan, duration_s=0.0)
    if plan.total_records:
        with kafka_outages_named(bootstrap, "reading the batch"):
            rows = deliver_offset_ranges(spark, kafka.connection, plan.ranges, batch.outage_timeout_seconds,
                                         deliver, SUMMARY_SCHEMA, consumer_group, config.reads_kafka_headers,
                                         config.isolation_level,
                                         BatchProgress(consumer_group, uuid.uuid4().hex[:16],
                                                       batch.progress_interval_ms / 1000),
                                         batch.min_partitions)
        for row in rows:
            counts = result.per_partition.setdefault(f"{row['topic']}-{row['partition']}", dict.fromkeys(COUNTERS, 0))
            for name in COUNTERS:
                counts[name] += row[name]
                result.totals[name] += row[name]
            if row["refusals"]:
                result.dead_letter_refusals += row["refusals"].split("\n")
    result.duration_s = time.monotonic() - started
    return result
