"""What an always-on bridge's tasks tell its run when they have no Kafka position of their own to commit (the
sources: the position lives in Pub/Sub): each task commits its counts, as JSON metadata, to a group of its own
(`<consumer group>-stream-report-<slot>`) at a partition of the bridge's Kafka topic, and the run reads them back
at each commit interval. A sink's tasks carry their counts on their position commits instead (stream_task.py).

Kafka is the channel because it is what both ends reach wherever Spark runs the tasks; a group commit is one
small request, and costs no topic of ours.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterator

from confluent_kafka import KafkaException, TopicPartition

from connectors.kafka.connection import group_committer
from connectors.framework.run_liveness import link_to
from connectors.framework.stream_lease import HostBeatRef, LeaseWatcher
from connectors.framework.stream_task import StreamCommitRefused, commit_may_retry


@dataclass(frozen=True)
class ReportingTaskSettings:
    """A reporting stream's task: the connector's own task settings, and where its lease and reports live."""

    task: Any  # the connector's task settings (config, connections), as its micro-batch's tasks have them
    consumer_group: str  # the bridge's: its lease's and reports' groups are named after it
    stream_id: str
    where: tuple[str, int]  # the Kafka partition the lease and the reports are committed at
    report_every_s: float
    deadline: float  # time.time() at which the task ends on its own
    host_lease: HostBeatRef | None = None  # in a host's run: its beat, which keeps the lease (stream_lease.py)
    run_address: tuple[str, int] | None = None  # where the run listens for its tasks' links (run_liveness.py)

    def lease_watcher(self, client_config: dict) -> LeaseWatcher:
        """A task's look at its stream's lease, linked to its run."""
        return LeaseWatcher(client_config, self.consumer_group, TopicPartition(*self.where), self.stream_id,
                            self.host_lease, link=link_to(self.run_address, self.stream_id))


def report_group(consumer_group: str, slot: int) -> str:
    return f"{consumer_group}-stream-report-{slot}"


@dataclass(frozen=True)
class TaskReport:
    stream_id: str
    counts: dict[str, Any]  # JSON values: what the task moved since its stream began

    def to_metadata(self) -> str:
        return json.dumps({"stream": self.stream_id, "counts": self.counts}, separators=(",", ":"))

    @staticmethod
    def from_metadata(text: str | None) -> TaskReport | None:
        try:
            value = json.loads(text or "")
            return TaskReport(value["stream"], dict(value["counts"]))
        except (ValueError, KeyError, TypeError):
            return None


class ReportPoster:
    """A task's side: `post(counts)` commits them; `last()` is this stream's last report (a task run again)."""

    def __init__(self, client_config: dict, consumer_group: str, slot: int, where: tuple[str, int], stream_id: str):
        self._consumer = group_committer(client_config, report_group(consumer_group, slot))
        self._consumer_group = report_group(consumer_group, slot)
        self._where = where
        self._stream_id = stream_id
        self._posts = 0

    def last(self) -> dict[str, Any] | None:
        [tp] = self._consumer.committed([TopicPartition(*self._where)], timeout=30)
        report = TaskReport.from_metadata(tp.metadata)
        if report is None or report.stream_id != self._stream_id:
            return None
        self._posts = max(tp.offset, 0)
        return report.counts

    def post(self, counts: dict[str, Any]) -> bool:
        """Commits the counts; False if Kafka did not take them now (the next post carries them)."""
        self._posts += 1
        try:
            self._consumer.commit(offsets=[TopicPartition(*self._where, self._posts,
                                                          metadata=TaskReport(self._stream_id, counts).to_metadata())],
                                  asynchronous=False)
        except KafkaException as exc:
            if commit_may_retry(exc.args[0]):
                return False
            raise StreamCommitRefused(f"Kafka refused the report of group {self._consumer_group}: "
                                      f"{exc.args[0].str()}") from None
        return True

    def close(self) -> None:
        self._consumer.close()


def new_reports(kafka, consumer_group: str, slots: int, where: tuple[str, int], stream_id: str,
                seen: dict[int, dict]) -> Iterator[tuple[dict, dict]]:
    """The run's side: each of the stream's `slots` tasks whose report changed since `seen` (which this updates),
    as (counts before, counts now). Reports of other streams (an earlier run's) are left out."""
    for slot in range(slots):
        commit = kafka.commits(report_group(consumer_group, slot), {where[0]: [where[1]]})
        report = TaskReport.from_metadata(commit[where][1]) if commit else None
        if report is None or report.stream_id != stream_id or report.counts == seen.get(slot):
            continue
        before, seen[slot] = seen.get(slot, {}), report.counts
        yield before, report.counts
