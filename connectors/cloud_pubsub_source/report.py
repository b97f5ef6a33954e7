"""What the Cloud Pub/Sub source moved, as the bridge's metadata: one shape for a micro-batch and a stream's
progress read (both give a SourceBatchResult)."""

from __future__ import annotations

from connectors.plugin import BatchReport


def source_report(result) -> BatchReport:
    """What a batch (or a stream's progress read) moved, as the bridge's metadata."""
    values = {
        "messages_pulled": result.pulled,
        "records_written": result.written,
        "messages_acked": result.acked,
        "messages_dropped": result.dropped,
        "messages_recognized": result.recognized,
        "bytes_written": result.bytes,
        "duration_seconds": round(result.duration_s, 3),
        "records_per_second": round(result.records_per_second, 1),
        "records_per_kafka_partition": dict(result.per_partition),
    }
    line = f"{result.pulled} messages pulled, {result.written} written, {result.acked} acked in {result.duration_s:.1f}s"
    if result.recognized:
        line += f" ({result.recognized} pulled again after their transaction committed: acked, not written again)"
    return BatchReport(result.written, None, values,
                       ("messages_pulled", "records_written", "messages_acked", "messages_dropped", "bytes_written"),
                       line, (), result.duration_s)
