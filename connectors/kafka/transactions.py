"""Exactly once into Kafka (KIP-618's `exactly.once.support=required`): a source's records and its position go to
Kafka in one transaction, from a transactional producer per task slot (one `transactional.id` per bridge and slot).

Starting a producer of an id fences every earlier one: a killed run's orphan task that wakes up can no longer
commit, and its open transaction is aborted. A slot's producer is kept in the Python worker for the slot's next
task (a new one takes about 0.06 s to start); before a task relies on a kept one, a transaction of a claim record
proves it still holds the id's newest epoch, and one that was fenced (another worker or run started the slot since)
is replaced by a new one, which fences the others in turn. The position lives in a compacted
positions topic, keyed by what it is a position in: once the slot is held, its last committed position is the last
record of its key, so the task goes on from there whatever the driver planned. A source with numbered slots (the
Lite source's partitions) gives each a partition of its own; the Kafka sink's slots (source partitions, of topics
that come and go) share the topic's partitions by a hash of their key (`slot_of`)."""

from __future__ import annotations

import contextlib
import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

from connectors.errors import BatchError
from connectors.kafka.admin import KafkaAdmin, retry_transient
from connectors.kafka.connection import client_logger, kept_client

INIT_TIMEOUT_S = 60
COMMIT_TIMEOUT_S = 120
CLAIM_TIMEOUT_S = 30
TAIL_WINDOW = 16  # records read back from a positions partition's end; widened while none is a position
READ_TIMEOUT_S = 30
CLAIM_SUFFIX = "#claim"


@dataclass(frozen=True)
class PositionsTopic:
    """A compacted topic holding a bridge's positions: slot s's in partition s, keyed by what they are positions
    in (a Lite subscription and partition, say), as JSON objects."""

    name: str
    client_config: dict[str, str]

    def ensure(self, admin: KafkaAdmin, slots: int) -> int:
        """Creates the topic with a partition per slot, or adds the partitions it lacks; returns how many it has (more
        than `slots` when the bridge once ran with more)."""
        if admin.create_topic(self.name, slots, {"cleanup.policy": "compact"}):
            return slots  # the metadata may not show a topic made moments ago yet
        admin.ensure_partitions(self.name, slots)
        return max(slots, len(admin.partitions([self.name]).get(self.name, ())))

    def ensure_hashed(self, admin: KafkaAdmin, partitions: int) -> int:
        """For slots placed by `slot_of`: creates the topic with `partitions` when it is missing, and returns how
        many it has (never changed afterwards: that would move the slots)."""
        if admin.create_topic(self.name, partitions, {"cleanup.policy": "compact"}):
            return partitions  # the metadata may not show a topic made moments ago yet
        return len(retry_transient(admin.partitions)([self.name])[self.name])

    def latest(self, slot: int, key: str) -> dict | None:
        """The last committed position of `key` in the slot's partition, None when there is none."""
        return self.latest_by_key({key: slot}).get(key)

    def latest_of(self, keys: dict[int, str]) -> dict[int, dict]:
        """The last committed position of each slot's key (a slot per partition), for the slots that have one."""
        found = self.latest_by_key({key: slot for slot, key in keys.items()})
        return {slot: found[key] for slot, key in keys.items() if key in found}

    def latest_by_key(self, keys: dict[str, int]) -> dict[str, dict]:
        """The last committed position of each key (in the partition given), for the keys that have one."""
        with self.reader() as consumer:
            return self.latest_read(consumer, keys)[0]

    @contextlib.contextmanager
    def reader(self) -> Iterator:
        """A read_committed consumer of the topic, kept for this process's next read (its connections up: a new
        one's first offset lookup cost more than the rest of the read); unassigned when given back."""
        from confluent_kafka import Consumer

        # fetch.wait.max.ms: a fetch at the end comes back at once instead of after the default 0.5 s.
        with kept_client({**self.client_config, "group.id": f"{self.name}.reader", "enable.auto.commit": False,
                          "isolation.level": "read_committed", "fetch.wait.max.ms": 10, "log_level": 3,
                          "logger": client_logger()}, make=Consumer) as consumer:
            try:
                yield consumer
            finally:
                consumer.unassign()

    def latest_read(self, consumer, keys: dict[str, int]) -> tuple[dict[str, dict], dict[int, int]]:
        """(the last committed position of each key that has one, where each slot's partition was read up to): the
        partitions' ends are read first (read_committed, up to their last stable offsets), going further back only
        where a key is not found."""
        from confluent_kafka import TopicPartition

        # A positions topic made moments ago may not have its leaders yet: retried like the admin's calls. A
        # read_committed consumer's high watermark is the last stable offset: where an open transaction begins.
        ends = {slot: retry_transient(consumer.get_watermark_offsets)(TopicPartition(self.name, slot),
                                                                      timeout=READ_TIMEOUT_S)
                for slot in set(keys.values())}
        found: dict[str, dict] = {}
        window, left = TAIL_WINDOW, dict(keys)
        while left:
            slots = set(left.values())
            starts = {slot: max(ends[slot][0], ends[slot][1] - window) for slot in slots}
            found.update(_last_values(consumer, self.name, starts, {s: ends[s][1] for s in slots}, left))
            left = {key: slot for key, slot in left.items() if key not in found and starts[slot] > ends[slot][0]}
            window *= 16
        return found, {slot: end for slot, (_, end) in ends.items()}

    def record(self, producer, slot: int, key: str, value: dict) -> None:
        producer.produce(self.name, key=key.encode(), value=json.dumps(value).encode(), partition=slot)


def slot_of(key: str, partitions: int) -> int:
    """The positions partition of a slot placed by its key (stable across processes, unlike hash())."""
    return zlib.crc32(key.encode()) % partitions


