"""The Lite source's position against its subscription, for `bridgectl bridges offsets`: each partition's recorded
cursor beside where its topic partition starts (the oldest message kept) and ends (the head), offsets by publish
time, and the subscription's committed cursors moved with a reset. Unary admin calls only: nothing is read."""

from __future__ import annotations

from connectors.plugin import Bridge, PartitionKey, Place, Systems
from connectors.pubsublite.clients import LiteConnection, region_of
from connectors.pubsublite_source.config import PubSubLiteSourceConfig


# The calls below live beside the batch, which imports pyspark: they are imported when asked, so loading the plugin
# (the code server, the CLI) stays light.
def time_cursors(connection: LiteConnection, config: PubSubLiteSourceConfig, epoch_ms: int) -> dict[int, int]:
    """Per partition the first message published at or after `epoch_ms`, the head where none is. Time 0 gives the
    oldest message the topic still keeps."""
    from connectors.pubsublite_source.batch import head_cursors, lite_topic_of

    topic, partition_count = lite_topic_of(connection, config)
    return _time_cursors(connection, topic, head_cursors(connection, topic, partition_count), epoch_ms)


def _time_cursors(connection: LiteConnection, topic, heads: dict[int, int], epoch_ms: int) -> dict[int, int]:
    from google.protobuf.timestamp_pb2 import Timestamp

    stats = connection.topic_stats_service(region_of(topic.location))
    at = Timestamp()
    at.FromMilliseconds(epoch_ms)
    found = {}
    for partition, head in heads.items():
        response = stats.compute_time_cursor(request={"topic": str(topic), "partition": partition,
                                                      "target": {"publish_time": at}})
        # Lite's ComputeTimeCursor leaves the cursor unset when no message is that new.
        found[partition] = response.cursor.offset if "cursor" in response else head
    return found


def lite_places(systems: Systems, bridge: Bridge, position) -> tuple[Place, ...]:
    """Each partition of the subscription's topic: the recorded cursor, where the next run starts (the recorded
    cursor, else the subscription's committed one), the oldest message kept and the head."""
    from connectors.pubsublite_source.batch import committed_cursors, head_cursors, lite_topic_of, start_cursors

    config, recorded = bridge.config, position or {}
    connection = systems.pubsublite.connection_for(config)
    topic, partition_count = lite_topic_of(connection, config)
    heads = head_cursors(connection, topic, partition_count)
    starts = start_cursors(recorded, committed_cursors(connection, config), partition_count)
    oldest = _time_cursors(connection, topic, heads, 0)
    source = str(config.subscription_path())
    return tuple(Place(source, p, recorded.get(p), starts[p], oldest[p], heads[p]) for p in sorted(heads))


def lite_moved(position, moves: dict[PartitionKey, int]) -> dict[int, int]:
    return {**(position or {}), **{partition: offset for (_, partition), offset in moves.items()}}


def lite_offsets_at(systems: Systems, bridge: Bridge, epoch_ms: int) -> dict[PartitionKey, int]:
    config = bridge.config
    source = str(config.subscription_path())
    return {(source, partition): offset for partition, offset in
            time_cursors(systems.pubsublite.connection_for(config), config, epoch_ms).items()}


def lite_mirror(systems: Systems, bridge: Bridge, position) -> None:
    """The subscription's committed cursors to the new position, as a seek of the subscription would: a Lite client
    reading the subscription (or this bridge with its recorded position gone) starts there too. Under exactly once,
    the positions in the Kafka transactions as well."""
    config = bridge.config
    path = config.subscription_path()
    cursor_service = systems.pubsublite.connection_for(config).cursor_service(region_of(path.location))
    for partition, offset in sorted((position or {}).items()):
        cursor_service.commit_cursor(request={"subscription": str(path), "partition": partition,
                                              "cursor": {"offset": offset}})
    if config.exactly_once:
        _move_transactional_positions(systems, bridge, position or {})


def _move_transactional_positions(systems: Systems, bridge: Bridge, position: dict[int, int]) -> None:
    """A run resumes from the positions topic where it is ahead of the recorded position: each partition's new cursor
    is committed there, in a transaction of the partition's own slot (starting its producer fences any a killed run
    left behind)."""
    from connectors.kafka.connection import source_producer_config
    from connectors.kafka.transactions import PositionsTopic, commit_slot_records
    from connectors.pubsublite_source.exactly_once import TRANSACTION_TIMEOUT_MS, position_key

    config, kafka = bridge.config, systems.kafka.admin()
    client_config = kafka.connection.librdkafka_config()
    positions = PositionsTopic(config.positions_topic_name(bridge.name), client_config)
    positions.ensure(kafka, max(position, default=-1) + 1)
    commit_slot_records(source_producer_config(client_config, bridge.batch.outage_timeout_seconds), positions,
                        [(partition, position_key(config, partition), {"next_cursor": cursor})
                         for partition, cursor in sorted(position.items())],
                        TRANSACTION_TIMEOUT_MS, "the reset of a Lite partition")
