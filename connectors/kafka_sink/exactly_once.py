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
import itertools
import time
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from connectors.kafka.sink_tally import SinkTally, TalliedBatch
from connectors.kafka.transactions import commit, holding_slot, slot_of
from connectors.kafka_sink.write import ReplicaTask, Sends

# Long enough for a large part in one transaction (the brokers' default transaction.max.timeout.ms); a killed run's
# open transaction is aborted sooner, when the next run's producer of its slot starts.
TRANSACTION_TIMEOUT_MS = 900_000
# A new positions topic's partitions: the slots (source partitions) share them by a hash of their key.
POSITIONS_PARTITIONS = 8


def position_key(topic: str, partition: int) -> str:
    """What a position in the positions topic is the position in ('/' is never in a topic's name)."""
    return f"{topic}/{partition}"


def produce_in_transactions(task: ReplicaTask, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """write.produce_arrow_batches's counterpart under exactly once; a task's records are one source partition's."""
    tally = SinkTally(task.bridge_name, task.config, task.dead_letter_client_config)
    batches = (batch for batch in batches if batch.num_rows)
    first = next(batches, None)
    if first is not None:
        topic, partition = first.column("topic")[0].as_py(), first.column("partition")[0].as_py()
        _move(task, tally, topic, partition, itertools.chain([first], batches))
    yield tally.summary()


def _move(task: ReplicaTask, tally: SinkTally, topic: str, partition: int, batches: Iterator[pa.RecordBatch]) -> None:
    cfg, positions = task.config, task.positions
    key, what = position_key(topic, partition), f"{topic}-{partition}"
    slot = slot_of(key, task.positions_partitions)
    with holding_slot(task.producer_config(), positions, slot, key, TRANSACTION_TIMEOUT_MS, name=key) as producer:
        # Only now, holding the slot, is its last committed offset final: no older producer can commit.
        committed = positions.latest(slot, key)
        after = committed["next_offset"] if committed else -1
        interval_s = cfg.transaction_boundary_interval_ms / 1000 if cfg.transaction_boundary == "interval" else None
        sends, next_offset, opened = Sends(task, in_transaction=True), None, time.monotonic()
        for batch in batches:
            batch = batch.filter(pc.greater_equal(batch.column("offset"), after))
            if not batch.num_rows:
                continue
            sends.send(producer, TalliedBatch(batch, tally))
            next_offset = batch.column("offset")[-1].as_py() + 1
            if interval_s is not None and time.monotonic() - opened >= interval_s:
                _commit(producer, sends, tally, positions, slot, key, next_offset, what)
                producer.begin_transaction()
                opened = time.monotonic()
        if next_offset is None:  # everything was committed before: nothing to add
            producer.abort_transaction()
            return
        _commit(producer, sends, tally, positions, slot, key, next_offset, what)


def _commit(producer, sends: Sends, tally: SinkTally, positions, slot: int, key: str, next_offset: int,
            what: str) -> None:
    """The part's records acknowledged, then the source offset after them written and the transaction committed;
    a record the target refused aborts it (nothing of it becomes visible) and fails the task naming the record."""
    try:
        sends.settle(producer, tally)
    except Exception:
        with contextlib.suppress(Exception):  # a fenced producer cannot abort: its records are never visible
            producer.abort_transaction()
        raise
    positions.record(producer, slot, key, {"next_offset": next_offset})
    commit(producer, f"source partition {what}")
