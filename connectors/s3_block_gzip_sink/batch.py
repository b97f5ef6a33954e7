"""Driver side of the archive sink: resume from the S3 cursors, run the tasks, settle the cursors."""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from connectors.bridge import BatchSettings
from connectors.kafka.admin import BatchPlan, KafkaAdmin, Offsets
from connectors.kafka.dead_letter import dead_letter_client_config
from connectors.kafka.outages import kafka_outages_named
from connectors.framework.spark_read import deliver_offset_ranges
from connectors.s3_block_gzip_sink.config import S3BlockGzipSinkConfig
from connectors.s3_block_gzip_sink.store import Cursor, read_cursor, s3_client, s3_outages_named, write_cursor
from connectors.s3_block_gzip_sink.write import SUMMARY_SCHEMA, archive_arrow_batches

COUNTERS = ("records", "files", "bytes_uncompressed", "bytes_written", "skipped", "filtered")


@dataclass
class ArchiveBatchResult:
    plan: BatchPlan
    duration_s: float = 0.0
    totals: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0))
    per_partition: dict[str, dict[str, int]] = field(default_factory=dict)


@dataclass(frozen=True)
class ArchiveStart:
    """Where the archive goes on: each partition's cursor in S3 (None: none yet), and the position to go on from."""

    partitions: dict[str, list[int]]
    cursors: dict[tuple[str, int], Cursor | None]
    resume: Offsets


def archive_start(config: S3BlockGzipSinkConfig, kafka: KafkaAdmin, s3, recorded: Offsets | None) -> ArchiveStart:
    """At a partition's cursor, else where the bridge last recorded (`recorded`, its asset metadata); a partition in
    neither starts at the initial offsets."""
    with kafka_outages_named(kafka.connection.bootstrap_servers,
                             f"listing the partitions of {config.topics or config.topics_regex}"):
        partitions = kafka.partitions(config.topic_list() or None, config.topics_regex)
    with s3_outages_named(s3, f"reading the archive's cursors in s3://{config.s3_bucket}/{config.key_prefix()}"):
        cursors = {(t, p): read_cursor(s3, config, t, p) for t, ps in partitions.items() for p in ps}
    return ArchiveStart(partitions, cursors, at_cursors(cursors, recorded or {}))


def at_cursors(cursors: dict[tuple[str, int], Cursor | None], position: Offsets) -> Offsets:
    """Each partition at its cursor, else at `position`; a partition in neither is left out."""
    resume: Offsets = {}
    for (t, p), cursor in cursors.items():
        if cursor is not None:
            resume.setdefault(t, {})[p] = cursor.next_offset
        elif p in position.get(t, {}):
            resume.setdefault(t, {})[p] = position[t][p]
    return resume


def run_archive_batch(
    spark: SparkSession,
    config: S3BlockGzipSinkConfig,
    kafka: KafkaAdmin,
    batch: BatchSettings,
    consumer_group: str,
    bridge_name: str,
    recorded: Offsets | None = None,
) -> ArchiveBatchResult:
    """Archive from the S3 cursors; a partition without one starts where the bridge's last batch ended
    (`recorded`, its asset metadata), else at batch.initial_offsets. (Without `recorded`, a bridge on
    `latest` would start at the moving end every batch until a record landed in a cursor.)"""
    started = time.monotonic()
    s3 = s3_client(config, batch.outage_timeout_seconds)
    bootstrap = kafka.connection.bootstrap_servers
    start = archive_start(config, kafka, s3, recorded)
    with kafka_outages_named(bootstrap, "planning the batch"):
        plan = kafka.plan_batch(start.partitions, start.resume, batch.max_records, batch.initial_offsets, consumer_group,
                                config.isolation_level)
    result = ArchiveBatchResult(plan)
    last_index: dict[tuple[str, int], str | None] = {tp: c.index if c else None for tp, c in start.cursors.items()}
    if plan.total_records:
        archive = functools.partial(archive_arrow_batches, config, batch.outage_timeout_seconds,
                                    dead_letter_client_config(kafka, config), bridge_name)
        with kafka_outages_named(bootstrap, "reading the batch"):
            rows = deliver_offset_ranges(spark, kafka.connection, plan.ranges, batch.outage_timeout_seconds,
                                         archive, SUMMARY_SCHEMA, consumer_group, config.reads_kafka_headers,
                                         config.isolation_level)
        for row in rows:
            tp = (row["topic"], row["partition"])
            counts = result.per_partition.setdefault(f"{tp[0]}-{tp[1]}", dict.fromkeys(COUNTERS, 0))
            for name in COUNTERS:
                counts[name] += row[name]
                result.totals[name] += row[name]
            last_index[tp] = row["last_index"] or last_index.get(tp)
    # Every range is archived: cursors move to its end, past gaps at its tail (compaction, markers).
    with s3_outages_named(s3, f"writing the archive's cursors in s3://{config.s3_bucket}/{config.key_prefix()}"):
        for r in plan.ranges:
            write_cursor(s3, config, r.topic, r.partition, Cursor(last_index.get((r.topic, r.partition)), r.end))
    result.duration_s = time.monotonic() - started
    return result
