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
    """ReplicaWriter's counterpart under exactly once. Each source partition it is put records of (a batch's task has
    one; an always-on round has each partition that brought records) gets its slot, taken with its first records:
    its own producer and transaction, committed at `flush` (and every transaction.boundary.interval.ms within)."""

    def __init__(self, target: ReplicaTarget, tally: SinkTally):
        super().__init__(tally)
        self.target = target
        self._holding = contextlib.ExitStack()
        self._slots: dict[tuple[str, int], _Slot] = {}

    def put(self, records: pa.RecordBatch) -> None:
        if not records.num_rows:
            return
        for (topic, partition), part in _by_partition(records):
            slot = self._slots.get((topic, partition))
            if slot is None:
                slot = self._slots[(topic, partition)] = _Slot(self.target, self._holding, topic, partition)
            slot.put(part, self.tally)

    def flush(self) -> None:
        for slot in self._slots.values():
            slot.flush(self.tally)

    def __exit__(self, *exc_info) -> bool | None:
        return self._holding.__exit__(*exc_info)


def _by_partition(records: pa.RecordBatch) -> list[tuple[tuple[str, int], pa.RecordBatch]]:
    topics, partitions = records.column("topic"), records.column("partition")
    first = (topics[0].as_py(), partitions[0].as_py())
    if pc.all(pc.equal(partitions, first[1])).as_py() and pc.all(pc.equal(topics, first[0])).as_py():
        return [(first, records)]  # a task's, or a round's batch: one partition
    keys = sorted(set(zip(topics.to_pylist(), partitions.to_pylist())))
    return [((t, p), records.filter(pc.and_(pc.equal(topics, t), pc.equal(partitions, p)))) for t, p in keys]


class _Slot:
    """One source partition's slot: its transactional producer (fencing any older one of the slot) with a
    transaction open, and the offset after the last record sent in it."""

    def __init__(self, target: ReplicaTarget, holding: contextlib.ExitStack, topic: str, partition: int):
        positions, config = target.positions, target.config
        self.target, self.positions = target, positions
        self.key, self.what = position_key(topic, partition), f"{topic}-{partition}"
        self.slot = slot_of(self.key, target.positions_partitions)
        self.producer = holding.enter_context(holding_slot(
            target.producer_config(), positions, self.slot, self.key, TRANSACTION_TIMEOUT_MS, name=self.key))
        # Only now, holding the slot, is its last committed offset final: no older producer can commit.
        committed = positions.latest(self.slot, self.key)
        self.after = committed["next_offset"] if committed else -1
        self.sends = Sends(target, in_transaction=True)
        self.next_offset: int | None = None  # after the last record sent in the open transaction
        self.interval_s = (config.transaction_boundary_interval_ms / 1000
                           if config.transaction_boundary == "interval" else None)
        self.opened = time.monotonic()

    def put(self, records: pa.RecordBatch, tally: SinkTally) -> None:
        records = records.filter(pc.greater_equal(records.column("offset"), self.after))
        if not records.num_rows:
            return
        self.sends.send(self.producer, TalliedBatch(records, tally))
        self.next_offset = records.column("offset")[-1].as_py() + 1
        if self.interval_s is not None and time.monotonic() - self.opened >= self.interval_s:
            self._commit(tally)
            self.producer.begin_transaction()
            self.opened = time.monotonic()

    def flush(self, tally: SinkTally) -> None:
        if self.next_offset is None:  # everything was committed before: nothing to add
            self.producer.abort_transaction()
            return
        self._commit(tally)

    def _commit(self, tally: SinkTally) -> None:
        """The part's records acknowledged, then the source offset after them written and the transaction
        committed; a record the target refused aborts it (nothing of it becomes visible) and fails the task naming
        the record."""
        try:
            self.sends.settle(self.producer, tally)
        except Exception:
            with contextlib.suppress(Exception):  # a fenced producer cannot abort: its records are never visible
                self.producer.abort_transaction()
            raise
        self.positions.record(self.producer, self.slot, self.key, {"next_offset": self.next_offset})
        commit(self.producer, f"source partition {self.what}")
        self.after, self.next_offset = self.next_offset, None
