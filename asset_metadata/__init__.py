"""A batch's report as asset metadata, and the position read back from the latest materialization: asset
metadata is the one source of truth for resuming."""

from __future__ import annotations

from typing import Any, Mapping

from dagster import AssetKey, DagsterInstance, MetadataValue, TableColumn, TableRecord, TableSchema

from connectors.plugin import Position, Table


def recorded_position(instance: DagsterInstance, asset_key: AssetKey, position: Position | None) -> Any:
    """Where the latest materialization says the next batch starts (the connector's empty position before
    the first one); None for a connector that keeps no position."""
    if position is None:
        return None
    event = instance.get_latest_materialization_event(asset_key)
    entry = None
    if event is not None and event.asset_materialization is not None:
        entry = event.asset_materialization.metadata.get(position.metadata_key)
    return position.from_json(None if entry is None else entry.value)


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
