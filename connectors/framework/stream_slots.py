"""Executor side of the always-on streams' Spark jobs: a stream's work is one function per slot (`SlotWork`, run
until its lease ends it), run either in a job of its own (one task per slot, `run_slots`) or beside the slots of
other bridges of the same run in a shared job (`run_shared`: each task runs its slots in threads).

Why share: a long-running Spark task holds a Python worker (about 190 MB) and a task slot for its whole life, so
thirty always-on bridges with a task each cost thirty workers; a host's bridges share a few. A slot that fails in a
shared task must not take its neighbours down: its thread posts the failure to the bridge's failure group in Kafka
(`post_slot_end`), where the bridge's driver finds it, and the other slots go on. A slot that ends says so the
same way: the driver knows when a bridge's part of a shared job is over.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator

import pyarrow as pa
from confluent_kafka import KafkaException, TopicPartition

from connectors.errors import RecordRefused, is_record_refused, root_cause
from connectors.kafka.connection import group_committer

# A slot's work runs until its lease ends it, and returns why (the lease's one line; None: its deadline passed).
SlotWork = Callable[[int], "str | None"]
# A job of its own yields why each slot ended (collected by the run); a shared job's slots post it instead.
ENDED_SCHEMA = "why string"
# Kafka keeps at most offset.metadata.max.bytes (4096 by default) of a commit's metadata.
_MAX_ERROR_CHARS = 3000
# How long the driver waits for a read of its slots' ends (Kafka away: none seen, read again at the next look).
_READ_TIMEOUT_S = 5.0


def run_slots(work: SlotWork, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The body of a stream's own job (mapInArrow over slot numbers): a slot's failure fails its task."""
    for batch in batches:
        for slot in batch.column(0).to_pylist():
            yield pa.RecordBatch.from_pydict({"why": pa.array([work(slot)], pa.string())})


@dataclass(frozen=True)
class SharedSlot:
    """One slot of one bridge's stream in a shared job, with where its failure is posted."""

    stream_id: str
    work: SlotWork
    slot: int
    client_config: dict
    group: str  # the bridge's consumer group
    where: tuple[str, int]  # the bridge's lease partition


def run_shared(tasks: list[list[SharedSlot]], batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """The body of a shared job (mapInArrow over task numbers): task i runs `tasks[i]`, each slot in a thread; a
    slot that fails is posted and ends alone. The task ends when all its slots have."""
    for batch in batches:
        for task in batch.column(0).to_pylist():
            threads = [threading.Thread(target=_run_posting_failure, args=(unit,), daemon=True,
                                        name=f"stream {unit.stream_id} slot {unit.slot}") for unit in tasks[task]]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    yield from ()



def _run_posting_failure(unit: SharedSlot) -> None:
    error, refused, why = None, False, None
    try:
        why = unit.work(unit.slot)
    except BaseException as exc:  # noqa: BLE001 - the bridge's driver raises it; the neighbours go on
        system, cause = root_cause(exc)
        error, refused = (f"{system}: {cause}" if system else cause), is_record_refused(exc)
    post_slot_end(unit.client_config, unit.group, unit.where, unit.stream_id, unit.slot, error, refused, why)


def _slot_group(consumer_group: str, slot: int) -> str:
    return f"{consumer_group}-stream-slot-{slot}"


def post_slot_end(client_config: dict, group: str, where: tuple[str, int], stream_id: str, slot: int,
                  error: str | None, refused: bool = False, why: str | None = None) -> None:
    """A slot of a shared job ended (its lease ended it, saying `why`, or `error`; `refused`: the error is a poison
    record's, see RecordRefused): said in the slot's own group of the bridge, at its lease partition, so that neither
    a neighbour's post nor the lease's beat overwrites it."""
    consumer = group_committer(client_config, _slot_group(group, slot))
    try:
        metadata = json.dumps({"stream": stream_id, "error": error[:_MAX_ERROR_CHARS] if error else None,
                               "refused": refused, "why": why[:_MAX_ERROR_CHARS] if why else None})
        # The offset only has to move: milliseconds since the epoch.
        consumer.commit(offsets=[TopicPartition(*where, int(time.time() * 1000), metadata=metadata)],
                        asynchronous=False)
    finally:
        consumer.close()


class SlotFailed(RuntimeError):
    """A slot of a bridge's stream failed in a shared job (its neighbours went on)."""


class SlotRefused(SlotFailed, RecordRefused):
    """A slot of a bridge's stream met a poison record in a shared job: started again, it fails on it again."""


class SlotEnds:
    """The driver's side: which slots of stream `stream_id` have ended, and the error of any that failed. Read
    through a consumer of each slot's group that never subscribes. Not through the admin API's
    ListConsumerGroupOffsets, which reads any group with one client: in librdkafka 2.16 it aborts the process when
    a read timed out while the group's coordinator was away and the coordinator then comes back (the assertion
    `eonce->refcnt > 0`, confluentinc/librdkafka#4605; a clean-clone suite's host run died so in a broker restart),
    and it crashes while a restarted coordinator still loads (rd_kafka_cgrp_op, see kafka/admin.py's commits)."""

    def __init__(self, client_config: dict, group: str, where: tuple[str, int], slots: int):
        self._client_config = client_config
        self._groups = [_slot_group(group, slot) for slot in range(slots)]
        self._consumers = [group_committer(client_config, group) for group in self._groups]
        self._where = TopicPartition(*where)

    def read(self, stream_id: str) -> tuple[int, BaseException | None, str | None]:
        """(slots ended, the first failure, why the first slot that ended without one did) as Kafka holds them now;
        Kafka away for a moment: none seen."""
        ended, failure, why = 0, None, None
        for slot, consumer in enumerate(self._consumers):
            try:
                [tp] = consumer.committed([self._where], timeout=_READ_TIMEOUT_S)
                posted = json.loads(tp.metadata or "{}") if tp.error is None else {}
            except KafkaException:
                # A committer's reads can keep timing out after a broker restart although Kafka is back (see
                # kafka/admin.py's commits): the next look asks through a new one.
                self._consumers[slot] = group_committer(self._client_config, self._groups[slot])
                continue
            except ValueError:
                continue
            if posted.get("stream") == stream_id:
                ended += 1
                if failure is None and posted.get("error"):
                    failure = (SlotRefused if posted.get("refused") else SlotFailed)(posted["error"])
                why = why or posted.get("why")
        return ended, failure, why

    def close(self) -> None:
        for consumer in self._consumers:
            consumer.close()
