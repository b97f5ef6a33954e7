"""Driver side of the Lite source: plan per-partition cursor ranges, run them on Spark, then commit.

Order of effects: read -> Kafka acknowledges -> cursors committed to Lite -> cursors recorded as
asset metadata. A crash anywhere before the commit re-reads the same ranges next run
(duplicates possible, never loss); the reference commits before delivery and can lose data.
Under exactly.once.support=required the records and the next cursors commit in one Kafka transaction
(exactly_once.py), and the tasks go on from the cursors committed there: the metadata, Lite's cursor and
a re-read range then only ever trail the transactions, never duplicate them.
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass, field

from pyspark.sql import SparkSession

from connectors.bridge import BatchSettings
from connectors.kafka.admin import KafkaAdmin, share_budget
from connectors.framework.batch_lease import held_batch_lease
from connectors.kafka.outages import kafka_outages_named
from connectors.framework.stream_lease import source_lease_place
from connectors.kafka.transactions import PositionsTopic
from connectors.outage import lite_outages_named
from connectors.pubsublite.clients import LiteConnection, region_of
from connectors.pubsublite_source.config import PubSubLiteSourceConfig
from connectors.pubsublite_source.exactly_once import position_key, read_and_deliver_in_transactions
from connectors.pubsublite_source.write import RANGE_SCHEMA, SUMMARY_SCHEMA, LiteSourceTask, read_and_deliver

LiteCursors = dict[int, int]  # Lite partition -> next offset to read


@dataclass
class LiteSourceBatchResult:
    start_cursors: LiteCursors
    head_cursors: LiteCursors
    next_cursors: LiteCursors = field(default_factory=dict)
    duration_s: float = 0.0
    messages: int = 0  # read from Lite
    dropped: int = 0  # refused by Kafka for good and skipped (errors.tolerance=all)
    filtered: int = 0  # dropped by a transform: read, not written
    bytes: int = 0
    lost_to_retention: dict[int, int] = field(default_factory=dict)
    # exactly once: partitions read from further on than planned (a killed run's transaction had committed), and
    # where from
    resumed_from_transactions: dict[int, int] = field(default_factory=dict)

    @property
    def backlog_after(self) -> int:
        return sum(max(0, self.head_cursors[p] - self.next_cursors.get(p, self.start_cursors[p]))
                   for p in self.head_cursors)

    @property
    def records_per_second(self) -> float:
        return self.messages / self.duration_s if self.duration_s > 0 else 0.0


def subscription_topic(connection: LiteConnection, config: PubSubLiteSourceConfig) -> str:
    """The subscription's topic path (one admin call)."""
    path = config.subscription_path()
    return connection.admin(region_of(path.location)).get_subscription(path).topic


def lite_topic_of(connection: LiteConnection, config: PubSubLiteSourceConfig):
    """The subscription's topic and its partition count (two admin calls)."""
    from google.cloud.pubsublite.types import TopicPath

    path = config.subscription_path()
    admin = connection.admin(region_of(path.location))
    topic = TopicPath.parse(admin.get_subscription(path).topic)
    return topic, admin.get_topic_partition_count(topic)


def head_cursors(connection: LiteConnection, topic, partition_count: int) -> LiteCursors:
    stats = connection.topic_stats_service(region_of(topic.location))
    return {p: stats.compute_head_cursor(request={"topic": str(topic), "partition": p}).head_cursor.offset
            for p in range(partition_count)}


def committed_cursors(connection: LiteConnection, config: PubSubLiteSourceConfig) -> LiteCursors:
    """The subscription's committed cursor per partition (one that has one)."""
    path = config.subscription_path()
    return {c.partition: c.cursor.offset for c in connection.cursor_service(region_of(path.location))
            .list_partition_cursors(request={"parent": str(path)})}


def lite_positions(connection: LiteConnection, config: PubSubLiteSourceConfig,
                   recorded: LiteCursors) -> tuple[LiteCursors, LiteCursors]:
    """(start, head) per partition: start from the recorded cursors, else the subscription's committed
    cursor (a new partition, or a bridge's first run); head is where publishing is now."""
    topic, partition_count = lite_topic_of(connection, config)
    committed = committed_cursors(connection, config)
    return start_cursors(recorded, committed, partition_count), head_cursors(connection, topic, partition_count)


