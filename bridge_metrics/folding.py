"""One recorded batch (a materialization's values) as metric changes, by what its connector's `ReportKeys`
say the values mean."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from connectors.framework.latency import BUCKET_FIELDS, SUM_FIELD
from connectors.plugin import ReportKeys

# The value a Kafka sink records its send-to-arrival latency buckets under (connectors/framework/plugin_parts.py).
LATENCY_VALUE = "delivery_latency"


@dataclass(frozen=True)
class Folded:
    added: dict[str, int]  # counter (its exposed name) -> what this batch adds
    duration_s: float | None  # None: the batch recorded none
    lag: int | None  # None: the connector cannot see it, or this batch recorded none
    partition_lag: dict[tuple[str, str], int]  # (topic, partition) -> lag, from a "partitions" table with a lag column
    latency: tuple[list[int], float] | None = None  # counts per bucket (connectors/framework/latency.py) and their sum (s)


def _count(values: Mapping[str, Any], name: str | None) -> int:
    value = values.get(name) if name else None
    # bool is an int too, but never a count
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0 else 0


def fold(keys: ReportKeys, values: Mapping[str, Any]) -> Folded:
    added = {"bridge_records_read_total": _count(values, keys.read),
             "bridge_records_delivered_total": _count(values, keys.delivered),
             "bridge_batches_total": 1}
    for metric, value_name in keys.counted:
        added[f"bridge_{metric}_total"] = added.get(f"bridge_{metric}_total", 0) + _count(values, value_name)
    duration = values.get("duration_seconds")
    lag = values.get(keys.lag) if keys.lag else None
    return Folded(added, float(duration) if isinstance(duration, (int, float)) else None,
                  int(lag) if isinstance(lag, (int, float)) and not isinstance(lag, bool) else None,
                  _partition_lag(values.get("partitions")), _latency(values.get(LATENCY_VALUE)))


def _latency(buckets: Any) -> tuple[list[int], float] | None:
    if not isinstance(buckets, dict) or not any(buckets.get(name) for name in BUCKET_FIELDS):
        return None
    return [int(buckets.get(name, 0)) for name in BUCKET_FIELDS], buckets.get(SUM_FIELD, 0) / 1000


def _partition_lag(rows: Any) -> dict[tuple[str, str], int]:
    """The Kafka sinks' per-partition table (rows of topic, partition, lag, ...), as the metadata holds it."""
    rows = getattr(rows, "records", None) or []
    lags = {}
    for row in rows:
        data = getattr(row, "data", row)
        if isinstance(data, dict) and {"topic", "partition", "lag"} <= data.keys():
            lags[(str(data["topic"]), str(data["partition"]))] = int(data["lag"])
    return lags