def _last_values(consumer, topic: str, starts: dict[int, int], ends: dict[int, int],
                 keys: dict[str, int]) -> dict[str, dict]:
    """Each key's last record between its partition's start and end (the partition's last stable offset)."""
    import time

    from confluent_kafka import TopicPartition

    partitions = [TopicPartition(topic, slot, offset) for slot, offset in starts.items() if offset < ends[slot]]
    found: dict[str, dict] = {}
    wanted = {key.encode(): key for key in keys}
    if not partitions:
        return found
    consumer.assign(partitions)
    deadline = time.monotonic() + READ_TIMEOUT_S
    while not all(p.offset >= ends[p.partition] for p in consumer.position(partitions)):
        if time.monotonic() > deadline:
            raise BatchError(f"positions topic {topic}: its end was not reached within {READ_TIMEOUT_S} s")
        for message in consumer.consume(1000, 0.01):  # short waits: consume() returns early only when full
            key = wanted.get(message.key()) if message.error() is None else None
            if key is not None and keys[key] == message.partition():
                found[key] = json.loads(message.value())
    return found


def _started_producer(config: dict):
    from confluent_kafka import KafkaException, Producer

    producer = Producer(config)
    try:
        # A broker connection first: librdkafka asks for the producer id when init_transactions starts, and when no
        # connection is up yet it tries again only after a 500 ms timer. Measured on the local broker: 0.51-0.59 s
        # to start a transactional producer straight, 0.06-0.07 s after a metadata request.
        producer.list_topics(timeout=INIT_TIMEOUT_S)
        producer.init_transactions(INIT_TIMEOUT_S)
    except KafkaException as exc:
        raise BatchError(f"Kafka transactional producer {config['transactional.id']} could not start: "
                         f"{exc.args[0].str()}") from None
    return producer


class _Unusable(Exception):
    """A kept producer could not claim its slot: it is dropped (kept_client keeps none whose user raised)."""


@contextlib.contextmanager
def holding_slot(client_config: dict[str, str], positions: PositionsTopic, slot: int, key: str,
                 timeout_ms: int, name: str | None = None) -> Iterator:
    """The slot's transactional producer (`<positions topic>.<name>`, the slot's number by default), holding the
    id's newest epoch, with a transaction open; kept for the slot's next task in this process unless the body fails.
    Its positions go to partition `slot` under `key`. The body commits."""
    config = {**client_config, "transactional.id": f"{positions.name}.{slot if name is None else name}",
              "enable.idempotence": True,
              "acks": "all", "linger.ms": 5, "transaction.timeout.ms": timeout_ms, "log_level": 3,
              "logger": client_logger()}
    refused = ""
    for _ in range(2):  # the kept one (or a new one), then a new one: starting it fences the others
        try:
            with kept_client(config, make=_started_producer) as producer:
                refused = _claim(producer, positions, slot, key)
                if refused:
                    raise _Unusable()
                yield producer
            return
        except _Unusable:
            continue
    raise BatchError(f"Kafka transactional producer {config['transactional.id']} could not claim its slot: {refused} "
                     "(another run of the bridge may hold it)")


def _claim(producer, positions: PositionsTopic, slot: int, key: str) -> str:
    """Commits a transaction holding only a claim record, then opens the task's; why that failed ("" when it did
    not). A producer that was fenced (a newer producer of its id started) fails here, before the task's records:
    Kafka refuses its epoch."""
    from confluent_kafka import KafkaException

    try:
        producer.begin_transaction()
        producer.produce(positions.name, key=(key + CLAIM_SUFFIX).encode(), value=b"{}", partition=slot)
        producer.commit_transaction(CLAIM_TIMEOUT_S)
        producer.begin_transaction()
    except KafkaException as exc:
        return exc.args[0].str()
    return ""


def commit_slot_records(producer_config: dict, positions: PositionsTopic, records: list[tuple[int, str, dict]],
                        timeout_ms: int, what: str, named_by_key: bool = False) -> None:
    """Each (slot, key, value) committed in a transaction of that slot's own producer, which fences one a killed run
    left behind: how a position reset, with no task running, puts a new position where the runs resume from. The
    producers are named by slot number, or by key when the connector's tasks name them so (`holding_slot`)."""
    for slot, key, value in records:
        with holding_slot(producer_config, positions, slot, key, timeout_ms, key if named_by_key else None) as producer:
            positions.record(producer, slot, key, value)
            commit(producer, f"{what} ({key})")


def abort(producer) -> None:
    """Aborts the producer's open transaction within COMMIT_TIMEOUT_S: librdkafka's abort_transaction() without a
    timeout waits for ever, and a task waiting on it holds its run past the bridge's outage timeout."""
    producer.abort_transaction(COMMIT_TIMEOUT_S)


def commit(producer, what: str, timeout_s: float = COMMIT_TIMEOUT_S) -> None:
    """Commits the producer's transaction; on failure aborts it (when it can be) and raises naming `what`. A
    fenced producer (a newer run took the slot) cannot abort: its records are never visible."""
    from confluent_kafka import KafkaException

    try:
        producer.commit_transaction(timeout_s)
    except KafkaException as exc:
        error = exc.args[0]
        if error.txn_requires_abort():
            abort(producer)
            raise BatchError(f"{what}: Kafka refused the transaction, aborted: {error.str()}") from None
        if error.fatal():
            raise BatchError(f"{what}: the transaction was not committed ({error.str()}); a newer run of the "
                             "bridge has taken over") from None
        raise BatchError(f"{what}: the transaction's commit failed: {error.str()}") from None
