"""A connector plugin in one file: Kafka Connect's example FileStreamSinkConnector (`topics`, `file`), each
record's value appended to a local file as a line, moved by Spark, resuming from the Kafka offsets the bridge
records. Installed with `pip install`, it is found through its entry point; nothing in the host changes.

A Kafka-reading sink is its config, its writer and its declaration: the shared driver (`KafkaSink`) reads the
ranges, runs the writer in the Spark tasks, counts, dead-letters (errors.tolerance) and records the positions,
in batches and always on (continuous mode)."""

from __future__ import annotations

import functools
import sys

import pyarrow as pa
from pydantic import Field

from connectors.config.common import ConnectorConfig, ErrorHandlingKeys, KafkaTopicsKeys
from connectors.endpoints import Endpoint
from connectors.framework.sink_plugin import KafkaSink
from connectors.framework.sink_tally import TalliedBatch
from connectors.framework.sink_writer import SinkWriter
from connectors.plugin import Bridge, Systems


class FileStreamSinkConfig(ConnectorConfig, KafkaTopicsKeys, ErrorHandlingKeys):
    file: str = Field(alias="file", description="the file each record's value is appended to, one line each")


class FileWriter(SinkWriter):
    """In a Spark task: the task's lines appended at flush, in one write (the tasks of a batch share the file)."""

    def __init__(self, path: str, tally):
        super().__init__(tally)
        self.path, self.lines = path, []

    def put(self, records: pa.RecordBatch) -> None:
        tallied = TalliedBatch(records, self.tally)  # counted as read
        for row, value in enumerate(records.column("value").to_pylist()):
            if value is None:  # a tombstone has no line
                tallied.counts(row).skipped += 1
            else:
                self.lines.append((value.decode("utf-8", "backslashreplace"), tallied.counts(row)))

    def flush(self) -> None:
        with open(self.path, "a", encoding="utf-8") as out:
            out.write("".join(f"{line}\n" for line, _ in self.lines))
        for _, counts in self.lines:  # written: the driver may record the offsets
            counts.published += 1


def _writer(systems: Systems, bridge: Bridge, kafka):
    # The writer runs in the engine's Python workers, which import classes by module name; this plugin is
    # installed beside the run, not on the engine, so it travels by value instead.
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    return functools.partial(FileWriter, bridge.config.file)


SINK = KafkaSink(prepare=_writer)

CONNECTOR = SINK.plugin(
    name="FileStreamSinkConnector",
    java_class="org.apache.kafka.connect.file.FileStreamSinkConnector",
    config_model=FileStreamSinkConfig,
    writes_to=("file",),
    uses=(),
    route=lambda bridge: f"Kafka {bridge.config.topics} -> file {bridge.config.file}",
    writes=lambda bridge: (Endpoint(("file", *bridge.config.file.strip("/").split("/")), "file",
                                    f"file {bridge.config.file}"),),
    example={"name": "orders_to_file", "topics": "orders", "file": "/tmp/orders.txt"},
)
