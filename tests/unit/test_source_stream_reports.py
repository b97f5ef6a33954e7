"""An always-on Cloud Pub/Sub source's run reads its tasks' reports (Kafka group commits) and records only what
moved since its last look, ignoring an earlier run's reports."""

from connectors.cloud_pubsub_source.batch import SourceBatchResult
from connectors.cloud_pubsub_source.stream import CloudPubSubSourceStream
from connectors.framework.stream_report import TaskReport, report_group


class _Commits:
    """KafkaAdmin.commits over a dict of group -> report."""

    def __init__(self):
        self.reports: dict[str, TaskReport] = {}

    def commits(self, group, partitions):
        report = self.reports.get(group)
        return {("t", 0): (1, report.to_metadata())} if report else {}


def _stream(kafka: _Commits, slots: int = 2) -> CloudPubSubSourceStream:
    stream = object.__new__(CloudPubSubSourceStream)  # only the reading side, without a Spark job
    stream._kafka, stream._where, stream._slots, stream._seen = kafka, ("t", 0), slots, {}
    stream._restarts_without_progress = 2
    stream._bridge = type("B", (), {"consumer_group": "connect-b"})()
    stream.stream_id = "now"
    return stream


def _counts(pulled, acked, partitions):
    return {"pulled": pulled, "acked": acked, "dropped": 0, "partitions": partitions}


def test_each_read_adds_what_the_tasks_moved_since_the_last_read():
    kafka = _Commits()
    stream = _stream(kafka)
    kafka.reports[report_group("connect-b", 0)] = TaskReport("now", _counts(10, 10, {"0": [6, 60], "1": [4, 40]}))
    kafka.reports[report_group("connect-b", 1)] = TaskReport("earlier", _counts(99, 99, {"0": [99, 990]}))
    first = SourceBatchResult()
    stream._absorb_reports(first)
    assert (first.pulled, first.acked, first.written, first.bytes) == (10, 10, 10, 100)
    assert first.per_partition == {"0": 6, "1": 4}
    assert stream._restarts_without_progress == 0  # new counts are progress

    kafka.reports[report_group("connect-b", 0)] = TaskReport("now", _counts(15, 15, {"0": [6, 60], "1": [9, 90]}))
    kafka.reports[report_group("connect-b", 1)] = TaskReport("now", _counts(3, 3, {"2": [3, 30]}))
    second = SourceBatchResult()
    stream._absorb_reports(second)
    assert (second.pulled, second.acked, second.written, second.bytes) == (8, 8, 8, 80)
    assert second.per_partition == {"1": 5, "2": 3}

    third = SourceBatchResult()  # nothing new
    stream._restarts_without_progress = 1
    stream._absorb_reports(third)
    assert (third.pulled, third.written, third.per_partition) == (0, 0, {})
    assert stream._restarts_without_progress == 1


def test_a_task_report_round_trips_through_commit_metadata_and_others_are_not_reports():
    report = TaskReport("abc", _counts(5, 4, {"0": [4, 400]}))
    assert len(report.to_metadata()) < 200
    assert TaskReport.from_metadata(report.to_metadata()) == report
    assert TaskReport.from_metadata("") is None and TaskReport.from_metadata('{"x": 1}') is None


def test_a_lite_stream_read_moves_the_position_to_the_reported_cursors_and_adds_the_counts():
    from connectors.pubsublite_source.batch import LiteSourceBatchResult
    from connectors.pubsublite_source.stream import LiteSourceStream

    kafka = _Commits()
    stream = object.__new__(LiteSourceStream)
    stream._kafka, stream._where, stream._slots, stream._seen = kafka, ("t", 0), 1, {}
    stream._restarts_without_progress = 0
    stream._bridge = type("B", (), {"consumer_group": "connect-b"})()
    stream.stream_id, stream._position = "now", {0: 100, 1: 200}
    group = report_group("connect-b", 0)
    kafka.reports[group] = TaskReport("now", {"messages": 30, "bytes": 300, "dropped": 1,
                                              "lost": {"0": 2}, "cursors": {"0": 132, "1": 200}})
    first = LiteSourceBatchResult(start_cursors=dict(stream._position), head_cursors={})
    stream._absorb_reports(first)
    assert (first.messages, first.bytes, first.dropped, first.lost_to_retention) == (30, 300, 1, {0: 2})
    assert stream._position == {0: 132, 1: 200}

    kafka.reports[group] = TaskReport("now", {"messages": 40, "bytes": 400, "dropped": 1,
                                              "lost": {"0": 2}, "cursors": {"0": 132, "1": 210}})
    second = LiteSourceBatchResult(start_cursors=dict(stream._position), head_cursors={})
    stream._absorb_reports(second)
    assert (second.messages, second.bytes, second.dropped, second.lost_to_retention) == (10, 100, 0, {})
    assert stream._position == {0: 132, 1: 210}
