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
import threading
import time

import pyarrow as pa
import pyarrow.compute as pc

from connectors.kafka.admin import KafkaAdmin, Offsets
from connectors.kafka.outages import kafka_outages_named
from connectors.framework.sink_tally import SinkTally, TalliedBatch
from connectors.framework.sink_writer import OpenWriter, SinkWriter
from connectors.kafka.transactions import PositionsTopic, abort, commit, holding_slot, slot_of
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
                      recorded: Offsets, keep_slots_for: str | None = None) -> tuple[OpenWriter, Offsets]:
    """Driver side: how a task opens its transactional writer, with the positions topic on the target (made when
    missing), and the recorded offsets moved up to what the transactions committed: a run killed after its commit
    left the metadata behind. `keep_slots_for`: an always-on stream's id (its rounds each open a writer)."""
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
    return functools.partial(TransactionalReplicaWriter, target, keep_slots_for=keep_slots_for), moved


class TransactionalReplicaWriter(SinkWriter):
    """ReplicaWriter's counterpart under exactly once. Each source partition it is put records of (a batch's task has
    one; an always-on round has each partition that brought records) gets its slot, taken with its first records:
    its own producer and transaction, committed at `flush` (and every transaction.boundary.interval.ms within).

    `keep_slots_for` (an always-on stream's writer, opened for each round; the stream's id): a slot left cleanly
    stays held in this process for the partition's next round of the same stream, its producer and its last
    committed offset known, so a round pays no claim transaction and no positions read (`python -m
    bench.exactly_once_always_on`, p50 send to read_committed arrival at 1,000 records/s: 0.29 s with a claim per
    round, 0.13 s with kept slots, 0.05 s at least once). Reusing it
    without a claim is safe: had another producer of the slot started since, this one is fenced and its commit fails
    (and the slot is dropped). Another stream's kept slot is let go, not used: a later run would fail once on it."""

    def __init__(self, target: ReplicaTarget, tally: SinkTally, keep_slots_for: str | None = None):
        super().__init__(tally)
        self.target, self._keep_for = target, keep_slots_for
        self._slots: dict[tuple[str, int], _Slot] = {}

    def put(self, records: pa.RecordBatch) -> None:
        if not records.num_rows:
            return
        for (topic, partition), part in _by_partition(records):
            slot = self._slots.get((topic, partition))
            if slot is None:
                kept = self._keep_for and _Slot.kept(self.target, topic, partition, self._keep_for)
                slot = self._slots[(topic, partition)] = kept or _Slot(self.target, topic, partition)
            slot.put(part, self.tally)

    def flush(self) -> None:
        for slot in self._slots.values():
            slot.flush(self.tally)

    def __exit__(self, *exc_info) -> bool | None:
        for slot in self._slots.values():
            if self._keep_for and exc_info[0] is None:
                slot.keep(self._keep_for)
            else:
                slot.release(*exc_info)
        return None


def _by_partition(records: pa.RecordBatch) -> list[tuple[tuple[str, int], pa.RecordBatch]]:
    topics, partitions = records.column("topic"), records.column("partition")
    first = (topics[0].as_py(), partitions[0].as_py())
    if pc.all(pc.equal(partitions, first[1])).as_py() and pc.all(pc.equal(topics, first[0])).as_py():
        return [(first, records)]  # a task's, or a round's batch: one partition
    keys = sorted(set(zip(topics.to_pylist(), partitions.to_pylist())))
    return [((t, p), records.filter(pc.and_(pc.equal(topics, t), pc.equal(partitions, p)))) for t, p in keys]


class _Slot:
    """One source partition's slot: its transactional producer (fencing any older one of the slot), whether a
    transaction is open, and the offsets around it."""

    _kept: dict[tuple[str, str], _Slot] = {}  # (positions topic, key) -> a slot held for the partition's next round
    _kept_lock = threading.Lock()

    def __init__(self, target: ReplicaTarget, topic: str, partition: int):
        positions, config = target.positions, target.config
        self.target, self.positions = target, positions
        self.key, self.what = position_key(topic, partition), f"{topic}-{partition}"
        self.slot = slot_of(self.key, target.positions_partitions)
        self._holding = contextlib.ExitStack()
        self.producer = self._holding.enter_context(holding_slot(
            target.producer_config(), positions, self.slot, self.key, TRANSACTION_TIMEOUT_MS, name=self.key))
        self.open = True  # holding_slot opens one
        # Only now, holding the slot, is its last committed offset final: no older producer can commit.
        committed = positions.latest(self.slot, self.key)
        self.after = committed["next_offset"] if committed else -1
        self.sends = Sends(target, in_transaction=True)
        self.next_offset: int | None = None  # after the last record sent in the open transaction
        self.kept_for: str | None = None  # the stream it is kept for between rounds
        self.interval_s = (config.transaction_boundary_interval_ms / 1000
                           if config.transaction_boundary == "interval" else None)
        self.opened = time.monotonic()

    @classmethod
    def kept(cls, target: ReplicaTarget, topic: str, partition: int, stream: str) -> _Slot | None:
        """The partition's slot this process kept for `stream`, if any (another stream's is let go)."""
        with cls._kept_lock:
            slot = cls._kept.pop((target.positions.name, position_key(topic, partition)), None)
        if slot is not None and slot.kept_for != stream:
            slot.release(None, None, None)
            return None
        return slot

    def keep(self, stream: str) -> None:
        self.kept_for = stream
        with self._kept_lock:
            other = self._kept.get((self.positions.name, self.key))
            self._kept[(self.positions.name, self.key)] = self
        if other is not None and other is not self:  # another stream's, left behind: let it go
            other.release(None, None, None)

    def release(self, *exc_info) -> None:
        """Lets go of the producer: kept for the slot's next task unless the writer failed (holding_slot)."""
        self._holding.__exit__(*exc_info)

    def put(self, records: pa.RecordBatch, tally: SinkTally) -> None:
        records = records.filter(pc.greater_equal(records.column("offset"), self.after))
        if not records.num_rows:
            return
        if not self.open:
            self.producer.begin_transaction()
            self.open, self.opened = True, time.monotonic()
        self.sends.send(self.producer, TalliedBatch(records, tally))
        self.next_offset = records.column("offset")[-1].as_py() + 1
        if self.interval_s is not None and time.monotonic() - self.opened >= self.interval_s:
            self._commit(tally)

    def flush(self, tally: SinkTally) -> None:
        if self.next_offset is not None:
            self._commit(tally)
        elif self.open:  # nothing was sent in it: everything was committed before
            abort(self.producer)
            self.open = False

    def _commit(self, tally: SinkTally) -> None:
        """The part's records acknowledged, then the source offset after them written and the transaction
        committed; a record the target refused aborts it (nothing of it becomes visible) and fails the task naming
        the record."""
        try:
            self.sends.settle(self.producer, tally)
        except Exception:
            with contextlib.suppress(Exception):  # a fenced producer cannot abort: its records are never visible
                abort(self.producer)
            raise
        self.positions.record(self.producer, self.slot, self.key, {"next_offset": self.next_offset})
        commit(self.producer, f"source partition {self.what}")
        self.after, self.next_offset, self.open = self.next_offset, None, False
