"""A batch's report as asset metadata, and the position read back from the latest materialization: asset
metadata is the one source of truth for resuming."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from dagster import AssetKey, DagsterInstance, MetadataValue, TableColumn, TableRecord, TableSchema

from connectors.plugin import Position, Table


@dataclass(frozen=True)
class RecordedPosition:
    """A position as the latest materialization that has one records it."""

    value: Any  # the connector's position (its empty one when nothing is recorded)
    timestamp: float | None  # when it was recorded (epoch seconds); None: never
    run_id: str | None  # the run that recorded it


def recorded_position(instance: DagsterInstance, asset_key: AssetKey, position: Position | None) -> Any:
    """Where the latest materialization says the next batch starts (the connector's empty position before
    the first one); None for a connector that keeps no position."""
    if position is None:
        return None
    return position_record(instance, asset_key, position).value


def position_record(instance: DagsterInstance, asset_key: AssetKey, position: Position) -> RecordedPosition:
    """The recorded position with when and by which run it was recorded: the newer of the latest materialization's
    and the latest observation's, when that has one (a reset's, or an always-on commit that moved nothing)."""
    found = None  # (storage id, record, entry)
    for records, event_of in ((instance.fetch_materializations(asset_key, limit=1).records,
                               lambda record: record.asset_materialization),
                              (instance.fetch_observations(asset_key, limit=1).records,
                               lambda record: record.asset_observation)):
        for record in records:
            entry = event_of(record).metadata.get(position.metadata_key) if event_of(record) else None
            if entry is not None and (found is None or record.storage_id > found[0]):
                found = (record.storage_id, record, entry)
    if found is None:
        return RecordedPosition(position.from_json(None), None, None)
    _, record, entry = found
    return RecordedPosition(position.from_json(entry.value), record.timestamp, record.run_id)


def as_metadata(position: Position | None, at: Any, values: Mapping[str, Any]) -> dict[str, MetadataValue]:
    """The position first (what the next run resumes from), then the report's values."""
    metadata = {position.metadata_key: _metadata_value(position.to_json(at))} if position else {}
    for name, value in values.items():
        metadata[name] = _metadata_value(value)
    return metadata


def _metadata_value(value: Any) -> MetadataValue:
    if isinstance(value, Table):
        schema = TableSchema(columns=[TableColumn(name, kind) for name, kind in value.columns])
        return MetadataValue.table([TableRecord(row) for row in value.rows], schema)
    if isinstance(value, bool):
        return MetadataValue.bool(value)
    if isinstance(value, int):
        return MetadataValue.int(value)
    if isinstance(value, float):
        return MetadataValue.float(value)
    if isinstance(value, str):
        return MetadataValue.text(value)
    return MetadataValue.json(value)
