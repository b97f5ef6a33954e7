"""S3BlockGzipSinkConnector as a plugin: Kafka -> Block-GZIP files in S3. It resumes from its cursor objects in S3,
and from the Kafka offsets recorded here where a partition has none."""

from __future__ import annotations

from typing import TYPE_CHECKING

from connectors import endpoints
from connectors.framework.plugin_parts import KAFKA_LAG, kafka_source_label, kafka_topics_read, partitions_table
from connectors.plugin import BatchReport, Bridge, ConnectorPlugin, ReportKeys, Systems
from connectors.s3_block_gzip_sink.config import S3BlockGzipSinkConfig
from connectors.s3_block_gzip_sink.places import ARCHIVE_OFFSETS

if TYPE_CHECKING:  # Spark, Arrow and boto3 are imported by runs, not by the code location's load
    from connectors.s3_block_gzip_sink.batch import ArchiveBatchResult

# The records of an always-on archive's round (one file per partition), held in memory while it gathers.
_MOST_RECORDS_PER_ROUND = 10_000


def _run_batch(systems: Systems, bridge: Bridge, position) -> BatchReport:
    from connectors.s3_block_gzip_sink.batch import run_archive_batch

    with systems.spark.batch_session(bridge.name) as spark:
        result = run_archive_batch(spark, bridge.config, systems.kafka.admin(), bridge.batch, bridge.consumer_group,
                                   bridge.name, position)
    return _report(result)


def _archived(totals: dict[str, int]) -> int:
    """The records written to files: those read, less those skipped (errors.tolerance=all) and filtered."""
    return totals["records"] - totals["skipped"] - totals["filtered"]


def _report(result: ArchiveBatchResult) -> BatchReport:
    t = result.totals
    archived = _archived(t)
    rate = round(t["records"] / result.duration_s, 1) if result.duration_s > 0 else 0.0
    values = {
        "records_read": t["records"],
        "records_archived": archived,
        "records_skipped": t["skipped"],
        "records_filtered": t["filtered"],
        "files_written": t["files"],
        "bytes_uncompressed": t["bytes_uncompressed"],
        "bytes_written": t["bytes_written"],
        "duration_seconds": round(result.duration_s, 3),
        "records_per_second": rate,
        "lag_remaining": result.plan.lag_after(),
        "partitions": partitions_table(result.plan, result.per_partition, ("records", "files", "skipped")),
    }
    warnings = ()
    if t["skipped"]:
        warnings = (f"{t['skipped']} records could not become lines and were skipped (errors.tolerance=all; "
                    "dead-lettered if a dead-letter topic is set)",)
    line = f"{archived} records archived in {t['files']} files in {result.duration_s:.1f}s{_filtered(t)}"
    return BatchReport(archived, result.plan.next_offsets, values,
                       ("records_read", "records_archived", "records_skipped", "records_filtered", "files_written",
                        "bytes_uncompressed", "bytes_written"),
                       line, warnings, result.duration_s)


def _filtered(totals: dict[str, int]) -> str:
    return f" ({totals['filtered']} filtered by the transforms)" if totals["filtered"] else ""


def _stream_line(totals: dict[str, int], behind: int) -> str:
    return f"{_archived(totals)} records archived in {totals['files']} files{_filtered(totals)}; {behind} behind"


def _open_stream(systems: Systems, bridge: Bridge, position):
    """The archive always on: the Kafka sinks' stream (stream_task.py) whose rounds are files. A round gathers a
    partition's records for rotate.schedule.interval.ms (or flush.size of them) and is archived as one file, data,
    index and cursor, as a batch's range is; only then is the position past it committed. It goes on from the
    cursors, as a batch does, at its start and at every start again: a round archived by a task that failed before
    committing it is not archived a second time (its file would be written again, with other bounds, under a name
    a reader may be reading)."""
    import functools

    from connectors.kafka.dead_letter import dead_letter_client_config
    from connectors.framework.sink_stream import Rounds, StreamCounts, open_kafka_sink_stream
    from connectors.s3_block_gzip_sink.batch import COUNTERS, ArchiveBatchResult, archive_start
    from connectors.s3_block_gzip_sink.store import s3_client
    from connectors.s3_block_gzip_sink.write import archive_arrow_batches

    config, kafka = bridge.config, systems.kafka.admin()
    s3 = s3_client(config, bridge.batch.outage_timeout_seconds)
    deliver = functools.partial(archive_arrow_batches, config, bridge.batch.outage_timeout_seconds,
                                dead_letter_client_config(kafka, config), bridge.name)
    rotate_ms = (config.rotate_schedule_interval_ms if config.rotate_schedule_interval_ms != -1
                 else bridge.continuous.commit_interval_ms)
    # A round is held in memory while it gathers: a file of a stream holds at most as many records as a round.
    rounds = Rounds(linger_s=rotate_ms / 1000, records=min(config.flush_size, _MOST_RECORDS_PER_ROUND))
    counts = StreamCounts(COUNTERS, lambda r: _report(ArchiveBatchResult(r.plan, r.duration_s, r.totals,
                                                                         r.per_partition)), _stream_line)
    return open_kafka_sink_stream(systems, bridge, archive_start(config, kafka, s3, position).resume,
                                  lambda: deliver, rounds, counts=counts,
                                  resume=lambda reached: archive_start(config, kafka, s3, reached).resume)


def _route(bridge: Bridge) -> str:
    cfg = bridge.config
    return f"Kafka {kafka_source_label(cfg)} -> s3://{cfg.s3_bucket}/{cfg.key_prefix()} (Block-GZIP)"


CONNECTOR = ConnectorPlugin(
    name="S3BlockGzipSinkConnector",
    java_class="bridge.s3.S3BlockGzipSinkConnector",
    config_model=S3BlockGzipSinkConfig,
    kinds=("kafka", "s3", "spark"),
    systems=("kafka", "spark"),
    route=_route,
    run_batch=_run_batch,
    open_stream=_open_stream,
    position=ARCHIVE_OFFSETS,
    signal=KAFKA_LAG,
    reads=kafka_topics_read,
    writes=lambda bridge: (endpoints.s3_prefix(bridge.config.s3_bucket, bridge.config.key_prefix()),),
    keys=ReportKeys("records", read="records_read", delivered="records_archived", lag="lag_remaining",
                    rejected=("records_skipped",),
                    counted=(("records_skipped", "records_skipped"), ("bytes_written", "bytes_written"))),
    example={"name": "orders_archive", "topics": "orders", "s3.bucket": "my-archive"},
)
