"""Every metric a bridge exposes, with what it means: the exporter builds them from this list, the docs page
lists it. Each carries the bridge, its connector and its group as labels (no topic, partition or record key:
their number is not bounded)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from connectors.plugin import COUNTED_METRICS

LABELS = ("bridge", "connector", "group")
# A batch's duration, from a fraction of a second on a warm engine to a large backlog's minutes.
DURATION_BUCKETS_S = (0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


@dataclass(frozen=True)
class MetricSpec:
    name: str  # as Prometheus shows it, counters with their `_total`
    kind: Literal["counter", "gauge", "histogram"]
    help: str
    labels: tuple[str, ...] = LABELS
    # A histogram whose batches report counts by bucket (not one value per record) is added bucket by bucket.
    by_buckets: bool = False

    @property
    def base_name(self) -> str:
        """The name prometheus_client is given (it adds a counter's `_total` itself)."""
        return self.name.removesuffix("_total") if self.kind == "counter" else self.name


_COUNTED_HELP = {
    "records_dead_lettered": "Records sent to the dead-letter topic (errors.tolerance=all with a dead-letter topic).",
    "records_dropped": "Records or messages dropped for an error without a dead-letter topic (errors.tolerance=all).",
    "records_skipped": "Records skipped rather than delivered (the archive's unreadable records; records a Kafka "
                       "sink skips: no data and no attributes).",
    "records_dead_letter_refused": "Records the dead-letter topic refused too, and that were skipped.",
    "bytes_read": "Bytes of record keys and values read from Kafka.",
    "bytes_written": "Bytes written to the target: a source's message data into Kafka, the archive's compressed files.",
}
assert set(_COUNTED_HELP) == set(COUNTED_METRICS), "every counted metric needs its help here"

METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("bridge_records_read_total", "counter", "Records (or messages) the bridge took from its source."),
    MetricSpec("bridge_records_delivered_total", "counter", "Records (or messages) the target acknowledged."),
    *(MetricSpec(f"bridge_{name}_total", "counter", help_text) for name, help_text in _COUNTED_HELP.items()),
    MetricSpec("bridge_batches_total", "counter",
               "Positions recorded: one per micro-batch, or per commit of a continuous run."),
    MetricSpec("bridge_runs_failed_total", "counter",
               "Batches, continuous runs or a host's members that failed (each turns batch_succeeded red)."),
    MetricSpec("bridge_batch_duration_seconds", "histogram",
               "How long a micro-batch took, or how long a continuous run's commit window was."),
    MetricSpec("bridge_delivery_latency_seconds", "histogram",
               "Send to arrival: from a record's Kafka timestamp to the target's acknowledgement (the Kafka sinks; in a "
               "micro-batch, to the end of its task's delivery).", by_buckets=True),
    MetricSpec("bridge_lag_records", "gauge",
               "Records or messages not moved yet, as of the latest batch, commit or sensor reading (bridges whose "
               "connector sees it; not the Cloud Pub/Sub source)."),
    MetricSpec("bridge_lag_max_records", "gauge", "The lag the lag_within_bound check allows (checks.max_lag)."),
    MetricSpec("bridge_position_age_seconds", "gauge",
               "Seconds since the bridge last recorded its position (its latest materialization)."),
    MetricSpec("bridge_stale_after_seconds", "gauge",
               "With records waiting, the age the fresh check allows (checks.max_age_minutes)."),
    MetricSpec("bridge_partition_lag_records", "gauge",
               "Records not moved yet per Kafka partition, as of the latest batch or commit (the Kafka sinks and the "
               "archive; only with --partition-lag: a label per partition).", (*LABELS, "topic", "partition")),
    MetricSpec("bridge_up", "gauge",
               "1 while the bridge moves without failing, 0 from a failure until it delivers again (or has nothing "
               "left to move): its batch_succeeded check, as Dagster's asset health and `bridgectl bridges status` "
               "show it."),
    MetricSpec("bridge_check_passed", "gauge",
               "1 when the bridge's asset check passed its latest evaluation, 0 when it failed.", (*LABELS, "check")),
)
