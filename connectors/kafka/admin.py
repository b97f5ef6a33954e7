"""The one Kafka admin helper: topic discovery, watermarks, committed group offsets, batch plans.

Only metadata calls live here, so sensors can use it within their time budget; nothing consumes.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field

from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewPartitions, NewTopic, OffsetSpec, ResourceType,
)
from google.api_core.retry import Retry

from connectors.errors import BatchError
from connectors.kafka.connection import KafkaConnection, client_logger, group_committer

# {topic: {partition: offset}}; JSON-friendly (partition keys become strings in metadata).
Offsets = dict[str, dict[int, int]]
ADMIN_TIMEOUT_S = 15


_TRANSIENT_CODES = frozenset({
    KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError.REQUEST_TIMED_OUT, KafkaError._TIMED_OUT, KafkaError._TRANSPORT, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError._UNKNOWN_PARTITION,  # a client's metadata right after the topic was made (seen on the target cluster)
    # list_offsets while a restarted broker has not yet taken its partitions' leadership: "Failed to query partition
    # leaders: No leaders found" (it failed an always-on sink's run at its next progress read; faults test).
    KafkaError._NOENT,
    # list_offsets answered by a broker whose leadership is a moment behind the controller's after a restart (Kafka
    # marks these retriable; librdkafka's admin results did not): "Leader epoch is newer than broker epoch" ended a
    # progress read in the always-on broker restart fault test.
    KafkaError.UNKNOWN_LEADER_EPOCH, KafkaError.FENCED_LEADER_EPOCH, KafkaError.OFFSET_NOT_AVAILABLE,
})


def _retriable(exc: BaseException) -> bool:
    # librdkafka marks NOT_LEADER_FOR_PARTITION (seen right after a topic is created or a
    # leader moves) as not retriable; it clears within moments.
    if not isinstance(exc, KafkaException):
        return False
    error = exc.args[0]
    return error.retriable() or error.code() in _TRANSIENT_CODES


retry_transient = Retry(predicate=_retriable, initial=0.1, maximum=2.0, multiplier=2, timeout=2 * ADMIN_TIMEOUT_S)


def _listed_offset(tp: TopicPartition, offset: int) -> int:
    """A listed offset; none (-1001) raises a transient error, retried. Right after a broker restart librdkafka
    answered a list of end offsets with -1001 and no error for every partition: an always-on sink's progress read
    recorded "-2102 behind" (faults test of the always-on broker restart, under load)."""
    if offset < 0:
        raise KafkaException(KafkaError(KafkaError.OFFSET_NOT_AVAILABLE,
                                        f"no offset listed for {tp.topic}[{tp.partition}] ({offset})"))
    return offset


@dataclass(frozen=True)
class PartitionRange:
    topic: str
    partition: int
    start: int  # first offset to read
    end: int  # first offset not to read

    @property
    def count(self) -> int:
        return self.end - self.start


@dataclass
class BatchPlan:
    """What one run reads: a [start, end) range per partition, and where every partition stands after."""

    ranges: list[PartitionRange]
    next_offsets: Offsets  # offsets to record once the batch is delivered (all partitions)
    end_offsets: Offsets  # high watermarks seen when planning
    skipped_by_retention: dict[str, int] = field(default_factory=dict)  # "topic-partition" -> records lost

    @property
    def total_records(self) -> int:
        return sum(r.count for r in self.ranges)

    def lag_after(self) -> int:
        return sum(
            self.end_offsets[t][p] - self.next_offsets[t][p] for t in self.end_offsets for p in self.end_offsets[t]
        )


class KafkaRefusedCredentials(BatchError):
    """Kafka answered, but refused the client's SASL credentials or TLS handshake: one line, without a password."""


def _recent(refusal: tuple[str, float] | None) -> str | None:
    """A refusal seen within the longest call's time (a call's retries included), else None."""
    if refusal is None or time.monotonic() - refusal[1] > 2 * ADMIN_TIMEOUT_S:
        return None
    return refusal[0]


