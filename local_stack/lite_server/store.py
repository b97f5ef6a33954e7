"""The Lite server's state: topics, subscriptions, partition logs and committed cursors.

Everything lives in memory for serving and in one SQLite file for durability; a restart loads it back.
All methods run on the server's single event loop, so no locks.
"""

from __future__ import annotations

import asyncio
import bisect
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from google.cloud.pubsublite_v1 import types
from google.protobuf import timestamp_pb2

Topic = types.Topic.pb()
Subscription = types.Subscription.pb()
SequencedMessage = types.SequencedMessage.pb()
PubSubMessage = types.PubSubMessage.pb()

# The service's limit for one message (data, key and attributes together).
MAX_MESSAGE_BYTES = 3_500_000 + 1024
DELETED_TOPIC = "_deleted-topic_"


class LiteError(Exception):
    def __init__(self, code: grpc.StatusCode, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


@dataclass
class PartitionLog:
    first_offset: int = 0
    messages: list = field(default_factory=list)  # SequencedMessage, offsets first_offset..head-1
    bytes: int = 0
    # Each open subscribe stream on this partition waits on its own event; an append sets them all.
    waiters: set = field(default_factory=set)

    @property
    def head(self) -> int:
        return self.first_offset + len(self.messages)

    def read(self, offset: int, max_messages: int, max_bytes: int) -> list:
        start = max(offset, self.first_offset) - self.first_offset
        out, size = [], 0
        for message in self.messages[start:start + max_messages]:
            if size + message.size_bytes > max_bytes:
                break
            out.append(message)
            size += message.size_bytes
        return out

    def time_cursor(self, target_ns: int, by_publish: bool = True) -> int | None:
        """The offset of the first message at or after a time (its event time when not `by_publish`, else its publish
        time); None when there is none."""
        for message in self.messages:
            stamp = message.publish_time if by_publish or not message.message.HasField("event_time") \
                else message.message.event_time
            if stamp.ToNanoseconds() >= target_ns:
                return message.cursor.offset
        return None

    def wake(self) -> None:
        for event in self.waiters:
            event.set()


class _Intervals:
    """Disjoint, sorted [start, end) integer intervals; merged as they touch."""

    def __init__(self) -> None:
        self.spans: list[list[int]] = []

    def __bool__(self) -> bool:
        return bool(self.spans)

    def contains(self, n: int) -> bool:
        i = bisect.bisect_right(self.spans, [n, float("inf")]) - 1
        return i >= 0 and self.spans[i][0] <= n < self.spans[i][1]

    def add(self, start: int, end: int) -> None:
        bisect.insort(self.spans, [start, end])
        merged: list[list[int]] = []
        for span in self.spans:
            if merged and span[0] <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], span[1])
            else:
                merged.append(span)
        self.spans = merged


def _topic_parts(topic_name: str) -> tuple[str, str]:
    """('projects/p/locations/l', 'id') from 'projects/p/locations/l/topics/id'."""
    parent, _, topic_id = topic_name.rpartition("/topics/")
    return parent, topic_id


