"""Executor side of an always-on Kafka sink: one long-lived Spark task holds a consumer on its partitions and
hands what arrives to the connector's delivery in rounds, committing each round's acknowledged position to the
bridge's Kafka Connect consumer group.

A round is what arrived within the linger after its first record (at most `round_records`), delivered through
the same `Deliver` a batch uses: it returns only once the target acknowledged every record of the round (or
the dead-letter topic took it). Only then is the position past the round committed, with the counts moved
since the stream began (and, for a Kafka target, where the last record landed) in the commit's metadata, so the
driver (sink_stream.py) reads them all in one call and records them as the asset's metadata. A task Spark starts
again (a failed task, a lost executor) resumes from its stream's last commit, not from the stream's start.

Commits go to the group Kafka Connect would use (`connect-<bridge>`), as a worker's offset flush does:
`kafka-consumer-groups --describe` shows the bridge's lag as it shows a Java connector's.
"""

from __future__ import annotations

import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from connectors.kafka.connection import client_logger
from connectors.framework.delivered import DeliveredCommit, Landed
from connectors.kafka.outages import KAFKA_UNREACHABLE_CODES
from connectors.kafka.range_reader import ReaderSettings, arrow_batch
from connectors.framework.run_liveness import link_to
from connectors.framework.sink_tally import COUNTERS
from connectors.framework.spark_read import Deliver
from connectors.framework.stream_lease import HostBeatRef, LeaseWatcher

# With nothing arriving, a consume call waits this long before the task looks at its commits and lease again: an
# idle stream commits what it delivered last within this long, and looks at its lease as often (late enough for a
# stream that moves nothing); thirty idle slots of a shared task each waking ten times a second add up.
_IDLE_WAIT_S = 0.2
# A round's linger longer than this is gathered in steps of it, looking at the lease between them.
_LINGER_STEP_S = 1.0


@dataclass(frozen=True)
class StreamSettings:
    reader: ReaderSettings
    group: str  # where positions are committed: the bridge's Kafka Connect group
    stream_id: str  # names this stream's commits apart from any other's in the group
    linger_s: float  # how long a round waits for more records after its first
    lease_partition: tuple[str, int]  # where the run beats its lease (stream_lease.py)
    round_records: int = 10_000
    commit_every_s: float = 1.0  # while records keep coming; a round that catches up commits at once
    deadline: float = field(default=float("inf"))  # time.time() at which the task ends on its own
    host_lease: HostBeatRef | None = None  # in a host's run: its beat, which keeps the lease (stream_lease.py)
    run_address: tuple[str, int] | None = None  # where the run listens for its tasks' links (run_liveness.py)
    # What the delivery's summary rows count, in the order commits carry them: the Kafka sinks' tally, or a sink's own.
    counters: tuple[str, ...] = COUNTERS

    def lease_watcher(self) -> LeaseWatcher:
        """A task's look at its stream's lease, linked to its run."""
        return LeaseWatcher(self.reader.client_config, self.group, TopicPartition(*self.lease_partition),
                            self.stream_id, self.host_lease, link=link_to(self.run_address, self.stream_id))


class StreamCommitRefused(RuntimeError):
    """Kafka refused a stream's commit for good (the group is in use by live members, or not authorised)."""


def stream_partitions(settings: StreamSettings, assignments: list[list[tuple[str, int, int]]], deliver: Deliver,
                      slot: int) -> str | None:
    """One slot of the stream (stream_slots.py): `assignments[slot]` holds its (topic, partition, offset) starts.
    It runs until the deadline, or until its lease ends it; returns why its lease did (None: the deadline)."""
    return _Stream(settings, assignments[slot], deliver).run()


