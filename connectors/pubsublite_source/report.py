"""What the Lite source moved, as the bridge's metadata: one shape for a micro-batch and a stream's progress read
(both give a LiteSourceBatchResult)."""

from __future__ import annotations

from connectors.plugin import BatchReport


def cursors_to_json(cursors: dict[int, int]) -> dict[str, int]:
    return {str(p): o for p, o in sorted(cursors.items())}


def lite_source_report(result) -> BatchReport:
    """What a batch (or a stream's progress read) moved, as the bridge's metadata."""
    written = result.messages - result.dropped - result.filtered
    values = {
        "messages_read": result.messages,
        "messages_written": written,
        "messages_dropped": result.dropped,
        "messages_filtered": result.filtered,
        "bytes_written": result.bytes,
        "duration_seconds": round(result.duration_s, 3),
        "records_per_second": round(result.records_per_second, 1),
        "backlog_remaining": result.backlog_after,
        "head_cursors": cursors_to_json(result.head_cursors),
    }
    if result.lost_to_retention:
        values["messages_lost_to_retention"] = {str(p): n for p, n in result.lost_to_retention.items()}
    if result.resumed_from_transactions:
        values["resumed_from_transactions"] = cursors_to_json(result.resumed_from_transactions)
    warnings = ()
    if result.dropped:
        warnings = (f"{result.dropped} messages were refused by Kafka for good and skipped (errors.tolerance=all); "
                    "the task's log names them",)
    line = f"{written} messages moved to Kafka in {result.duration_s:.1f}s; {result.backlog_after} left for the next batch"
    return BatchReport(written, {**result.start_cursors, **result.next_cursors}, values,
                       ("messages_read", "messages_written", "messages_dropped", "messages_filtered", "bytes_written"), line, warnings, result.duration_s)
