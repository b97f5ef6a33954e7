"""A connector plugin in one file: Kafka Connect's example FileStreamSinkConnector (`topics`, `file`), each
record's value appended to a local file as a line, moved by Spark, resuming from the Kafka offsets the bridge
records. Installed with `pip install`, it is found through its entry point; nothing in the host changes."""

from __future__ import annotations

import sys
from typing import Iterator

import pyarrow as pa
from pydantic import Field

from connectors.bridge import Bridge
from connectors.config.common import ConnectorConfig, KafkaTopicsKeys
from connectors.endpoints import Endpoint
from connectors.kafka.plugin_parts import KAFKA_LAG, KAFKA_OFFSETS, kafka_topics_read
from connectors.plugin import BatchReport, ConnectorPlugin, ReportKeys, Systems


class FileStreamSinkConfig(ConnectorConfig, KafkaTopicsKeys):
    file: str = Field(alias="file")


def _lines(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """In the Spark task: each record's value as a line, back to the driver with its place."""
    for batch in batches:
        yield pa.RecordBatch.from_pydict({"partition": batch.column("partition"), "offset": batch.column("offset"),
                                          "line": batch.column("value").cast(pa.string())})


def run_batch(systems: Systems, bridge: Bridge, position) -> BatchReport:
    from pyspark import cloudpickle

    from connectors.kafka.spark_read import deliver_offset_ranges

    # The task function runs in the engine's Python workers, which import functions by module name; this plugin
    # is installed beside the run, not on the engine, so its functions travel by value instead.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    admin, config = systems.kafka.admin(), bridge.config
    partitions = admin.partitions(config.topic_list() or None, config.topics_regex)
    plan = admin.plan_batch(partitions, position, bridge.batch.max_records, bridge.batch.initial_offsets,
                            bridge.consumer_group, config.isolation_level)
    lines = []
    if plan.total_records:
        with systems.spark.batch_session(bridge.name) as spark:
            rows = deliver_offset_ranges(spark, admin.connection, plan.ranges, bridge.batch.outage_timeout_seconds,
                                         _lines, "partition int, offset long, line string", include_headers=False)
        lines = [row["line"] for row in sorted(rows, key=lambda row: (row["partition"], row["offset"]))]
        with open(config.file, "a", encoding="utf-8") as out:  # written before the offsets are recorded
            out.writelines(f"{line}\n" for line in lines)
    return BatchReport(moved=len(lines), position=plan.next_offsets,
                       values={"records_written": len(lines), "lag_remaining": plan.lag_after()},
                       counters=("records_written",), line=f"{len(lines)} lines appended to {config.file}")


CONNECTOR = ConnectorPlugin(
    name="FileStreamSinkConnector",
    java_class="org.apache.kafka.connect.file.FileStreamSinkConnector",
    config_model=FileStreamSinkConfig,
    kinds=("kafka", "file", "spark"),
    systems=("kafka", "spark"),
    route=lambda bridge: f"Kafka {bridge.config.topics} -> file {bridge.config.file}",
    run_batch=run_batch,
    position=KAFKA_OFFSETS,
    signal=KAFKA_LAG,
    reads=kafka_topics_read,
    writes=lambda bridge: (Endpoint(("file", *bridge.config.file.strip("/").split("/")), "file",
                                    f"file {bridge.config.file}"),),
    keys=ReportKeys("records", read="records_written", delivered="records_written", lag="lag_remaining",
                    rejected=()),
)