class _Stream:
    def __init__(self, settings: StreamSettings, starts: list[tuple[str, int, int]], deliver: Deliver):
        self.settings = settings
        self.deliver = deliver
        self.consumer = Consumer({
            **settings.reader.consumer_config(),
            "group.id": settings.group,
            # Waiting at the broker for records costs nothing; the default's 500 ms keeps an idle stream idle
            # (a fetch returns as soon as a record arrives whatever this is).
            "fetch.wait.max.ms": 500,
            "enable.partition.eof": False,
            "logger": client_logger(),
        })
        self.positions: dict[tuple[str, int], int] = {(t, p): o for t, p, o in starts}
        self.counts: dict[tuple[str, int], dict[str, int]] = {k: dict.fromkeys(settings.counters, 0)
                                                               for k in self.positions}
        self.landed: dict[tuple[str, int], Landed] = {}  # a Kafka target's (DeliveredCommit.landed)
        self._resume_from_own_commits()
        self.committed = dict(self.positions)
        self.last_commit = time.monotonic()
        self.in_flight: tuple[Future, dict[tuple[str, int], int]] | None = None  # the round being delivered

    def _resume_from_own_commits(self) -> None:
        """A task started again carries on from its stream's last commit, with the counts it had."""
        asked = [TopicPartition(t, p) for t, p in self.positions]
        for tp in self.consumer.committed(asked, timeout=30):
            commit = DeliveredCommit.from_metadata(tp.metadata, self.settings.counters)
            key = (tp.topic, tp.partition)
            if commit and commit.writer_id == self.settings.stream_id and tp.offset > self.positions[key]:
                self.positions[key] = tp.offset
                self.counts[key] = commit.counts
                if commit.landed is not None:
                    self.landed[key] = commit.landed

    def run(self) -> str | None:
        """Gathers the next round while the one before is delivered (one in flight: its acks do not hold up what
        arrives meanwhile), and commits what was acknowledged every `commit_every_s`, or at once when idle."""
        self.consumer.assign([TopicPartition(t, p, o) for (t, p), o in self.positions.items()])
        lease = self.settings.lease_watcher()
        with ThreadPoolExecutor(1, thread_name_prefix="deliver") as delivering:
            try:
                while time.time() < self.settings.deadline:
                    holds = lease.holds()
                    messages = self._gather_round(lease) if holds else []
                    if not holds and self.in_flight is None:
                        break
                    self._settle()
                    if messages:
                        batches, ends = self._batches(messages)
                        # Nothing to ask: a stop keeps what is on its way, acknowledged and committed.
                        self.in_flight = delivering.submit(lambda b=batches: list(self.deliver(iter(b), None))), ends
                    dirty = self.positions != self.committed
                    if dirty and (not messages or time.monotonic() - self.last_commit >= self.settings.commit_every_s):
                        self._commit()
                self._settle()  # the deadline passed with a round out
                if self.positions != self.committed:
                    self._commit()
            finally:
                lease.close()
                self.consumer.close()
        return lease.why_not

    def _settle(self) -> None:
        """Waits for the round in flight, if any, and moves the positions past it (its failure fails the task)."""
        if self.in_flight is not None:
            in_flight, self.in_flight = self.in_flight, None
            self._acknowledged(*in_flight)

    def _gather_round(self, lease: LeaseWatcher) -> list:
        """What arrives within the linger after the first record, at most `round_records` (nothing after
        `_IDLE_WAIT_S` without a record). A linger of seconds (the archive's: a round is a file) is waited in steps
        that look at the lease, and that commit the round before as soon as it was acknowledged, so that a stream
        told to end does not gather on, and its position does not wait for the next round."""
        # librdkafka's consume returns when it has `num_messages` or when the timeout passes, whichever is first:
        # the first call asks for one record, so that it returns as soon as one arrives.
        messages = self._consume(1, _IDLE_WAIT_S)
        if not messages:
            return messages
        until = time.monotonic() + self.settings.linger_s
        while len(messages) < self.settings.round_records:
            messages += self._consume(self.settings.round_records - len(messages),
                                      min(_LINGER_STEP_S, max(0.0, until - time.monotonic())))
            if time.monotonic() >= until or not lease.holds():
                break
            if self.in_flight is not None and self.in_flight[0].done():
                self._settle()
                if self.positions != self.committed:
                    self._commit()
        return messages

    def _consume(self, count: int, timeout_s: float) -> list:
        messages = self.consumer.consume(num_messages=count, timeout=timeout_s)
        failed = [m for m in messages if m.error() is not None]
        for message in failed:
            error = message.error()
            # librdkafka retries a silent broker itself; the stream waits for it as a Kafka Connect worker does.
            if not error.retriable() and error.code() not in KAFKA_UNREACHABLE_CODES:
                raise KafkaException(error)
        return [m for m in messages if m.error() is None] if failed else messages

    def _batches(self, messages: list) -> tuple[list[pa.RecordBatch], dict[tuple[str, int], int]]:
        """A round as one Arrow batch per partition, and the position past it per partition."""
        by_partition: dict[tuple[str, int], list] = {}
        for m in messages:
            by_partition.setdefault((m.topic(), m.partition()), []).append(m)
        include_headers = self.settings.reader.include_headers
        return ([arrow_batch(t, p, ms, include_headers) for (t, p), ms in by_partition.items()],
                {key: ms[-1].offset() + 1 for key, ms in by_partition.items()})

    def _acknowledged(self, delivered: Future, ends: dict[tuple[str, int], int]) -> None:
        """Waits for a round's delivery (its failure fails the task) and moves the positions past it."""
        for rows in delivered.result():
            for row in rows:
                key = (row["topic"], row["partition"])
                counts = self.counts[key]
                for name in self.settings.counters:
                    counts[name] += row[name]
                if row.get("landed_source") is not None:  # a sink writing to Kafka
                    self.landed[key] = Landed(row["landed_source"], row["landed_target"])
        self.positions.update(ends)

    def _commit(self) -> None:
        offsets = [TopicPartition(t, p, o, metadata=DeliveredCommit(self.settings.stream_id, self.counts[(t, p)],
                                                                    self.landed.get((t, p))).to_metadata(
                                                                        self.settings.counters))
                   for (t, p), o in self.positions.items() if o != self.committed.get((t, p))]
        try:
            self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            error = exc.args[0]
            if commit_may_retry(error):
                return  # the next round commits again (positions only ever move forward)
            raise StreamCommitRefused(f"Kafka refused the commit of group {self.settings.group}: {error.str()} "
                                      "(a Kafka Connect worker or another consumer active in the group?)") from None
        self.committed.update({(tp.topic, tp.partition): tp.offset for tp in offsets})
        self.last_commit = time.monotonic()


_COORDINATOR_CODES = frozenset({KafkaError.COORDINATOR_LOAD_IN_PROGRESS, KafkaError.NOT_COORDINATOR,
                                KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.REQUEST_TIMED_OUT})


def commit_may_retry(error: KafkaError) -> bool:
    """A commit Kafka did not take now but may take later (its coordinator moving, the broker away)."""
    return error.retriable() or error.code() in KAFKA_UNREACHABLE_CODES or error.code() in _COORDINATOR_CODES
