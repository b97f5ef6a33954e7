"""The Kafka sink's position for `bridgectl bridges offsets`: Kafka offsets as every Kafka-reading sink's; under
exactly once a reset also commits the new offsets to the positions topic on the target (exactly_once.py), which a
run resumes from where it is ahead of the recorded position."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from connectors.framework.plugin_parts import KAFKA_OFFSETS
from connectors.plugin import Bridge, Position, Systems

if TYPE_CHECKING:
    from connectors.kafka.admin import Offsets


def _kafka_sink_mirror(systems: Systems, bridge: Bridge, position: Offsets) -> None:
    KAFKA_OFFSETS.source.mirror(systems, bridge, position)
    if bridge.config.exactly_once:
        _move_transactional_positions(bridge, position)


def _move_transactional_positions(bridge: Bridge, position: Offsets) -> None:
    """Each source partition's new offset committed in a transaction of its own slot (starting its producer fences any
    a killed run left behind)."""
    from connectors.kafka.admin import KafkaAdmin
    from connectors.kafka.connection import client_logger
    from connectors.kafka.transactions import PositionsTopic, commit_slot_records, slot_of
    from connectors.kafka_sink.exactly_once import POSITIONS_PARTITIONS, TRANSACTION_TIMEOUT_MS, position_key

    config = bridge.config
    connection = config.target_connection()
    positions = PositionsTopic(config.positions_topic_name(bridge.name), connection.librdkafka_config())
    partitions = positions.ensure_hashed(KafkaAdmin(connection), POSITIONS_PARTITIONS)
    keys = [(position_key(topic, partition), offset) for topic, offsets in sorted(position.items())
            for partition, offset in sorted(offsets.items())]
    commit_slot_records({**connection.librdkafka_config(), "logger": client_logger(), "log_level": 3}, positions,
                        [(slot_of(key, partitions), key, {"next_offset": offset}) for key, offset in keys],
                        TRANSACTION_TIMEOUT_MS, "the reset of a source partition", named_by_key=True)


KAFKA_SINK_OFFSETS: Position = dataclasses.replace(KAFKA_OFFSETS, source=dataclasses.replace(
    KAFKA_OFFSETS.source, mirror=_kafka_sink_mirror, moves_transactions=True))
