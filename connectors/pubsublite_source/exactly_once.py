"""The Lite source under `exactly.once.support=required`: each Lite partition is a task slot with its own
transactional producer (`<positions topic>.<partition>`); its records and its next cursor (in the positions topic)
commit in one transaction, per range (`transaction.boundary=poll`) or every `transaction.boundary.interval.ms`; in
an always-on stream, per round the streams brought or every interval (StreamTransactions).

Once the task holds the slot (transactions.holding_slot: a killed run's orphan of that partition is fenced), the
range is read from the slot's last committed cursor when that is past the driver's plan, so a range a killed run
had committed is not written again. Kafka refusing a record aborts the transaction and fails the task naming it: under a transaction a record
cannot be skipped alone (errors.tolerance=all still skips what the producer refuses before sending)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Callable, Iterator

import pyarrow as pa

from connectors.arrow_rows import rows_batch

from connectors.errors import BatchError
from connectors.framework.batch_lease import watching
from connectors.kafka.connection import source_producer_config
from connectors.kafka.transactions import COMMIT_TIMEOUT_S, abort, commit, holding_slot
from connectors.pubsublite.clients import region_of
from connectors.pubsublite_source.config import PubSubLiteSourceConfig
from connectors.pubsublite_source.convert import PubSubLiteSourceConverter
from connectors.pubsublite_source.read import read_partition
from connectors.pubsublite_source.write import SUMMARY_SCHEMA, KafkaWriter, LiteSourceTask, write_batch

# Long enough for a large batch's slice in one transaction (the brokers' default transaction.max.timeout.ms);
# a killed run's open transaction is aborted sooner, when the next run's producer of its slot starts.
TRANSACTION_TIMEOUT_MS = 900_000


def position_key(config: PubSubLiteSourceConfig, lite_partition: int) -> str:
    """What a position in the positions topic is the position in: a partition of the bridge's subscription."""
    return f"{config.subscription_path()}/{lite_partition}"


