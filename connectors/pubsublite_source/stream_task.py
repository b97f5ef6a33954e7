"""Executor side of an always-on Pub/Sub Lite source: one long-lived Spark task holds a Subscribe stream per Lite
partition of its share (read.py, no end), and writes what arrives to Kafka in rounds: a round is what the streams
brought by the time the last one was acknowledged. After Kafka acknowledged a round, the task commits each
partition's cursor past it to Lite (as a micro-batch's driver does), and reports its cursors and counts to the
run (stream_report.py) at most every `report_every_s` and at once when the streams go quiet. It ends when the
run's lease tells it to (stream_lease.py).
"""

from __future__ import annotations

import asyncio
import sys
import time

from confluent_kafka import Producer, TopicPartition

from connectors.kafka.connection import source_producer_config
from connectors.kafka.stream_lease import LeaseWatcher
from connectors.kafka.stream_report import ReportingTaskSettings, ReportPoster
from connectors.pubsublite.clients import region_of
from connectors.pubsublite_source.convert import PubSubLiteSourceConverter
from connectors.pubsublite_source.read import read_partition
from connectors.pubsublite_source.write import KafkaWriter, write_batch

# With nothing arriving, the task looks at its lease again after this long.
_IDLE_WAIT_S = 0.1
# Batches read ahead per partition while a round is written (the streams' own flow control bounds each).
_READ_AHEAD = 4


def stream_lite_partitions(settings: ReportingTaskSettings, assignments: list[list[tuple[int, int]]],
                           slot: int) -> None:
    """One slot of the stream (stream_slots.py): `assignments[slot]` holds its (Lite partition, cursor) starts."""
    _LiteStream(settings, slot, assignments[slot]).run()


class _LiteStream:
    def __init__(self, settings: ReportingTaskSettings, slot: int, starts: list[tuple[int, int]]):
        self.settings, self.slot = settings, slot
        self.counts: dict = {"messages": 0, "bytes": 0, "lost": {}, "cursors": {str(p): c for p, c in starts}}
        self.poster = ReportPoster(settings.task.kafka_client_config, settings.consumer_group, slot, settings.where,
                                   settings.stream_id)
        last = self.poster.last()  # a task Spark runs again carries on from its stream's last report
        if last:
            self.counts = {**last, "cursors": {**self.counts["cursors"], **last.get("cursors", {})}}
        self.writer = KafkaWriter(settings.task, Producer(source_producer_config(settings.task.kafka_client_config,
                                                                          settings.task.outage_timeout_s)))
        self.dropped_before = int(self.counts.get("dropped", 0))
        self.filtered_before = int(self.counts.get("filtered", 0))

    def run(self) -> None:
        settings = self.settings
        lease = LeaseWatcher(settings.task.kafka_client_config, settings.consumer_group,
                             TopicPartition(*settings.where), settings.stream_id, settings.host_lease)
        try:
            asyncio.run(self._stream(lease))
        finally:
            lease.close()
            self.poster.close()

    def _report(self) -> dict:
        return {**self.counts, "dropped": self.dropped_before + self.writer.dropped,
                "filtered": self.filtered_before + self.writer.filtered}

    async def _stream(self, lease: LeaseWatcher) -> None:
        task, settings = self.settings.task, self.settings
        config = task.config
        subscription = config.subscription_path()
        client = task.connection.async_subscriber_service(region_of(subscription.location))
        cursor_service = task.connection.cursor_service(region_of(subscription.location))
        cursors = {int(p): c for p, c in self.counts["cursors"].items()}
        arrived: asyncio.Queue = asyncio.Queue(maxsize=_READ_AHEAD * max(1, len(cursors)))
        readers = [asyncio.create_task(self._read(client, str(subscription), p, c, arrived))
                   for p, c in sorted(cursors.items())]
        converters = {p: PubSubLiteSourceConverter(config, task.kafka_partition_count, round_robin_start=p)
                      for p in cursors}
        loop = asyncio.get_running_loop()
        reported, posted_at = self._report(), time.monotonic()
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
                if round_:
                    ends: dict[int, int] = {}
                    for partition, batch, next_cursor, lost in round_:
                        self.counts["bytes"] += write_batch(converters[partition], self.writer, partition, batch)
                        self.counts["messages"] += len(batch)
                        self.counts["lost"][str(partition)] = lost
                        ends[partition] = next_cursor
                    await loop.run_in_executor(None, self.writer.flush)  # the readers read on meanwhile
                    for partition, cursor in ends.items():  # Kafka has the round: now the cursors may move
                        await loop.run_in_executor(None, lambda p=partition, c=cursor: cursor_service.commit_cursor(
                            request={"subscription": str(subscription), "partition": p, "cursor": {"offset": c}}))
                        self.counts["cursors"][str(partition)] = cursor
                now = self._report()
                if now != reported and (not round_ or time.monotonic() - posted_at >= settings.report_every_s):
                    if self.poster.post(now):
                        reported, posted_at = now, time.monotonic()
        finally:
            for reader in readers:
                reader.cancel()
            await asyncio.gather(*readers, return_exceptions=True)
            await client.transport.close()
        if self._report() != reported:
            self.poster.post(self._report())

    async def _read(self, client, subscription: str, partition: int, cursor: int, arrived: asyncio.Queue) -> None:
        """Puts (partition, messages, cursor past them, lost to retention so far) in `arrived` as they come."""
        config = self.settings.task.config
        stats: dict = {}
        lost_before = int(self.counts["lost"].get(str(partition), 0))
        async for batch in read_partition(client, subscription, partition, cursor, sys.maxsize,
                                          config.partition_flow_control_messages, config.partition_flow_control_bytes,
                                          stats, stall_timeout_s=None):
            await arrived.put((partition, batch, stats["next_cursor"], lost_before + stats["lost"]))
