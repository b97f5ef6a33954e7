"""Executor side of an always-on Pub/Sub Lite source: one long-lived Spark task holds a Subscribe stream per Lite
partition of its share (read.py, no end), and writes what arrives to Kafka in rounds: a round is what the streams
brought by the time the last one was acknowledged. After Kafka acknowledged a round, the task commits each
partition's cursor past it to Lite (as a micro-batch's driver does), and reports its cursors and counts to the
run (stream_report.py) at most every `report_every_s` and at once when the streams go quiet. It ends when the
run's lease tells it to (stream_lease.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time

from confluent_kafka import Producer

from connectors.kafka.connection import source_producer_config
from connectors.framework.stream_lease import LeaseWatcher
from connectors.framework.stream_report import ReportingTaskSettings, ReportPoster
from connectors.pubsublite.clients import region_of
from connectors.pubsublite_source.convert import PubSubLiteSourceConverter
from connectors.pubsublite_source.exactly_once import StreamTransactions
from connectors.pubsublite_source.read import read_partition
from connectors.pubsublite_source.write import KafkaWriter, write_batch

# With nothing arriving, the task looks at its lease again after this long.
_IDLE_WAIT_S = 0.1
# Batches read ahead per partition while a round is written (the streams' own flow control bounds each).
_READ_AHEAD = 4


def stream_lite_partitions(settings: ReportingTaskSettings, assignments: list[list[tuple[int, int]]],
                           slot: int) -> str | None:
    """One slot of the stream (stream_slots.py): `assignments[slot]` holds its (Lite partition, cursor) starts.
    Returns why its lease ended it (None: its deadline)."""
    return _LiteStream(settings, slot, assignments[slot]).run()


class _LiteStream:
    def __init__(self, settings: ReportingTaskSettings, slot: int, starts: list[tuple[int, int]]):
        self.settings, self.slot = settings, slot
        self.counts: dict = {"messages": 0, "bytes": 0, "lost": {}, "cursors": {str(p): c for p, c in starts}}
        self.poster = ReportPoster(settings.task.kafka_client_config, settings.consumer_group, slot, settings.where,
                                   settings.stream_id)
        last = self.poster.last()  # a task Spark runs again carries on from its stream's last report
        if last:
            self.counts = {**last, "cursors": {**self.counts["cursors"], **last.get("cursors", {})}}
        # Under exactly once each partition has a writer of its own (StreamTransactions), made once its slot is held.
        self.writers: dict[int, KafkaWriter] = {}
        self.transactions: StreamTransactions | None = None
        self.dropped_before = int(self.counts.get("dropped", 0))
        self.filtered_before = int(self.counts.get("filtered", 0))
        self._reported = self._report()  # what the run has from this stream (a resumed cursor is news)

    def run(self) -> str | None:
        settings = self.settings
        lease = settings.lease_watcher(settings.task.kafka_client_config)
        try:
            asyncio.run(self._stream(lease))
        finally:
            lease.close()
            self.poster.close()
        return lease.why_not

    def _report(self) -> dict:
        writers = {id(writer): writer for writer in self.writers.values()}.values()
        return {**self.counts, "dropped": self.dropped_before + sum(writer.dropped for writer in writers),
                "filtered": self.filtered_before + sum(writer.filtered for writer in writers)}

    def _writers_for(self, held: contextlib.ExitStack, cursors: dict[int, int]) -> dict[int, int]:
        """Each partition's writer; the cursors to read from (under exactly once, past what a killed run had
        committed to the positions topic, known once the slots are held)."""
        task = self.settings.task
        if task.positions is None:
            writer = KafkaWriter(task, Producer(source_producer_config(task.kafka_client_config,
                                                                      task.outage_timeout_s)))
            self.writers = {p: writer for p in cursors}
            return cursors
        self.transactions = StreamTransactions(task, held, cursors)
        self.writers = self.transactions.writers
        for partition, cursor in self.transactions.cursors.items():
            self.counts["cursors"][str(partition)] = cursor
        return dict(self.transactions.cursors)

    async def _commit_cursors(self, cursor_service, subscription: str, ends: dict[int, int]) -> None:
        """Kafka has the records before these cursors: now they may move in Lite and in the reports."""
        loop = asyncio.get_running_loop()
        for partition, cursor in ends.items():
            await loop.run_in_executor(None, lambda p=partition, c=cursor: cursor_service.commit_cursor(
                request={"subscription": subscription, "partition": p, "cursor": {"offset": c}}))
            self.counts["cursors"][str(partition)] = cursor

    async def _commit_transactions(self, cursor_service, subscription: str, last: bool = False) -> None:
        transactions = self.transactions
        ends = await asyncio.get_running_loop().run_in_executor(None, lambda: transactions.commit(last))
        for name in ("messages", "bytes"):
            self.counts[name] += transactions.uncommitted[name]
            transactions.uncommitted[name] = 0
        await self._commit_cursors(cursor_service, subscription, ends)

    async def _stream(self, lease: LeaseWatcher) -> None:
        subscription = self.settings.task.config.subscription_path()
        client = self.settings.task.connection.async_subscriber_service(region_of(subscription.location))
        try:
            # Under exactly once the slots are held for the stream's life; a failed stream's producers are not kept,
            # and its open transactions are aborted by the slots' next producers.
            with contextlib.ExitStack() as held:
                cursors = self._writers_for(held, {int(p): c for p, c in self.counts["cursors"].items()})
                await self._move(lease, client, cursors)
        finally:
            # Closing the channel ends the cancelled streams' request pumps before the loop closes.
            await client.transport.close()
        if self._report() != self._reported:
            self.poster.post(self._report())

    async def _move(self, lease: LeaseWatcher, client, cursors: dict[int, int]) -> None:
        task, settings = self.settings.task, self.settings
        config = task.config
        subscription = config.subscription_path()
        cursor_service = task.connection.cursor_service(region_of(subscription.location))
        arrived: asyncio.Queue = asyncio.Queue(maxsize=_READ_AHEAD * max(1, len(cursors)))
        readers = [asyncio.create_task(self._read(client, str(subscription), p, c, arrived))
                   for p, c in sorted(cursors.items())]
        converters = {p: PubSubLiteSourceConverter(config, task.kafka_partition_count, round_robin_start=p)
                      for p in cursors}
        loop = asyncio.get_running_loop()
        posted_at = time.monotonic()
        try:
            while lease.holds() and time.time() < settings.deadline:
                for reader in readers:
                    if reader.done():
                        reader.result()  # a stream's failure fails the task; Spark or the run starts it again
                try:
                    round_ = [await asyncio.wait_for(arrived.get(), _IDLE_WAIT_S)]
                except asyncio.TimeoutError:
                    round_ = []
                while round_ and not arrived.empty():
                    round_.append(arrived.get_nowait())
                if round_ and self.transactions is None:
                    ends: dict[int, int] = {}
                    for partition, batch, next_cursor, lost in round_:
                        self.counts["bytes"] += write_batch(converters[partition], self.writers[partition], partition,
                                                            batch)
                        self.counts["messages"] += len(batch)
                        self.counts["lost"][str(partition)] = lost
                        ends[partition] = next_cursor
                    writer = next(iter(self.writers.values()))
                    await loop.run_in_executor(None, writer.flush)  # the readers read on meanwhile
                    await self._commit_cursors(cursor_service, str(subscription), ends)
                elif round_:
                    for partition, batch, next_cursor, lost in round_:
                        written = write_batch(converters[partition], self.writers[partition], partition, batch)
                        self.transactions.wrote(partition, next_cursor, len(batch), written)
                        self.counts["lost"][str(partition)] = lost
                if self.transactions is not None and self.transactions.due():
                    await self._commit_transactions(cursor_service, str(subscription))
                now = self._report()
                if now != self._reported and (not round_ or time.monotonic() - posted_at >= settings.report_every_s):
                    if self.poster.post(now):
                        self._reported, posted_at = now, time.monotonic()
            if self.transactions is not None:  # the run ends this stream: what it wrote is committed
                await self._commit_transactions(cursor_service, str(subscription), last=True)
        finally:
            for reader in readers:
                reader.cancel()
            await asyncio.gather(*readers, return_exceptions=True)

    async def _read(self, client, subscription: str, partition: int, cursor: int, arrived: asyncio.Queue) -> None:
        """Puts (partition, messages, cursor past them, lost to retention so far) in `arrived` as they come."""
        config = self.settings.task.config
        stats: dict = {}
        lost_before = int(self.counts["lost"].get(str(partition), 0))
        async for batch in read_partition(client, subscription, partition, cursor, sys.maxsize,
                                          config.partition_flow_control_messages, config.partition_flow_control_bytes,
                                          stats, stall_timeout_s=None):
            await arrived.put((partition, batch, stats["next_cursor"], lost_before + stats["lost"]))