class KafkaAdmin:
    def __init__(self, connection: KafkaConnection):
        self.connection = connection
        # The last refusal of each kind and when it came: one admin serves a process's bridges for its life
        # (resources/kafka.py), so only a refusal seen within a call's time says why that call failed.
        self._authentication_error: tuple[str, float] | None = None
        self._tls_error: tuple[str, float] | None = None
        # Asking one topic's metadata must not create it on a broker with auto.create.topics.enable (librdkafka's
        # admin client is a producer underneath, and producers ask for that by default).
        self._admin = AdminClient({**connection.librdkafka_config(), "log_level": 3, "logger": client_logger(),
                                   "error_cb": self._on_error, "allow.auto.create.topics": False})
        self._committers: dict[str, Consumer] = {}  # by group: commits() reads through them
        self._committers_lock = threading.Lock()

    def _on_error(self, error: KafkaError) -> None:
        if error.code() == KafkaError._AUTHENTICATION:
            self._authentication_error = (error.str(), time.monotonic())
        elif error.code() == KafkaError._SSL or "SSL routines" in error.str():
            # A certificate either side does not trust: the broker's alert reaches librdkafka as a receive failure.
            self._tls_error = (error.str(), time.monotonic())

    def _refused_credentials(self) -> KafkaRefusedCredentials | None:
        """After a failed call: the broker refused our credentials or the TLS handshake failed (librdkafka reports
        only a transport failure to the call, and the reason to the error callback, served here)."""
        self._admin.poll(0)
        c = self.connection
        authentication_error, tls_error = _recent(self._authentication_error), _recent(self._tls_error)
        if authentication_error is not None:
            reason = authentication_error.split(": ", 1)[-1]  # without the broker's address prefix
            return KafkaRefusedCredentials(f"Kafka at {c.bootstrap_servers} refused the credentials of user "
                                           f"{c.sasl_username!r} ({c.security_protocol}, {c.sasl_mechanism}): "
                                           f"{reason}; the run recorded nothing")
        if tls_error is not None:
            reason = tls_error.split(": ", 1)[-1]
            return KafkaRefusedCredentials(
                f"the TLS handshake with Kafka at {c.bootstrap_servers} failed ({c.security_protocol}; CA "
                f"{c.ssl_ca_location or 'of the system'}, client certificate {c.ssl_certificate_location or 'none'}): "
                f"{reason}; the run recorded nothing")
        return None

    # --- topics ------------------------------------------------------------------------------
    def partitions(self, topics: list[str] | None = None, topics_regex: str | None = None) -> dict[str, list[int]]:
        """Partitions of the named topics, or of every topic matching the regex (whole-name match)."""
        # One named topic: its metadata alone (an always-on bridge asks at every commit interval, and a cluster's
        # whole metadata grows with its topics).
        only = topics[0] if topics_regex is None and topics and len(topics) == 1 else None
        try:
            metadata = self._admin.list_topics(only, timeout=ADMIN_TIMEOUT_S)
        except KafkaException:
            refused = self._refused_credentials()
            if refused is not None:
                raise refused from None
            raise
        if topics_regex is not None:
            pattern = re.compile(topics_regex)
            names = [t for t in metadata.topics if pattern.fullmatch(t) and not t.startswith("__")]
        else:
            names = list(topics or [])
        found = {}
        for name in names:
            topic = metadata.topics.get(name)
            if topic is None or topic.error is not None:
                continue  # a named topic that does not exist yet has nothing to read
            found[name] = sorted(topic.partitions)
        return found

    def create_topic(self, name: str, partitions: int = 1, config: dict[str, str] | None = None,
                     replication_factor: int = 1) -> bool:
        """Create a topic (replication factor -1: the broker's default); False when it already exists."""
        future = self._admin.create_topics(
            [NewTopic(name, num_partitions=partitions, replication_factor=replication_factor, config=config or {})]
        )[name]
        try:
            future.result(ADMIN_TIMEOUT_S)
            return True
        except Exception as exc:
            if "TOPIC_ALREADY_EXISTS" in str(exc) or "already exists" in str(exc):
                return False
            raise

    def ensure_partitions(self, name: str, partitions: int) -> None:
        """Adds partitions to an existing topic until it has `partitions` (never removes any)."""
        if len(self.partitions([name]).get(name, ())) < partitions:
            self._admin.create_partitions([NewPartitions(name, partitions)])[name].result(ADMIN_TIMEOUT_S)

    def topic_max_message_bytes(self, topics: list[str]) -> dict[str, int]:
        """Each existing topic's max.message.bytes (its own setting or the broker's default)."""
        resources = [ConfigResource(ResourceType.TOPIC, name) for name in topics]
        sizes = {}
        for resource, future in self._admin.describe_configs(resources, request_timeout=ADMIN_TIMEOUT_S).items():
            try:
                sizes[resource.name] = int(future.result(ADMIN_TIMEOUT_S)["max.message.bytes"].value)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise
        return sizes

    def ensure_topic_takes(self, name: str, max_message_bytes: int) -> None:
        """The topic exists (created with the broker's replication factor) and takes records of this size."""
        config = {"max.message.bytes": str(max_message_bytes)}
        future = self._admin.create_topics([NewTopic(name, num_partitions=1, replication_factor=-1, config=config)],
                                           request_timeout=ADMIN_TIMEOUT_S)[name]
        try:
            future.result(ADMIN_TIMEOUT_S)
            return
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
        if self.topic_max_message_bytes([name]).get(name, 0) < max_message_bytes:
            resource = ConfigResource(ResourceType.TOPIC, name, incremental_configs=[
                ConfigEntry("max.message.bytes", str(max_message_bytes),
                            incremental_operation=AlterConfigOpType.SET)])
            self._admin.incremental_alter_configs([resource])[resource].result(ADMIN_TIMEOUT_S)

    # --- offsets -----------------------------------------------------------------------------
    @retry_transient
    def _list_offsets(self, partitions: dict[str, list[int]], spec: OffsetSpec,
                      isolation_level: str = "read_uncommitted") -> Offsets:
        request = {TopicPartition(t, p): spec for t, ps in partitions.items() for p in ps}
        result: Offsets = {t: {} for t in partitions}
        if not request:
            return result
        level = IsolationLevel[isolation_level.upper()]
        for tp, future in self._admin.list_offsets(request, isolation_level=level,
                                                   request_timeout=ADMIN_TIMEOUT_S).items():
            result[tp.topic][tp.partition] = _listed_offset(tp, future.result().offset)
        return result

    def end_offsets(self, partitions: dict[str, list[int]], isolation_level: str = "read_uncommitted") -> Offsets:
        """The high watermarks, or under read_committed the last stable offsets (before any open transaction)."""
        return self._list_offsets(partitions, OffsetSpec.latest(), isolation_level)

    def start_offsets(self, partitions: dict[str, list[int]]) -> Offsets:
        return self._list_offsets(partitions, OffsetSpec.earliest())

    @retry_transient
    def offsets_at_time(self, partitions: dict[str, list[int]], epoch_ms: int) -> Offsets:
        """Per partition the first offset whose record's timestamp is at or after `epoch_ms`, the end offset where
        there is none (Kafka's ListOffsets by timestamp, as `kafka-consumer-groups --to-datetime`)."""
        request = {TopicPartition(t, p): OffsetSpec.for_timestamp(epoch_ms) for t, ps in partitions.items() for p in ps}
        result: Offsets = {t: {} for t in partitions}
        missing: dict[str, list[int]] = {}
        for tp, future in self._admin.list_offsets(request, request_timeout=ADMIN_TIMEOUT_S).items():
            offset = future.result().offset
            if offset >= 0:
                result[tp.topic][tp.partition] = offset
            else:  # no record at or after the time
                missing.setdefault(tp.topic, []).append(tp.partition)
        for topic, ends in self.end_offsets(missing).items():
            result[topic].update(ends)
        return result

    def records_at(self, positions: Offsets, isolation_level: str = "read_uncommitted", timeout_s: float = 5.0) -> bool:
        """Whether a record can be read at or after any of `positions` within `timeout_s`. An end offset past a
        position does not say so alone: transaction markers and aborted records take offsets no reader is given."""
        wanted = [TopicPartition(t, p, o) for t, ps in positions.items() for p, o in ps.items()]
        if not wanted:
            return False
        # No group is joined nor committed to: the consumer only reads from the positions given.
        consumer = Consumer({**self.connection.librdkafka_config(), "group.id": "bridge-records-at",
                             "enable.auto.commit": False, "isolation.level": isolation_level,
                             "enable.partition.eof": False, "log_level": 3, "logger": client_logger()})
        try:
            consumer.assign(wanted)
            deadline = time.monotonic() + timeout_s
            while (left := deadline - time.monotonic()) > 0:
                if any(m.error() is None for m in consumer.consume(num_messages=1, timeout=left)):
                    return True
            return False
        finally:
            consumer.close()

    def consumer_groups(self) -> list[str]:
        """Every consumer group the cluster knows."""
        return sorted(g.group_id for g in self._admin.list_consumer_groups().result(ADMIN_TIMEOUT_S).valid)

    def committed_offsets(self, group: str, partitions: dict[str, list[int]]) -> Offsets:
        """The group's committed offsets."""
        result: Offsets = {}
        for (topic, partition), (offset, _) in self.commits(group, partitions).items():
            result.setdefault(topic, {})[partition] = offset
        return result

    @retry_transient
    def commits(self, group: str, partitions: dict[str, list[int]]) -> dict[tuple[str, int], tuple[int, str | None]]:
        """The group's commits, (offset, metadata) per committed partition. A consumer that never subscribes
        asks for them: the admin API's ListConsumerGroupOffsets crashes librdkafka 2.16 (SIGSEGV in
        rd_kafka_cgrp_op) while the group coordinator is still loading, as on a fresh cluster."""
        consumer = self._committer(group)
        requested = [TopicPartition(t, p) for t, ps in partitions.items() for p in ps]
        result = {}
        try:
            answered = consumer.committed(requested, timeout=ADMIN_TIMEOUT_S)
        except KafkaException:
            # After a 2 s broker restart a kept committer's reads timed out again and again ("Failed to get committed
            # offsets: Local: Timed out") until an always-on Lite sink's run failed 38 s later (faults test, clean-clone
            # suite): the retry asks through a new one.
            self._forget_committer(group, consumer)
            raise
        for tp in answered:
            if tp.error is not None:
                raise KafkaException(tp.error)
            if tp.offset >= 0:
                result[(tp.topic, tp.partition)] = (tp.offset, tp.metadata)
        return result

    def _committer(self, group: str) -> Consumer:
        """A consumer of the group that never subscribes, to read and write its commits; kept for the next look (an
        always-on bridge reads its group at every commit interval, and a client made for each read cost more than
        the read)."""
        with self._committers_lock:
            consumer = self._committers.get(group)
            if consumer is None:
                consumer = self._committers[group] = group_committer(self.connection.librdkafka_config(), group)
            return consumer

    def _forget_committer(self, group: str, consumer: Consumer) -> None:
        """The next look at the group makes a new committer; the old one ends when its last user drops it."""
        with self._committers_lock:
            if self._committers.get(group) is consumer:
                del self._committers[group]

    @retry_transient
    def group_members(self, group: str) -> int:
        """How many consumers are in the group now (0 for a group that is empty or unknown)."""
        [future] = self._admin.describe_consumer_groups([group]).values()
        return len(future.result(ADMIN_TIMEOUT_S).members)

    @retry_transient
    def commit_group(self, group: str, offsets: dict[tuple[str, int], int]) -> None:
        """Commits offsets to a group that has no members (Kafka refuses a commit from outside an active group)."""
        requested = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
        done = self._committer(group).commit(offsets=requested, asynchronous=False)
        for tp in done or ():
            if tp.error is not None:
                raise KafkaException(tp.error)

    # --- planning ----------------------------------------------------------------------------
    def plan_batch(
        self,
        partitions: dict[str, list[int]],
        recorded: Offsets,
        max_records: int,
        initial: str = "committed",
        group: str | None = None,
        isolation_level: str = "read_uncommitted",
    ) -> BatchPlan:
        """Offset ranges for one run: from the recorded offsets to the end offsets seen now (the last stable
        offsets under read_committed), at most `max_records` in all, shared fairly between partitions that
        have records."""
        ends = self.end_offsets(partitions, isolation_level)
        earliest = self.start_offsets(partitions)
        needs_initial = {t: [p for p in ps if p not in recorded.get(t, {})] for t, ps in partitions.items()}
        committed: Offsets = {}
        if initial == "committed" and group and any(needs_initial.values()):
            committed = self.committed_offsets(group, {t: ps for t, ps in needs_initial.items() if ps})

        starts: Offsets = {}
        skipped: dict[str, int] = {}
        for topic, ps in partitions.items():
            for p in ps:
                if p in recorded.get(topic, {}):
                    start = recorded[topic][p]
                elif p in committed.get(topic, {}):
                    start = committed[topic][p]
                elif initial == "latest":
                    start = ends[topic][p]
                else:
                    start = earliest[topic][p]
                if start < earliest[topic][p]:
                    # Retention deleted records before the bridge read them; say so, do not stall.
                    skipped[f"{topic}-{p}"] = earliest[topic][p] - start
                    start = earliest[topic][p]
                starts.setdefault(topic, {})[p] = min(start, ends[topic][p])

        budgets = share_budget(
            {(t, p): ends[t][p] - starts[t][p] for t in starts for p in starts[t]}, max_records
        )
        ranges = [
            PartitionRange(t, p, starts[t][p], starts[t][p] + n) for (t, p), n in sorted(budgets.items()) if n > 0
        ]
        next_offsets: Offsets = {t: dict(ps) for t, ps in starts.items()}
        for r in ranges:
            next_offsets[r.topic][r.partition] = r.end
        return BatchPlan(ranges, next_offsets, ends, skipped)


def share_budget(lags: dict, budget: int) -> dict:
    """Water-filling: each partition gets an equal share; what small partitions leave goes to the rest."""
    shares = {tp: 0 for tp in lags}
    pending = sorted((lag, tp) for tp, lag in lags.items() if lag > 0)
    while pending and budget > 0:
        fair = max(budget // len(pending), 1)
        lag, tp = pending.pop(0)
        shares[tp] = min(lag, fair)
        budget -= shares[tp]
    return shares
