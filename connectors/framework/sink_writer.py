"""The executor contract of the Kafka-reading sinks, in the spirit of Kafka Connect's SinkTask: a writer is opened in
a Spark task (clients cannot be pickled) with the task's tally, is `put` columnar batches of Kafka records, and
`flush` returns once the destination acknowledged everything put. The shared task body below does the rest once for
every sink: the tally (counts, latency, errors.tolerance and the dead-letter queue) and the summary the driver turns
into positions. The driver reads the ranges and records the positions (sink_batch.py, sink_stream.py)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable, Iterator

import numpy as np
import pyarrow as pa

from connectors.config.common import ErrorHandlingKeys
from connectors.kafka.record import records_from_arrow
from connectors.framework.sink_tally import SinkTally
from connectors.transforms.columnar import ColumnarChain


class SinkWriter(ABC):
    """One Spark task's writer. It counts what it is put into `tally` (a TalliedBatch per batch) and sends what
    cannot be delivered through `tally.reject` (errors.tolerance). Used as a context manager: a writer holding a
    client lets go of it on leaving, and forgets a kept one when it leaves with an error."""

    def __init__(self, tally: SinkTally):
        self.tally = tally
        # Asked by a writer whose put or flush waits on its destination: False once the task must stop (its run's
        # lease lapsed); such a writer may then drop what it has not sent and raise DeliveryAbandoned. None: a task
        # with nothing to ask (a stream's, which keeps what is on its way at a stop).
        self.keep_going: Callable[[], bool] | None = None

    @abstractmethod
    def put(self, records: pa.RecordBatch) -> None:
        """Hands over a batch of Kafka records (range_reader.RECORD_SCHEMA); may send them before returning."""

    @abstractmethod
    def flush(self) -> None:
        """Returns once the destination acknowledged every record put, or raises (and nothing is recorded)."""

    def __enter__(self) -> SinkWriter:
        return self

    def __exit__(self, *exc_info) -> bool | None:
        return None


# Made in the task from what the driver prepared (a class over its settings, for example): pickled to the executors.
OpenWriter = Callable[[SinkTally], SinkWriter]


@dataclass(frozen=True)
class TallySettings:
    bridge_name: str  # in the dead letters' context headers
    errors: ErrorHandlingKeys  # errors.tolerance and the dead-letter topic
    dead_letter_client_config: dict[str, str]
    # The bridge's transforms, for a sink whose writer takes records as Kafka has them (no converters): only the
    # columnar ones (Filter, InsertHeader, DropHeaders, RegexRouter, TimestampRouter, any predicate), its config
    # refuses the others.
    transforms: ColumnarChain | None = None


def write_records(tally_settings: TallySettings, open_writer: OpenWriter, batches: Iterator[pa.RecordBatch],
                  keep_going: Callable[[], bool] | None = None) -> Iterator[list[dict]]:
    """A task's records through its sink's writer: yields the task's summary only after the destination (or the
    dead-letter topic) acknowledged every record, so that the driver records offsets only for delivered data.
    `keep_going` is the task's lease (SinkWriter.keep_going)."""
    tally = SinkTally(tally_settings.bridge_name, tally_settings.errors, tally_settings.dead_letter_client_config)
    chain = tally_settings.transforms
    with open_writer(tally) as writer:
        writer.keep_going = keep_going
        for batch in batches:
            if chain is not None:
                batch = through_transforms(chain, tally, batch)
            if batch.num_rows:
                writer.put(batch)
        writer.flush()
    tally.flush_dead_letters()
    yield tally.summary()


# The column of the topic a router gave each record, present once a router renamed one in the batch.
ROUTED_TOPIC = "routed_topic"


def through_transforms(chain: ColumnarChain, tally: SinkTally, batch: pa.RecordBatch) -> pa.RecordBatch:
    """The batch after the transforms: with the headers they gave each record, without the records a Filter
    dropped (counted read and skipped here). Each record keeps its Kafka topic in `topic` (the counts and positions
    are the source partition's); the topic a router gave it is in ROUTED_TOPIC (`target_topics`)."""
    transformed = chain.apply(batch)
    if "headers" in batch.schema.names:
        index = batch.schema.get_field_index("headers")
        batch = batch.set_column(index, "headers", transformed.batch.column("headers"))
    if transformed.topics_changed:
        batch = batch.append_column(ROUTED_TOPIC, transformed.batch.column("topic"))
    if transformed.dropped is None and not transformed.failed:
        return batch
    out = np.zeros(batch.num_rows, dtype=bool) if transformed.dropped is None else transformed.dropped.copy()
    if transformed.failed:
        # Through errors.tolerance (with `none` the task fails here), as a Connect worker treats a transform's error.
        failed_rows = sorted(transformed.failed)
        failed = batch.take(pa.array(failed_rows))
        tally.read_batch(failed)
        for row, record in zip(failed_rows, records_from_arrow(failed)):
            error = transformed.failed[row]
            tally.reject(record, error.stage, error)
        out[failed_rows] = True
    if transformed.dropped is not None:
        dropped = batch.filter(pa.array(transformed.dropped))
        tally.read_batch(dropped)
        for topic, partition in zip(dropped.column("topic").to_pylist(), dropped.column("partition").to_pylist()):
            tally.partition(topic, partition).skipped += 1
    return batch.filter(pa.array(~out))


def target_topics(batch: pa.RecordBatch) -> list[str]:
    """Each record's topic as a sink routed by `${topic}` sends it: the one a router gave it, else its own, as a
    Kafka Connect sink task is handed the record after the transforms."""
    return batch.column(ROUTED_TOPIC if ROUTED_TOPIC in batch.schema.names else "topic").to_pylist()
