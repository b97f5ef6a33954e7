"""A bridge's settings beside its connector's keys: batch, sensor, continuous and checks, and the group and host
names. Dagster-free, and free of any one connector. The `Bridge` that pairs them with its plugin and validated
config is the plugin interface's (connectors/plugin.py); the loader (connectors/bridges_file.py) builds it."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_GROUP = "bridges"
# The host of the always-on bridges that name none (their one run is `host_default_job`).
DEFAULT_HOST = "default"
MOST_STREAM_TASKS = 64


class BatchSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    # Upper bound on records one run moves, over all partitions; the rest waits for the next run.
    max_records: int = Field(100_000, ge=1)
    # Where a bridge starts when no run has recorded offsets yet: the Kafka Connect consumer
    # group's committed offsets (group `connect-<name>`) if it has any, else earliest.
    initial_offsets: Literal["committed", "earliest", "latest"] = "committed"
    # Spark tasks that pull in parallel (source connectors; sinks use one task per Kafka partition).
    parallelism: int = Field(2, ge=1, le=64)
    # Kafka, Pub/Sub, Lite or S3 silent this long fails the run with one line naming it.
    outage_timeout_seconds: int = Field(30, ge=5, le=3600)
    # Cloud Pub/Sub source: a micro-batch stops pulling after this long, even while messages keep coming
    # (default: only at max_records or an empty pull). Continuous mode sets it to the commit interval.
    max_seconds: float | None = Field(None, gt=0, le=86_400)
    # A Kafka sink's batch commits what the target acknowledged to the bridge's Kafka group this often as it goes:
    # a run killed mid-batch is followed by one that starts there (continuous mode sets it to the commit interval).
    progress_interval_ms: int = Field(5_000, ge=100, le=3_600_000)
    # Kafka sinks, as Spark's Kafka option minPartitions: split the batch's offset ranges until there are at least
    # this many Spark tasks, so a topic with fewer partitions than cores keeps every core busy. A partition's
    # records are then delivered by several tasks at once, out of order: only for a connector that says its
    # delivery does not keep a partition's order (the plugin's `partition_order`). Unset: one task per partition.
    min_partitions: int | None = Field(None, ge=1, le=1024)


class SensorSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    enabled: bool = True
    interval_seconds: int = Field(30, ge=1, le=86_400)


class ContinuousSettings(BaseModel):
    """How a bridge in `mode: continuous` loops: one long-lived run moving micro-batches back to back."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    # With nothing to move, look again after this long (a batch that moved records is followed at once).
    trigger_interval_ms: int = Field(200, ge=10, le=60_000)
    # Record the position (a materialization) at most this often, like Kafka Connect's offset flush.
    commit_interval_ms: int = Field(5_000, ge=100, le=3_600_000)
    # The run ends cleanly after this long and the sensor starts the next one (fresh logs, fresh clients).
    max_run_minutes: float = Field(60, gt=0, le=7 * 24 * 60)
    # The Spark tasks of an always-on bridge: a Kafka sink spreads its partitions over them, the Cloud Pub/Sub
    # source pulls in each (unary pulls; a streaming pull has cps.streamingPull.parallelStreams). Each holds a
    # Spark task slot and a Python worker for the run's length; one keeps up with thousands of records a second.
    # Unset, a bridge without a host takes its connector's `tasks.max` (Kafka Connect's key), else 1.
    stream_tasks: int = Field(1, ge=1, le=MOST_STREAM_TASKS)
    # Bridges naming the same host move in one long-lived Dagster run, each in a thread of its own, as Kafka
    # Connect's worker runs many connectors in one JVM; each keeps its own asset, position, checks and lease,
    # and its sensor switches it on and off in that run. Unset: the host `default` (DEFAULT_HOST), shared by every
    # continuous bridge that names none; null: a run of its own.
    host: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=64)


class CheckSettings(BaseModel):
    """Bounds of the bridge's asset checks (see bridge_assets/checks.py)."""
    model_config = ConfigDict(extra="forbid", frozen=True)
    # Records (Kafka sinks) or messages (Lite source) not moved yet that still count as healthy;
    # default: one batch's worth (batch.max_records).
    max_lag: int | None = Field(None, ge=0)
    # Records waiting and no successful batch for this long: the bridge is stale.
    max_age_minutes: float = Field(10, gt=0, le=7 * 24 * 60)
