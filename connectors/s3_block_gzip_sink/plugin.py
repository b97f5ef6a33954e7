"""S3BlockGzipSinkConnector as a plugin: Kafka -> Block-GZIP files in S3. It resumes from its cursor objects in S3,
and from the Kafka offsets recorded here where a partition has none."""

from __future__ import annotations

from connectors import endpoints
from connectors.kafka.plugin_parts import KAFKA_LAG, KAFKA_OFFSETS, kafka_source_label, kafka_topics_read, partitions_table
from connectors.plugin import BatchReport, Bridge, ConnectorPlugin, ReportKeys, Systems
from connectors.s3_block_gzip_sink.config import S3BlockGzipSinkConfig


def _run_batch(systems: Systems, bridge: Bridge, position) -> BatchReport:
    from connectors.s3_block_gzip_sink.batch import run_archive_batch

    with systems.spark.batch_session(bridge.name) as spark:
        result = run_archive_batch(spark, bridge.config, systems.kafka.admin(), bridge.batch, bridge.consumer_group,
                                   bridge.name, position)
    t = result.totals
    archived = t["records"] - t["skipped"]
    rate = round(t["records"] / result.duration_s, 1) if result.duration_s > 0 else 0.0
    values = {
        "records_read": t["records"],
        "records_archived": archived,
        "records_skipped": t["skipped"],
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
    line = f"{archived} records archived in {t['files']} files in {result.duration_s:.1f}s"
    return BatchReport(archived, result.plan.next_offsets, values,
                       ("records_read", "records_archived", "records_skipped", "files_written", "bytes_uncompressed", "bytes_written"),
                       line, warnings, result.duration_s)


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
    position=KAFKA_OFFSETS,
    signal=KAFKA_LAG,
    reads=kafka_topics_read,
    writes=lambda bridge: (endpoints.s3_prefix(bridge.config.s3_bucket, bridge.config.key_prefix()),),
    keys=ReportKeys("records", read="records_read", delivered="records_archived", lag="lag_remaining",
                    rejected=("records_skipped",),
                    counted=(("records_skipped", "records_skipped"), ("bytes_written", "bytes_written"))),
)