def read_and_deliver_in_transactions(task: LiteSourceTask,
                                     batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """write.read_and_deliver's counterpart under exactly once: one summary row per range, once committed."""
    ranges = [row for batch in batches for row in batch.to_pylist()]
    with watching(task.lease, task.kafka_client_config, f"reading {task.config.subscription_path()}") as keep_going:

        async def move_all() -> list[dict]:
            client = task.connection.async_subscriber_service(region_of(task.config.subscription_path().location))
            try:
                return [await _move_range(task, client, r["lite_partition"], r["start_offset"], r["end_offset"],
                                          keep_going) for r in ranges if keep_going()]
            finally:
                await client.transport.close()

        rows = asyncio.run(move_all())
    yield rows_batch(rows, SUMMARY_SCHEMA)


async def _move_range(task: LiteSourceTask, client, lite_partition: int, start: int, end: int,
                      keep_going: Callable[[], bool]) -> dict:
    cfg, positions = task.config, task.positions
    what = f"Lite partition {lite_partition}"
    key = position_key(cfg, lite_partition)
    config = source_producer_config(task.kafka_client_config, task.outage_timeout_s)  # murmur2, as without it
    with holding_slot(config, positions, lite_partition, key, TRANSACTION_TIMEOUT_MS) as producer:
        # Only now, holding the slot, is its last committed position final: no older producer can commit.
        committed = positions.latest(lite_partition, key)
        if committed is not None:
            start = max(start, committed["next_cursor"])
        writer = KafkaWriter(task, producer, in_transaction=True)
        converter = PubSubLiteSourceConverter(cfg, task.kafka_partition_count, round_robin_start=lite_partition)
        interval_s = cfg.transaction_boundary_interval_ms / 1000 if cfg.transaction_boundary == "interval" else None
        stats: dict = {}
        messages = written_bytes = 0
        opened = time.monotonic()
        async with contextlib.aclosing(read_partition(
                client, str(cfg.subscription_path()), lite_partition, start, end,
                cfg.partition_flow_control_messages, cfg.partition_flow_control_bytes, stats)) as batches:
            async for batch in batches:
                written_bytes += write_batch(converter, writer, lite_partition, batch)
                messages += len(batch)
                if interval_s is not None and time.monotonic() - opened >= interval_s:
                    _commit(writer, positions, lite_partition, key, stats["next_cursor"], what)
                    producer.begin_transaction()
                    opened = time.monotonic()
                if not keep_going():  # what was written is committed below, up to where it ends
                    break
        _commit(writer, positions, lite_partition, key, stats.get("next_cursor", start), what)
    return {"lite_partition": lite_partition, "started_at": start, "next_cursor": stats.get("next_cursor", start),
            "messages": messages, "written": messages, "bytes": written_bytes, "lost": stats.get("lost", 0),
            "dropped": writer.dropped, "filtered": writer.filtered}


def _commit(writer: KafkaWriter, positions, lite_partition: int, key: str, next_cursor: int, what: str) -> None:
    """The slice's records acknowledged, then the position written and the transaction committed; a record Kafka
    refused aborts it (nothing of it becomes visible) and fails the task naming the record."""
    # Bounded: a record still unacknowledged after it fails the commit below (commit_transaction waits for it).
    writer.producer.flush(COMMIT_TIMEOUT_S)
    if writer.failures:
        abort(writer.producer)
        raise BatchError(f"{what}: {writer.refusals()}; the transaction was aborted")
    positions.record(writer.producer, lite_partition, key, {"next_cursor": next_cursor})
    commit(writer.producer, what)


class StreamTransactions:
    """An always-on task's Lite partitions under exactly once: each partition's slot is held for the stream's life
    (its producer fences a killed run's or an earlier attempt's), its records go through its own writer, and each
    partition's records and next cursor commit in one transaction at every boundary: after each round the streams
    brought (`transaction.boundary=poll`) or every `transaction.boundary.interval.ms`. Counts and cursors move only
    at a commit, so a report never counts what a kill could still take back."""

    def __init__(self, task: LiteSourceTask, held: contextlib.ExitStack, cursors: dict[int, int]):
        cfg, self._positions = task.config, task.positions
        self._keys = {p: position_key(cfg, p) for p in cursors}
        config = source_producer_config(task.kafka_client_config, task.outage_timeout_s)
        self.writers: dict[int, KafkaWriter] = {}
        self.cursors = dict(cursors)
        for p in sorted(cursors):
            producer = held.enter_context(holding_slot(config, self._positions, p, self._keys[p],
                                                       TRANSACTION_TIMEOUT_MS))
            # Holding the slot, its last committed cursor is final: a run killed after its commit got this far.
            committed = self._positions.latest(p, self._keys[p])
            if committed is not None and committed["next_cursor"] > self.cursors[p]:
                self.cursors[p] = committed["next_cursor"]
            self.writers[p] = KafkaWriter(task, producer, in_transaction=True)
        self._interval_s = (cfg.transaction_boundary_interval_ms / 1000 if cfg.transaction_boundary == "interval"
                            else 0.0)
        self._written: dict[int, int] = {}  # partition -> next cursor of what its open transaction holds
        self.uncommitted = {"messages": 0, "bytes": 0}
        self._opened = time.monotonic()

    def wrote(self, partition: int, next_cursor: int, messages: int, written_bytes: int) -> None:
        self._written[partition] = next_cursor
        self.uncommitted["messages"] += messages
        self.uncommitted["bytes"] += written_bytes

    def due(self) -> bool:
        return bool(self._written) and time.monotonic() - self._opened >= self._interval_s

    def commit(self, last: bool = False) -> dict[int, int]:
        """Commits each written partition's transaction (every partition's when `last`: none is left open, so the
        slots' producers are kept clean for a next task) and opens the next unless `last`; returns the committed
        cursors of the partitions that moved."""
        moved = dict(self._written)
        for p in sorted(self.writers if last else moved):
            _commit(self.writers[p], self._positions, p, self._keys[p], moved.get(p, self.cursors[p]),
                    f"Lite partition {p}")
            if not last:
                self.writers[p].producer.begin_transaction()
        self.cursors.update(moved)
        self._written, self._opened = {}, time.monotonic()
        return moved