class LiteStore:
    def __init__(self, db_path: Path):
        self._db = sqlite3.connect(db_path, isolation_level=None)
        self._db.executescript("""
            PRAGMA journal_mode=WAL;
            PRAGMA synchronous=NORMAL;
            CREATE TABLE IF NOT EXISTS topics (name TEXT PRIMARY KEY, proto BLOB);
            CREATE TABLE IF NOT EXISTS subscriptions (name TEXT PRIMARY KEY, proto BLOB);
            CREATE TABLE IF NOT EXISTS partitions (
                topic TEXT, partition INTEGER, first_offset INTEGER, PRIMARY KEY (topic, partition));
            CREATE TABLE IF NOT EXISTS messages (
                topic TEXT, partition INTEGER, offset INTEGER, proto BLOB,
                PRIMARY KEY (topic, partition, offset)) WITHOUT ROWID;
            CREATE TABLE IF NOT EXISTS cursors (
                subscription TEXT, partition INTEGER, offset INTEGER, PRIMARY KEY (subscription, partition));
            CREATE TABLE IF NOT EXISTS publish_sequences (
                topic TEXT, partition INTEGER, client_id BLOB, start INTEGER, end INTEGER);
        """)
        self.topics: dict[str, object] = {}
        self.subscriptions: dict[str, object] = {}
        self.logs: dict[tuple[str, int], PartitionLog] = {}
        self.cursors: dict[tuple[str, int], int] = {}
        # Publish idempotency: sequence numbers seen per (topic, partition, client id). Kept in the
        # database with the messages they admitted, so a resend after a server restart is not stored twice.
        self._sequences: dict[tuple[str, int, bytes], _Intervals] = {}
        self._load()

    def _load(self) -> None:
        for name, blob in self._db.execute("SELECT name, proto FROM topics"):
            self.topics[name] = Topic.FromString(blob)
        for name, blob in self._db.execute("SELECT name, proto FROM subscriptions"):
            self.subscriptions[name] = Subscription.FromString(blob)
        for topic, partition, first in self._db.execute("SELECT topic, partition, first_offset FROM partitions"):
            self.logs[(topic, partition)] = PartitionLog(first_offset=first)
        for topic, partition, blob in self._db.execute(
                "SELECT topic, partition, proto FROM messages ORDER BY topic, partition, offset"):
            log = self.logs[(topic, partition)]
            message = SequencedMessage.FromString(blob)
            log.messages.append(message)
            log.bytes += message.size_bytes
        for subscription, partition, offset in self._db.execute("SELECT subscription, partition, offset FROM cursors"):
            self.cursors[(subscription, partition)] = offset
        for topic, partition, client_id, start, end in self._db.execute(
                "SELECT topic, partition, client_id, start, end FROM publish_sequences"):
            self._sequences.setdefault((topic, partition, client_id), _Intervals()).add(start, end)

    # --- topics ------------------------------------------------------------------------------
    def topic(self, name: str):
        if name not in self.topics:
            raise LiteError(grpc.StatusCode.NOT_FOUND, f"Topic {name} not found.")
        return self.topics[name]

    def create_topic(self, parent: str, topic_id: str, topic) -> object:
        name = f"{parent}/topics/{topic_id}"
        if not topic_id or not parent.startswith("projects/") or "/locations/" not in parent:
            raise LiteError(grpc.StatusCode.INVALID_ARGUMENT, f"Invalid topic parent {parent!r} or id {topic_id!r}.")
        if name in self.topics:
            raise LiteError(grpc.StatusCode.ALREADY_EXISTS, f"Topic {name} already exists.")
        if topic.partition_config.count < 1:
            raise LiteError(grpc.StatusCode.INVALID_ARGUMENT, "partition_config.count must be at least 1.")
        # The real service asks for at least 30 GiB per partition; a local server accepts less so that
        # retention can be exercised.
        if topic.retention_config.per_partition_bytes <= 0:
            raise LiteError(grpc.StatusCode.INVALID_ARGUMENT, "retention_config.per_partition_bytes must be set.")
        stored = Topic()
        stored.CopyFrom(topic)
        stored.name = name
        self._save_topic(stored)
        self._ensure_partitions(stored)
        return stored

    def update_topic(self, topic, paths: list[str]):
        stored = Topic()
        stored.CopyFrom(self.topic(topic.name))
        for path in paths or ["partition_config", "retention_config"]:
            if path.startswith("partition_config"):
                if topic.partition_config.count < stored.partition_config.count:
                    raise LiteError(grpc.StatusCode.INVALID_ARGUMENT, "The partition count cannot be decreased.")
                stored.partition_config.CopyFrom(topic.partition_config)
            elif path.startswith("retention_config"):
                stored.retention_config.CopyFrom(topic.retention_config)
            else:
                raise LiteError(grpc.StatusCode.INVALID_ARGUMENT, f"Cannot update field {path!r}.")
        self._save_topic(stored)
        self._ensure_partitions(stored)
        self.enforce_retention(stored.name)
        return stored

    def delete_topic(self, name: str) -> None:
        topic = self.topic(name)
        del self.topics[name]
        for partition in range(topic.partition_config.count):
            self.logs.pop((name, partition), None)
        self._db.execute("BEGIN")
        self._db.execute("DELETE FROM topics WHERE name = ?", (name,))
        self._db.execute("DELETE FROM partitions WHERE topic = ?", (name,))
        self._db.execute("DELETE FROM messages WHERE topic = ?", (name,))
        self._db.execute("DELETE FROM publish_sequences WHERE topic = ?", (name,))
        self._sequences = {key: seen for key, seen in self._sequences.items() if key[0] != name}
        for subscription in self.subscriptions.values():
            if subscription.topic == name:
                subscription.topic = DELETED_TOPIC
                self._db.execute("UPDATE subscriptions SET proto = ? WHERE name = ?",
                                 (subscription.SerializeToString(), subscription.name))
        self._db.execute("COMMIT")

    def list_topics(self, parent: str) -> list:
        return [t for name, t in sorted(self.topics.items()) if _topic_parts(name)[0] == parent]

    def _save_topic(self, topic) -> None:
        self.topics[topic.name] = topic
        self._db.execute("INSERT OR REPLACE INTO topics VALUES (?, ?)", (topic.name, topic.SerializeToString()))

    def _ensure_partitions(self, topic) -> None:
        for partition in range(topic.partition_config.count):
            if (topic.name, partition) not in self.logs:
                self.logs[(topic.name, partition)] = PartitionLog()
                self._db.execute("INSERT OR REPLACE INTO partitions VALUES (?, ?, 0)", (topic.name, partition))

    def log(self, topic_name: str, partition: int) -> PartitionLog:
        topic = self.topic(topic_name)
        if not 0 <= partition < topic.partition_config.count:
            raise LiteError(grpc.StatusCode.INVALID_ARGUMENT,
                            f"Partition {partition} out of range: topic {topic_name} has "
                            f"{topic.partition_config.count} partitions.")
        return self.logs[(topic_name, partition)]

    # --- subscriptions -----------------------------------------------------------------------
    def subscription(self, name: str):
        if name not in self.subscriptions:
            raise LiteError(grpc.StatusCode.NOT_FOUND, f"Subscription {name} not found.")
        return self.subscriptions[name]

    def subscription_log(self, name: str, partition: int) -> PartitionLog:
        subscription = self.subscription(name)
        if subscription.topic == DELETED_TOPIC:
            raise LiteError(grpc.StatusCode.FAILED_PRECONDITION, f"The topic of subscription {name} was deleted.")
        return self.log(subscription.topic, partition)

    def create_subscription(self, parent: str, subscription_id: str, subscription, skip_backlog: bool):
        name = f"{parent}/subscriptions/{subscription_id}"
        if not subscription_id:
            raise LiteError(grpc.StatusCode.INVALID_ARGUMENT, "subscription_id is required.")
        if name in self.subscriptions:
            raise LiteError(grpc.StatusCode.ALREADY_EXISTS, f"Subscription {name} already exists.")
        topic = self.topic(subscription.topic)
        stored = Subscription()
        stored.CopyFrom(subscription)
        stored.name = name
        self.subscriptions[name] = stored
        self._db.execute("BEGIN")
        self._db.execute("INSERT INTO subscriptions VALUES (?, ?)", (name, stored.SerializeToString()))
        for partition in range(topic.partition_config.count):
            log = self.logs[(topic.name, partition)]
            self._set_cursor(name, partition, log.head if skip_backlog else log.first_offset)
        self._db.execute("COMMIT")
        return stored

    def update_subscription(self, subscription, paths: list[str]):
        stored = Subscription()
        stored.CopyFrom(self.subscription(subscription.name))
        for path in paths or ["delivery_config"]:
            if path.startswith("delivery_config"):
                stored.delivery_config.CopyFrom(subscription.delivery_config)
            elif path.startswith("export_config"):
                stored.export_config.CopyFrom(subscription.export_config)
            else:
                raise LiteError(grpc.StatusCode.INVALID_ARGUMENT, f"Cannot update field {path!r}.")
        self.subscriptions[stored.name] = stored
        self._db.execute("UPDATE subscriptions SET proto = ? WHERE name = ?", (stored.SerializeToString(), stored.name))
        return stored

    def delete_subscription(self, name: str) -> None:
        self.subscription(name)
        del self.subscriptions[name]
        for key in [k for k in self.cursors if k[0] == name]:
            del self.cursors[key]
        self._db.execute("BEGIN")
        self._db.execute("DELETE FROM subscriptions WHERE name = ?", (name,))
        self._db.execute("DELETE FROM cursors WHERE subscription = ?", (name,))
        self._db.execute("COMMIT")

    def list_subscriptions(self, parent: str) -> list:
        return [s for name, s in sorted(self.subscriptions.items())
                if name.rpartition("/subscriptions/")[0] == parent]

    def topic_subscriptions(self, topic_name: str) -> list[str]:
        self.topic(topic_name)
        return sorted(name for name, s in self.subscriptions.items() if s.topic == topic_name)

    # --- cursors -----------------------------------------------------------------------------
    def committed_cursor(self, subscription: str, partition: int) -> int:
        log = self.subscription_log(subscription, partition)
        return self.cursors.get((subscription, partition), log.first_offset)

    def commit_cursor(self, subscription: str, partition: int, offset: int) -> None:
        self.subscription_log(subscription, partition)
        if offset < 0:
            raise LiteError(grpc.StatusCode.INVALID_ARGUMENT, f"Invalid cursor offset {offset}.")
        self._set_cursor(subscription, partition, offset)

    def _set_cursor(self, subscription: str, partition: int, offset: int) -> None:
        self.cursors[(subscription, partition)] = offset
        self._db.execute("INSERT OR REPLACE INTO cursors VALUES (?, ?, ?)", (subscription, partition, offset))

    def seek_subscription(self, name: str, offset_of) -> None:
        """Every partition's committed cursor to `offset_of(log)`, as Lite's out-of-band seek does for a subscription
        with no subscriber online (one that is online keeps reading where it is until it reconnects)."""
        subscription = self.subscription(name)
        logs = [(p, self.subscription_log(name, p)) for p in range(self.topic(subscription.topic).partition_config.count)]
        self._db.execute("BEGIN")
        for partition, log in logs:
            self._set_cursor(name, partition, offset_of(log))
        self._db.execute("COMMIT")

    def partition_cursors(self, subscription: str) -> list[tuple[int, int]]:
        self.subscription(subscription)
        return sorted((p, o) for (s, p), o in self.cursors.items() if s == subscription)

    # --- messages ----------------------------------------------------------------------------
    def publish(self, topic_name: str, partition: int, messages, client_id: bytes,
                first_sequence: int) -> list[tuple[int, int, int]]:
        """Append messages; returns cursor ranges (start_index, end_index, start_offset) of what was new.

        With a client id, messages whose sequence number was already seen are duplicates of a retried
        request: they are acknowledged but not appended again, as the service's idempotent publishing does.
        Seen numbers are kept as intervals, not a high-water mark, because the Python client can put
        batches on the stream out of sequence order. A request without a sequence number (0 after the
        first) is never deduplicated: the client resends outstanding batches after a reconnect without
        one, and dropping those could lose messages.
        """
        log = self.log(topic_name, partition)
        duplicate = [False] * len(messages)
        seen = None
        if client_id:
            seen = self._sequences.setdefault((topic_name, partition, client_id), _Intervals())
            if first_sequence > 0 or not seen:
                duplicate = [seen.contains(first_sequence + i) for i in range(len(messages))]
                seen.add(first_sequence, first_sequence + len(messages))
            else:
                seen = None  # nothing new to remember
        now = time.time_ns()
        publish_time = timestamp_pb2.Timestamp(seconds=now // 1_000_000_000, nanos=now % 1_000_000_000)
        rows, ranges = [], []
        for index, message in enumerate(messages):
            if duplicate[index]:
                continue
            size = message.ByteSize()
            if size > MAX_MESSAGE_BYTES:
                raise LiteError(grpc.StatusCode.INVALID_ARGUMENT,
                                f"Message of {size} bytes exceeds the {MAX_MESSAGE_BYTES} byte limit.")
            if ranges and ranges[-1][1] == index:
                ranges[-1][1] = index + 1
            else:
                ranges.append([index, index + 1, log.head])
            sequenced = SequencedMessage(size_bytes=size, publish_time=publish_time)
            sequenced.cursor.offset = log.head
            sequenced.message.CopyFrom(message)
            log.messages.append(sequenced)
            log.bytes += size
            rows.append((topic_name, partition, sequenced.cursor.offset, sequenced.SerializeToString()))
        if rows:
            self._db.execute("BEGIN")
            self._db.executemany("INSERT INTO messages VALUES (?, ?, ?, ?)", rows)
            if seen is not None:
                key = (topic_name, partition, client_id)
                self._db.execute("DELETE FROM publish_sequences WHERE topic = ? AND partition = ? AND client_id = ?",
                                 key)
                self._db.executemany("INSERT INTO publish_sequences VALUES (?, ?, ?, ?, ?)",
                                     [(*key, start, end) for start, end in seen.spans])
            self._db.execute("COMMIT")
            self._trim(topic_name, partition, log, self.topics[topic_name])
            log.wake()
        return [tuple(r) for r in ranges]

    def enforce_retention(self, topic_name: str | None = None) -> None:
        """Drop what the topic's retention no longer keeps: too old, or past the per-partition bytes."""
        for (name, partition), log in list(self.logs.items()):
            if topic_name in (None, name) and name in self.topics:
                self._trim(name, partition, log, self.topics[name])

    def _trim(self, topic_name: str, partition: int, log: PartitionLog, topic) -> None:
        retention = topic.retention_config
        drop = 0
        remaining = log.bytes
        while drop < len(log.messages) and remaining > retention.per_partition_bytes:
            remaining -= log.messages[drop].size_bytes
            drop += 1
        if retention.HasField("period") and retention.period.ToNanoseconds() > 0:
            cutoff = time.time_ns() - retention.period.ToNanoseconds()
            while drop < len(log.messages) and log.messages[drop].publish_time.ToNanoseconds() < cutoff:
                remaining -= log.messages[drop].size_bytes
                drop += 1
        if not drop:
            return
        del log.messages[:drop]
        log.first_offset += drop
        log.bytes = remaining
        self._db.execute("BEGIN")
        self._db.execute("DELETE FROM messages WHERE topic = ? AND partition = ? AND offset < ?",
                         (topic_name, partition, log.first_offset))
        self._db.execute("UPDATE partitions SET first_offset = ? WHERE topic = ? AND partition = ?",
                         (log.first_offset, topic_name, partition))
        self._db.execute("COMMIT")


async def retention_loop(store: LiteStore, period_s: float = 1.0) -> None:
    while True:
        await asyncio.sleep(period_s)
        store.enforce_retention()
