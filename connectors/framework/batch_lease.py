"""A micro-batch's lease (stream_lease.py's, held for one batch): the run beats it while the batch's Spark job runs,
and each task looks at it as it goes and stops once it lapses or names another run. A killed run's batch then stops
within about a second on either engine; without it a Spark Connect server went on with a dead client's job until the
run's watchdog interrupted it, seconds later.

The lease sits in the lease group of the bridge's consumer group, at the partition its always-on stream uses too, so
whichever of a batch and a stream started last fences the other's tasks.
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass
from typing import Callable, Iterator

from confluent_kafka import TopicPartition

from connectors.errors import BatchError, DeliveryAbandoned
from connectors.framework.run_liveness import RunLiveness, link_to
from connectors.framework.stream_lease import LeaseHolder, LeaseWatcher

# How long after Kafka answers again a batch's task waits for the run's beat before it counts the lapse: its reads
# and writes wait for Kafka too, and the run's beats come back a moment after them.
_OUTAGE_GRACE_S = 5.0


@dataclass(frozen=True)
class BatchLease:
    """Where a batch's run beats its lease (the lease group of `group`, at `where`), the batch's id, and the
    address the run's process listens on while the batch runs (run_liveness.py)."""

    group: str
    where: tuple[str, int]
    batch_id: str
    run_address: tuple[str, int] | None = None

    def watcher(self, client_config: dict) -> LeaseWatcher:
        """A task's look at the lease; Kafka away does not count toward the lapse (`_OUTAGE_GRACE_S`); the run's
        connection closing counts at once."""
        return LeaseWatcher(client_config, self.group, TopicPartition(*self.where), self.batch_id,
                            outage_grace_s=_OUTAGE_GRACE_S, link=link_to(self.run_address, self.batch_id))


class LeaseLapsed(BatchError):
    """A batch's task stopped because its run no longer holds the batch's lease (killed, or another run took the
    bridge); what it delivered is acknowledged (and, where the batch keeps progress, committed)."""


@contextlib.contextmanager
def held_batch_lease(client_config: dict, consumer_group: str, where: tuple[str, int]) -> Iterator[BatchLease]:
    """The run's side, around the batch's Spark job: beats until the block ends, then tells the tasks left (after a
    failure or an interrupt) to stop at once rather than at the lapse; with Kafka away they stop at the lapse."""
    batch_id = uuid.uuid4().hex[:16]
    liveness = RunLiveness.or_none(batch_id.encode())
    lease = BatchLease(consumer_group, where, batch_id, liveness.address if liveness else None)
    try:
        holder = LeaseHolder(client_config, lease.group, TopicPartition(*where), lease.batch_id)
        try:
            yield lease
        finally:
            holder.stop()
    finally:
        if liveness is not None:
            liveness.close()


@contextlib.contextmanager
def watching(lease: BatchLease | None, client_config: dict, what: str) -> Iterator[Callable[[], bool]]:
    """A task's side, for a task that asks before each step (a pull, a read): whether it may take another, True while
    its run holds `lease` (always, without one). A block left after the lease lapsed fails the task with LeaseLapsed
    naming `what` and why, once what it took was delivered (the block's body settles it), or the delivery dropped
    what it had not sent (DeliveryAbandoned, told by the same lease): a run still there then records nothing of the
    batch."""
    if lease is None:
        yield lambda: True
        return
    watcher = lease.watcher(client_config)
    try:
        yield watcher.holds
    except DeliveryAbandoned:
        if watcher.why_not is None:
            raise
    finally:
        watcher.close()
    if watcher.why_not is not None:
        raise LeaseLapsed(f"{what} stopped: {watcher.why_not}")