def start_cursors(recorded: LiteCursors, committed: LiteCursors, partition_count: int) -> LiteCursors:
    """Where each partition starts: its recorded cursor, else the subscription's committed one, else 0."""
    return {p: recorded.get(p, committed.get(p, 0)) for p in range(partition_count)}


def target_partition_count(kafka: KafkaAdmin, config: PubSubLiteSourceConfig) -> int:
    """kafka.topic's partition count; raises naming it when it does not exist."""
    kafka_partitions = kafka.partitions([config.kafka_topic]).get(config.kafka_topic)
    if kafka_partitions is None:
        raise ValueError(f"kafka.topic {config.kafka_topic!r} does not exist")
    return len(kafka_partitions)


def run_lite_source_batch(
    spark: SparkSession,
    config: PubSubLiteSourceConfig,
    connection: LiteConnection,
    kafka: KafkaAdmin,
    recorded: LiteCursors,
    batch: BatchSettings,
    bridge_name: str,
    consumer_group: str,
) -> LiteSourceBatchResult:
    """Up to batch.max_records messages from the subscription's cursors (or the transactions' positions) to Kafka, a
    Spark task per Lite partition range, held on a lease in `consumer_group`'s lease group (batch_lease.py; at
    kafka.topic's partition 0, as the bridge's stream); the cursors are committed once Kafka has every record."""
    started = time.monotonic()
    with kafka_outages_named(kafka.connection.bootstrap_servers, f"checking kafka.topic {config.kafka_topic}"):
        kafka_partition_count = target_partition_count(kafka, config)
    subscription = config.subscription_path()
    with lite_outages_named(connection, subscription.location, f"reading the cursors of {subscription}"):
        starts, heads = lite_positions(connection, config, recorded)
    positions, resumed = None, {}
    if config.exactly_once:
        positions = PositionsTopic(config.positions_topic_name(bridge_name), kafka.connection.librdkafka_config())
        positions.ensure(kafka, len(heads))
        # The transactions are the truth: a run killed after its commit left the metadata and Lite's cursor behind.
        for p, committed in positions.latest_of({p: position_key(config, p) for p in heads}).items():
            if committed["next_cursor"] > starts[p]:
                starts[p] = resumed[p] = committed["next_cursor"]
    budgets = share_budget({p: max(0, heads[p] - starts[p]) for p in heads}, batch.max_records)
    ranges = [{"lite_partition": p, "start_offset": starts[p], "end_offset": starts[p] + n}
              for p, n in sorted(budgets.items()) if n > 0]
    result = LiteSourceBatchResult(start_cursors=starts, head_cursors=heads, resumed_from_transactions=resumed)
    if ranges:
        client_config = kafka.connection.librdkafka_config()
        frame = spark.createDataFrame(ranges, RANGE_SCHEMA).repartition(min(len(ranges), batch.parallelism))
        deliver = read_and_deliver_in_transactions if positions is not None else read_and_deliver
        with held_batch_lease(client_config, consumer_group, source_lease_place(config.kafka_topic)) as lease:
            task = LiteSourceTask(config, connection, client_config, kafka_partition_count,
                                  batch.outage_timeout_seconds, positions, lease)
            rows = frame.mapInArrow(functools.partial(deliver, task), SUMMARY_SCHEMA).collect()
        cursor_service = connection.cursor_service(region_of(config.subscription_path().location))
        for row in rows:
            partition = row["lite_partition"]
            result.next_cursors[partition] = row["next_cursor"]
            result.messages += row["messages"]
            result.dropped += row["dropped"]
            result.filtered += row["filtered"]
            result.bytes += row["bytes"]
            if row["lost"]:
                result.lost_to_retention[partition] = row["lost"]
            if row["started_at"] != starts[partition]:
                result.resumed_from_transactions[partition] = row["started_at"]
            # Kafka has every record of this range: now the cursor may move.
            with lite_outages_named(connection, subscription.location, f"committing the cursors of {subscription}"):
                cursor_service.commit_cursor(request={
                    "subscription": str(subscription), "partition": partition, "cursor": {"offset": row["next_cursor"]}})
    result.duration_s = time.monotonic() - started
    return result
