"""Asset metadata is the source of truth for resuming: where the last successful run got to."""

from __future__ import annotations

from dagster import AssetKey, DagsterInstance, MetadataValue

from connectors.kafka.admin import Offsets

KAFKA_OFFSETS = "kafka_offsets"
LITE_CURSORS = "lite_cursors"


def _latest_metadata(instance: DagsterInstance, asset_key: AssetKey, name: str):
    event = instance.get_latest_materialization_event(asset_key)
    if event is None or event.asset_materialization is None:
        return None
    entry = event.asset_materialization.metadata.get(name)
    return None if entry is None else entry.value


def recorded_kafka_offsets(instance: DagsterInstance, asset_key: AssetKey) -> Offsets:
    """Next offset to read per topic-partition, from the latest materialization; {} before the first."""
    value = _latest_metadata(instance, asset_key, KAFKA_OFFSETS) or {}
    return {topic: {int(p): int(o) for p, o in parts.items()} for topic, parts in value.items()}


def recorded_lite_cursors(instance: DagsterInstance, asset_key: AssetKey) -> dict[int, int]:
    """Next Lite offset to read per partition, from the latest materialization; {} before the first."""
    value = _latest_metadata(instance, asset_key, LITE_CURSORS) or {}
    return {int(p): int(o) for p, o in value.items()}


def lite_cursors_metadata(cursors: dict[int, int]) -> MetadataValue:
    return MetadataValue.json({str(p): o for p, o in sorted(cursors.items())})


def kafka_offsets_metadata(offsets: Offsets) -> MetadataValue:
    # JSON object keys are strings; partitions are read back as ints above.
    return MetadataValue.json({t: {str(p): o for p, o in sorted(ps.items())} for t, ps in sorted(offsets.items())})
