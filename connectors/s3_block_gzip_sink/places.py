"""The archive's position for `bridgectl bridges offsets`: Kafka offsets as every Kafka-reading sink's, except that the
archive resumes from its cursor objects in S3 first (batch.archive_start), so a reset writes them too."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from connectors.framework.plugin_parts import KAFKA_OFFSETS
from connectors.plugin import Bridge, Position, Systems

if TYPE_CHECKING:
    from connectors.kafka.admin import Offsets


def _archive_mirror(systems: Systems, bridge: Bridge, position: Offsets) -> None:
    """Kafka Connect's group as for every sink, then each partition's cursor object to its new next offset (the
    index it names stays the last one written: the files already in S3 do not change)."""
    from connectors.s3_block_gzip_sink.store import Cursor, read_cursor, s3_client, s3_outages_named, write_cursor

    KAFKA_OFFSETS.source.mirror(systems, bridge, position)
    config = bridge.config
    s3 = s3_client(config, bridge.batch.outage_timeout_seconds)
    with s3_outages_named(s3, f"moving the archive's cursors in s3://{config.s3_bucket}/{config.key_prefix()}"):
        for topic, partitions in sorted(position.items()):
            for partition, offset in sorted(partitions.items()):
                cursor = read_cursor(s3, config, topic, partition)
                write_cursor(s3, config, topic, partition, Cursor(cursor.index if cursor else None, offset))


ARCHIVE_OFFSETS: Position = dataclasses.replace(
    KAFKA_OFFSETS, source=dataclasses.replace(KAFKA_OFFSETS.source, mirror=_archive_mirror))
