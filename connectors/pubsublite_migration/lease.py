"""One migration writing a Kafka topic at a time. Two at once would both read the same last `lite.offset` and copy
the same messages twice, so the copy and the groups' commits run under a lease kept in Kafka: a group of the topic's
own (`bridgectl-lite-migrate.<topic>`) holds, at the topic's partition 0, a beat every `BEAT_S` whose metadata
names the migration and the time. A second migration waits while another one's beat is younger than `LAPSE_S` (a
killed migration's lease lapses by itself) and is refused when the other is still beating after that. Two starting at the same instant both write their claim,
and the one whose claim is not the last written backs off."""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid

from confluent_kafka import KafkaException, TopicPartition

from connectors.errors import BatchError
from connectors.kafka.connection import group_committer

BEAT_S = 1.0
LAPSE_S = 10.0


class MigrationRunning(BatchError):
    """Another migration is writing the Kafka topic now."""


def lease_group(kafka_topic: str) -> str:
    return f"bridgectl-lite-migrate.{kafka_topic}"


class CopyLease:
    def __init__(self, client_config: dict, kafka_topic: str):
        self.topic = kafka_topic
        self._id = uuid.uuid4().hex[:12]
        self._where = TopicPartition(kafka_topic, 0)
        self._consumer = group_committer(client_config, lease_group(kafka_topic))
        self._beats = 0
        self._beaten_at = 0.0  # monotonic time of the last beat Kafka took
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "CopyLease":
        self._wait_for_lapse()
        self._beat()
        time.sleep(BEAT_S)  # a claim written at the same instant as ours is seen now
        self._refuse_if_held()
        self._thread = threading.Thread(target=self._beat_until_closed, name="lite migration lease", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._closed.set()
        try:
            if self._thread is not None:
                self._thread.join()
                with contextlib.suppress(KafkaException):  # Kafka away: the lease lapses by itself instead
                    self._beat(at=0)  # released: the next migration need not wait for the lapse
        finally:
            self._consumer.close()

    def _wait_for_lapse(self) -> None:
        """A killed migration's lease lapses within LAPSE_S: a run started right after the kill waits for it; a lease
        still beating after that is a migration at work, and this one is refused."""
        deadline = time.monotonic() + LAPSE_S + BEAT_S
        while True:
            try:
                self._refuse_if_held()
                return
            except MigrationRunning:
                if time.monotonic() > deadline:
                    raise
                time.sleep(BEAT_S)

    def _refuse_if_held(self) -> None:
        [committed] = self._consumer.committed([self._where], timeout=15)
        if committed.offset < 0 or not committed.metadata:
            return
        holder = json.loads(committed.metadata)
        age = time.time() - holder["at"]
        if holder["id"] != self._id and age < LAPSE_S:
            raise MigrationRunning(f"another migration is writing Kafka topic {self.topic} (its lease in group "
                                   f"{lease_group(self.topic)} beat {age:.1f} s ago); run this one when it has ended")

    def check(self) -> None:
        """Raises when no beat was taken for LAPSE_S (Kafka unreachable): another migration may have found the
        lease lapsed and begun."""
        silent_s = time.monotonic() - self._beaten_at
        if silent_s >= LAPSE_S:
            raise MigrationRunning(f"the lease on Kafka topic {self.topic} (group {lease_group(self.topic)}) took no "
                                   f"beat for {silent_s:.0f} s, so another migration may have begun; run this one again")

    def _beat(self, at: float | None = None) -> None:
        self._beats += 1
        claim = json.dumps({"id": self._id, "at": time.time() if at is None else at})
        self._consumer.commit(offsets=[TopicPartition(self.topic, 0, self._beats, metadata=claim)], asynchronous=False)
        self._beaten_at = time.monotonic()

    def _beat_until_closed(self) -> None:
        while not self._closed.wait(BEAT_S):
            try:
                self._beat()
            except KafkaException:  # a broker restarting, the coordinator moving: the next beat tries again
                pass
