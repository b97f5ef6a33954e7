"""Asset metadata is the source of truth for resuming: where the last successful run got to."""

from __future__ import annotations

from dagster import AssetKey, DagsterInstance, MetadataValue

from connectors.kafka.admin import Offsets

KAFKA_OFFSETS = "kafka_offsets"


def recorded_kafka_offsets(instance: DagsterInstance, asset_key: AssetKey) -> Offsets:
    """Next offset to read per topic-partition, from the latest materialization; {} before the first."""
    event = instance.get_latest_materialization_event(asset_key)
    if event is None or event.asset_materialization is None:
        return {}
    entry = event.asset_materialization.metadata.get(KAFKA_OFFSETS)
    if entry is None:
        return {}
    return {topic: {int(p): int(o) for p, o in parts.items()} for topic, parts in entry.value.items()}


def kafka_offsets_metadata(offsets: Offsets) -> MetadataValue:
    # JSON object keys are strings; partitions are read back as ints above.
    return MetadataValue.json({t: {str(p): o for p, o in sorted(ps.items())} for t, ps in sorted(offsets.items())})
