"""The lease between an always-on Kafka sink's run and its Spark tasks, kept in Kafka: the run commits a beat
(an increasing number, with the stream's id as metadata) to a group of the bridge's own every `BEAT_S`; each task
reads it back and stops, after committing what it delivered, once the beat names another stream (a newer run's,
or the run's own "stop") or has not moved for `LAPSE_S` (the run is gone: killed, or its host lost).

Why not Spark's own cancellation: a Spark Connect server keeps executing an operation whose client died, and a
Python task is killed only after Spark's monitor notices (it looks every 2 s, then waits
spark.python.task.killTimeout): a killed run's stream went on publishing for seconds. Through the lease it stops
within `LAPSE_S`, and a terminated run's tasks end cleanly instead of being killed mid-round.
"""

from __future__ import annotations

import threading
import time

from confluent_kafka import KafkaException, TopicPartition

from connectors.kafka.connection import group_committer

BEAT_S = 0.2
LAPSE_S = 1.0
STOP_PREFIX = "stop:"


def lease_group(consumer_group: str) -> str:
    return f"{consumer_group}-stream-lease"


class LeaseHolder:
    """The run's side: beats until `stop()` (which beats "stop" once) or `close()`."""

    def __init__(self, client_config: dict, group: str, partition: TopicPartition, stream_id: str):
        self._consumer = group_committer(client_config, lease_group(group))
        self._where = (partition.topic, partition.partition)
        self._stream_id = stream_id
        self._beat = 0
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self.beat()  # the tasks find their stream's id from the first moment
        self._thread = threading.Thread(target=self._run, name=f"stream lease {stream_id}", daemon=True)
        self._thread.start()

    def beat(self, metadata: str | None = None) -> None:
        with self._lock:
            if self._closed.is_set():
                return
            self._beat += 1
            self._consumer.commit(offsets=[TopicPartition(*self._where, self._beat, metadata=metadata or self._stream_id)],
                                  asynchronous=False)

    def _run(self) -> None:
        while not self._closed.wait(BEAT_S):
            try:
                self.beat()
            except KafkaException:  # Kafka away for a moment: the tasks wait LAPSE_S before they give up
                pass

    def stop(self) -> None:
        """Tells the tasks to finish the round they have, commit it, and end."""
        try:
            self.beat(STOP_PREFIX + self._stream_id)
        finally:
            self.close()

    def close(self) -> None:
        with self._lock:
            if self._closed.is_set():
                return
            self._closed.set()
            self._consumer.close()


class LeaseWatcher:
    """A task's side: `holds()` is False once the task must stop."""

    def __init__(self, client_config: dict, group: str, partition: TopicPartition, stream_id: str):
        self._consumer = group_committer(client_config, lease_group(group))
        self._where = TopicPartition(partition.topic, partition.partition)
        self._stream_id = stream_id
        self._seen: tuple[int, str] | None = None
        self._seen_at = self._looked_at = time.monotonic()
        self.why_not: str | None = None

    def holds(self) -> bool:
        now = time.monotonic()
        if self.why_not or now - self._looked_at < BEAT_S:
            return self.why_not is None
        self._looked_at = now
        try:
            [tp] = self._consumer.committed([self._where], timeout=LAPSE_S)
            beat = (tp.offset, tp.metadata or "")
        except KafkaException:
            beat = self._seen  # Kafka away for a moment: only the lapse counts
        if beat != self._seen:
            self._seen, self._seen_at = beat, now
        if beat is not None and beat[1] != self._stream_id:
            self.why_not = "the run stopped it" if beat[1] == STOP_PREFIX + self._stream_id else "a newer run took over"
        elif now - self._seen_at > LAPSE_S:
            self.why_not = f"the run has not renewed its lease for {now - self._seen_at:.1f} s"
        return self.why_not is None

    def close(self) -> None:
        self._consumer.close()
