"""Executor side of an always-on Cloud Pub/Sub source: one long-lived Spark task per slot pulls (unary pulls of
cps.maxBatchSize, or one streaming pull), writes each round to Kafka and acks what Kafka acknowledged, exactly as
a micro-batch's task does (write.py), until the run's lease tells it to stop (stream_lease.py). Its counts go to
the run through Kafka (stream_report.py), at most every `report_every_s` while messages keep coming and at once
when the subscription goes quiet; under exactly once, after each commit (exactly_once.stream_in_transactions).
"""

from __future__ import annotations

import queue
import time
from typing import Callable, Iterator

from connectors.cloud_pubsub_source.convert import CloudPubSubSourceConverter
from connectors.cloud_pubsub_source.exactly_once import ExactlyOnceTask, stream_in_transactions
from connectors.cloud_pubsub_source.write import (
    STREAM_PULL_HOLD_S, PulledDelivery, SourceClients, SourceTask, deliver_streamed, drain, pull_retry,
    received_messages, source_clients, streaming_pull,
)
from connectors.framework.stream_report import ReportingTaskSettings, ReportPoster

# With nothing arriving, the task looks at its lease again after this long (streaming pull).
_IDLE_WAIT_S = 0.1


def stream_pull_and_deliver(settings: ReportingTaskSettings, slot: int) -> str | None:
    """One slot of the stream (stream_slots.py): pulls, writes to Kafka, acks and reports until its lease ends it.
    Under exactly once (`settings.task` an ExactlyOnceTask) its records commit in transactions first. Returns why
    its lease ended it (None: its deadline)."""
    task = settings.task
    client_config = (task.source if isinstance(task, ExactlyOnceTask) else task).kafka_client_config
    lease = settings.lease_watcher(client_config)
    poster = ReportPoster(client_config, settings.consumer_group, slot, settings.where, settings.stream_id)

    def keep_going() -> bool:
        return lease.holds() and time.time() < settings.deadline

    try:
        if isinstance(task, ExactlyOnceTask):
            reported: dict = {}

            def report(delivery) -> None:
                nonlocal reported
                counts = _counts(delivery)
                if counts != reported and poster.post(counts):
                    reported = counts

            last = poster.last()
            stream_in_transactions(task, slot, keep_going, lambda delivery: _resume(delivery, last), report)
        else:
            _stream_at_least_once(task, slot, keep_going, poster, settings.report_every_s)
    finally:
        lease.close()
        poster.close()
    return lease.why_not


def _stream_at_least_once(task: SourceTask, slot: int, keep_going: Callable[[], bool], poster: ReportPoster,
                          report_every_s: float) -> None:
    config = task.config
    with source_clients(task) as clients:
        _resume(clients.delivery, poster.last())
        converter = CloudPubSubSourceConverter(config, partitioner_start=slot, topic_codec=clients.topic_codec)
        rounds = _streamed_rounds if config.streaming_pull_enabled else _pulled_rounds
        reported, posted_at = _counts(clients.delivery), time.monotonic()
        for moved in rounds(task, clients, converter, keep_going):
            counts = _counts(clients.delivery)
            if counts != reported and (not moved or time.monotonic() - posted_at >= report_every_s):
                if poster.post(counts):
                    reported, posted_at = counts, time.monotonic()
    counts = _counts(clients.delivery)  # after the last flush
    if counts != reported:
        poster.post(counts)


def _counts(delivery) -> dict:
    return {**delivery.totals, "partitions": {str(p): list(nb) for p, nb in sorted(delivery.written.items())}}


def _resume(delivery, last: dict | None) -> None:
    """A task Spark runs again (a failed task, a lost executor) carries on with the counts its stream reported."""
    if not last:
        return
    for name in delivery.totals:
        delivery.totals[name] = int(last.get(name, 0))
    for partition, (written, size) in last.get("partitions", {}).items():
        delivery.written[int(partition)] = [written, size]


def _pulled_rounds(task: SourceTask, clients: SourceClients, converter,
                   keep_going: Callable[[], bool]) -> Iterator[int]:
    """Unary pulls of cps.maxBatchSize, the next one out while Kafka takes the last (write.PulledDelivery); yields
    what each moved (0: none came). What Kafka took is acked before the generator ends."""
    from google.api_core.exceptions import DeadlineExceeded

    with PulledDelivery(clients.subscriber, clients.path, clients.delivery) as pulls:
        while keep_going():
            try:
                response = clients.subscriber.pull(
                    subscription=clients.path, max_messages=task.config.cps_max_batch_size, timeout=STREAM_PULL_HOLD_S,
                    retry=pull_retry(task.outage_timeout_s))
            except DeadlineExceeded:  # held the whole time with nothing to give
                pulls.settle()
                yield 0
                continue
            received = received_messages(response)
            if received:
                pulls.deliver(converter, received)
            else:
                pulls.settle()
            yield len(received)


def _streamed_rounds(task: SourceTask, clients: SourceClients, converter,
                     keep_going: Callable[[], bool]) -> Iterator[int]:
    """One streaming pull; what it brought, up to cps.maxBatchSize, is a round; yields each round's size."""
    config = task.config
    arrived: queue.Queue = queue.Queue()
    with streaming_pull(clients.subscriber, clients.path, config, config.streaming_pull_flow_control_messages, arrived):
        while keep_going():
            try:
                first = arrived.get(timeout=_IDLE_WAIT_S)
            except queue.Empty:
                yield 0
                continue
            batch = drain(arrived, first, config.cps_max_batch_size)
            deliver_streamed(converter, clients.delivery, batch)
            yield len(batch)
