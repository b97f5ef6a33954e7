"""The Kafka sink under `exactly.once.support=required`, as MirrorMaker 2 under KIP-656: each source partition is a
task slot with a transactional producer on the target cluster (`<positions topic>.<topic>/<partition>`); its
records and the source offset after them commit in one transaction, the offset in a positions topic on the target
(`slot_of` places the slots in its partitions), per part of a task (`transaction.boundary=poll`: a task's part of
`batch.progress_interval_ms`) or every `transaction.boundary.interval.ms` within it.

Once the task holds the slot (a killed run's orphan of that partition is fenced), records before the slot's last
committed offset are dropped: a range a killed run had committed is not written again. A record the target refuses
after it was sent aborts the transaction and fails the task naming it; one refused before it was sent (too large)
goes through errors.tolerance, and its dead letter (on the source cluster) is outside the transaction: at least once."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import time

import pyarrow as pa
import pyarrow.compute as pc

from connectors.kafka.admin import KafkaAdmin, Offsets
from connectors.kafka.outages import kafka_outages_named
from connectors.kafka.sink_tally import SinkTally, TalliedBatch
from connectors.kafka.sink_writer import OpenWriter, SinkWriter
from connectors.kafka.transactions import PositionsTopic, commit, holding_slot, slot_of
from connectors.kafka_sink.write import ReplicaTarget, Sends

# Long enough for a large part in one transaction (the brokers' default transaction.max.timeout.ms); a killed run's
# open transaction is aborted sooner, when the next run's producer of its slot starts.
TRANSACTION_TIMEOUT_MS = 900_000
# A new positions topic's partitions: the slots (source partitions) share them by a hash of their key.
POSITIONS_PARTITIONS = 8


def position_key(topic: str, partition: int) -> str:
    """What a position in the positions topic is the position in ('/' is never in a topic's name)."""
    return f"{topic}/{partition}"


def with_transactions(target: ReplicaTarget, bridge_name: str, source: KafkaAdmin, target_admin: KafkaAdmin,
                      recorded: Offsets) -> tuple[OpenWriter, Offsets]:
    """Driver side: how a task opens its transactional writer, with the positions topic on the target (made when
    missing), and the recorded offsets moved up to what the transactions committed: a run killed after its commit
    left the metadata behind."""
    config = target.config
    positions = PositionsTopic(config.positions_topic_name(bridge_name), config.target_connection().librdkafka_config())
    with kafka_outages_named(config.target_bootstrap_servers, f"reading the positions topic {positions.name}"):
        partitions = positions.ensure_hashed(target_admin, POSITIONS_PARTITIONS)
        sources = source.partitions(config.topic_list() or None, config.topics_regex)
        keys = {position_key(t, p): (t, p) for t, ps in sources.items() for p in ps}
        committed = positions.latest_by_key({key: slot_of(key, partitions) for key in keys})
    moved = {t: dict(ps) for t, ps in recorded.items()}
    for key, value in committed.items():
        topic, partition = keys[key]
        if value["next_offset"] > moved.get(topic, {}).get(partition, -1):
            moved.setdefault(topic, {})[partition] = value["next_offset"]
    target = dataclasses.replace(target, positions=positions, positions_partitions=partitions)
    return functools.partial(TransactionalReplicaWriter, target), moved


class TransactionalReplicaWriter(SinkWriter):
    """ReplicaWriter's counterpart under exactly once; a task's records are one source partition's. The slot is
    taken with the first records put."""

    def __init__(self, target: ReplicaTarget, tally: SinkTally):
        super().__init__(tally)
        self.target = target
        self._holding = contextlib.ExitStack()
        self._producer = None
        self._sends = Sends(target, in_transaction=True)
        self._next_offset: int | None = None  # after the last record sent in the open transaction

    def _take_slot(self, topic: str, partition: int) -> None:
        positions = self.target.positions
        self._key, self._what = position_key(topic, partition), f"{topic}-{partition}"
        self._slot = slot_of(self._key, self.target.positions_partitions)
        self._producer = self._holding.enter_context(holding_slot(
            self.target.producer_config(), positions, self._slot, self._key, TRANSACTION_TIMEOUT_MS, name=self._key))
        # Only now, holding the slot, is its last committed offset final: no older producer can commit.
        committed = positions.latest(self._slot, self._key)
        self._after = committed["next_offset"] if committed else -1
        config = self.target.config
        self._interval_s = (config.transaction_boundary_interval_ms / 1000
                            if config.transaction_boundary == "interval" else None)
        self._opened = time.monotonic()

    def put(self, records: pa.RecordBatch) -> None:
        if not records.num_rows:
            return
        if self._producer is None:
            self._take_slot(records.column("topic")[0].as_py(), records.column("partition")[0].as_py())
        records = records.filter(pc.greater_equal(records.column("offset"), self._after))
        if not records.num_rows:
            return
        self._sends.send(self._producer, TalliedBatch(records, self.tally))
        self._next_offset = records.column("offset")[-1].as_py() + 1
        if self._interval_s is not None and time.monotonic() - self._opened >= self._interval_s:
            self._commit()
            self._producer.begin_transaction()
            self._opened = time.monotonic()

    def flush(self) -> None:
        if self._producer is None:
            return
        if self._next_offset is None:  # everything was committed before: nothing to add
            self._producer.abort_transaction()
            return
        self._commit()

    def _commit(self) -> None:
        """The part's records acknowledged, then the source offset after them written and the transaction
        committed; a record the target refused aborts it (nothing of it becomes visible) and fails the task naming
        the record."""
        try:
            self._sends.settle(self._producer, self.tally)
        except Exception:
            with contextlib.suppress(Exception):  # a fenced producer cannot abort: its records are never visible
                self._producer.abort_transaction()
            raise
        self.target.positions.record(self._producer, self._slot, self._key, {"next_offset": self._next_offset})
        commit(self._producer, f"source partition {self._what}")
        self._next_offset = None

    def __exit__(self, *exc_info) -> bool | None:
        return self._holding.__exit__(*exc_info)
