"""Executor side of the source: pull, write to Kafka, and ack each message only after Kafka
acknowledged its record. A crash in between means redelivery (duplicates possible), never loss.

With unary pulls the next pull goes out while Kafka acknowledges the last one's records, and the acks leave on a
thread of their own as Kafka's acknowledgements come in (at most 10,000 messages wait on Kafka at once); while Kafka
is slow the ack deadline of what is in flight is extended. A micro-batch task's producer is kept for the Python
worker's next task: a new idempotent producer waits about 0.5 s for its producer id before its first record is
acknowledged (the Lite source and the Kafka sink keep theirs the same way). Acknowledge and ModifyAckDeadline requests
are split to stay under the service's 512 KiB request limit."""

from __future__ import annotations

import collections
import contextlib
import logging
import queue
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Iterator

import pyarrow as pa

from connectors.arrow_rows import rows_batch
from connectors.cloud_pubsub.clients import PubSubConnection
from connectors.cloud_pubsub_source.config import CloudPubSubSourceConfig
from connectors.cloud_pubsub_source.convert import CloudPubSubSourceConverter, MessageError, PubSubMessageIn
from connectors.errors import BatchError
from connectors.framework.batch_lease import BatchLease, watching
from connectors.kafka.connection import kept_client, refused_for_good, source_producer_config
from connectors.outage import google_unanswered, outages_named

log = logging.getLogger(__name__)

# recognized: messages pulled again whose records a transaction had committed, acked without writing them again
# (exactly.once.support=required; exactly_once.py)
SUMMARY_SCHEMA = ("kafka_partition int, written long, bytes long, pulled long, acked long, dropped long, "
                  "recognized long")
# Acknowledge and ModifyAckDeadline requests must stay under 524,288 bytes; keep a margin for the
# subscription name and the protobuf framing of each id.
MAX_ACK_REQUEST_BYTES = 500_000
ACK_DEADLINE_EXTENSION_S = 60
PULL_TIMEOUT_S = 10
# An always-on task's empty unary pull is held by Pub/Sub until a message comes or this passes (the emulator answers
# after 0.5 s): under the lease's lapse, so that a task whose run is gone stops in time.
STREAM_PULL_HOLD_S = 0.8
STREAM_IDLE_S = 2.0  # a stream quiet this long ends the micro-batch
ACK_FLUSH_S = 0.5
# Pulled messages whose records Kafka has not acknowledged yet, at most: past it the task waits before pulling
# again (ten pulls of the reference's largest cps.maxBatchSize).
MAX_IN_FLIGHT = 10_000
EXTEND_EVERY_S = 5.0  # while waiting on Kafka that long, push back the ack deadline of what is in flight


@dataclass(frozen=True)
class SourceTask:
    config: CloudPubSubSourceConfig
    connection: PubSubConnection
    kafka_client_config: dict[str, str]
    quota: int  # messages one task pulls at most
    outage_timeout_s: float = 30
    max_seconds: float | None = None  # pulls no longer than this (continuous mode: a commit interval)
    lease: BatchLease | None = None  # a micro-batch's: its tasks pull while the run holds it

    def has_time(self, started: float) -> bool:
        return self.max_seconds is None or time.monotonic() - started < self.max_seconds


def ack_id_chunks(ack_ids: list[str], limit: int = MAX_ACK_REQUEST_BYTES) -> Iterator[list[str]]:
    """Split ack ids into requests under the service's size limit (the reference sends one request)."""
    chunk, size = [], 0
    for ack_id in ack_ids:
        cost = len(ack_id.encode()) + 4  # field tag and length prefix
        if chunk and size + cost > limit:
            yield chunk
            chunk, size = [], 0
        chunk.append(ack_id)
        size += cost
    if chunk:
        yield chunk


def received_messages(response) -> list:
    """A pull's messages as raw protobuf: each field read through proto-plus's wrappers cost more than the rest
    of a message's way to Kafka (a third of a pull task's CPU, bench.profile_source)."""
    return list(type(response).pb(response).received_messages)


def pb_message_in(message) -> PubSubMessageIn:
    """A raw protobuf PubsubMessage."""
    return PubSubMessageIn(
        data=message.data, attributes=dict(message.attributes), ordering_key=message.ordering_key,
        publish_time_ms=message.publish_time.ToMilliseconds(),
    )


def streamed_message_in(message) -> PubSubMessageIn:
    return PubSubMessageIn(
        data=bytes(message.data), attributes=dict(message.attributes), ordering_key=message.ordering_key or "",
        publish_time_ms=int(message.publish_time.timestamp() * 1000),
    )


@dataclass
class SourceClients:
    """What a pull task holds: the subscriber, the subscription's path, the Kafka producer behind `delivery`, and
    the topic's schema codec (messageFormat topic-schema)."""

    subscriber: object
    path: str
    delivery: "_Delivery"
    topic_codec: object | None


@contextlib.contextmanager
def pubsub_clients(task: SourceTask) -> Iterator[tuple[object, str, object | None]]:
    """(subscriber, subscription path, topic codec) of a pull task, inside Pub/Sub's outage naming; closed at the
    end. The codec is the topic's schema's under messageFormat topic-schema, else None."""
    cfg = task.config
    subscriber = task.connection.subscriber()
    path = subscriber.subscription_path(cfg.cps_project, cfg.cps_subscription)
    channel = None
    try:
        with outages_named("Pub/Sub", task.connection.address, f"pulling from {path}", google_unanswered()):
            topic_codec = None
            if cfg.message_format == "topic-schema":
                from connectors.cloud_pubsub.topic_schema import TopicCodec, lookup_topic_schema  # only here

                channel = task.connection.publish_channel()
                topic = subscriber.get_subscription(subscription=path).topic
                topic_codec = TopicCodec(lookup_topic_schema(channel, topic))
            yield subscriber, path, topic_codec
    finally:
        subscriber.close()
        if channel is not None:
            channel.close()


@contextlib.contextmanager
def source_clients(task: SourceTask) -> Iterator[SourceClients]:
    """The task's clients; Kafka is flushed at the end (the producer is kept for this Python worker's next task,
    connection.kept_client)."""
    with kept_client(source_producer_config(task.kafka_client_config, task.outage_timeout_s)) as producer:
        try:
            with pubsub_clients(task) as (subscriber, path, topic_codec):
                yield SourceClients(subscriber, path, _Delivery(task.config, producer), topic_codec)
        finally:
            producer.flush(30)


def summary_rows(delivery: "_Delivery", recognized: int = 0) -> pa.RecordBatch:
    rows = [{"kafka_partition": p, "written": n, "bytes": b, "pulled": 0, "acked": 0, "dropped": 0, "recognized": 0}
            for p, (n, b) in delivery.written.items()]
    rows.append({"kafka_partition": -1, "written": 0, "bytes": 0, **delivery.totals, "recognized": recognized})
    return rows_batch(rows, SUMMARY_SCHEMA)


def pull_and_deliver(task: SourceTask, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    slots = [slot for batch in batches for slot in batch.column("slot").to_pylist()]
    cfg = task.config
    with watching(task.lease, task.kafka_client_config, f"pulling subscription {cfg.cps_subscription}") as keep_going, \
            source_clients(task) as clients:
        for slot in slots:
            converter = CloudPubSubSourceConverter(cfg, partitioner_start=slot, topic_codec=clients.topic_codec)
            if cfg.streaming_pull_enabled:
                _streaming_pull(task, clients.subscriber, clients.path, converter, clients.delivery, keep_going)
            else:
                _unary_pull(task, clients.subscriber, clients.path, converter, clients.delivery, keep_going)
    yield summary_rows(clients.delivery)


def pull_retry(outage_timeout_s: float):
    """The client's retry of a pull (transient codes, exponential), bounded by the outage timeout, not 60 s."""
    from google.api_core import exceptions, retry

    return retry.Retry(predicate=retry.if_exception_type(
        exceptions.Aborted, exceptions.InternalServerError, exceptions.ResourceExhausted,
        exceptions.ServiceUnavailable, exceptions.Unknown), timeout=outage_timeout_s)


def _unary_pull(task: SourceTask, subscriber, path: str, converter, delivery: "_Delivery",
                keep_going: Callable[[], bool]) -> None:
    """Pull with cps.maxBatchSize until the subscription has nothing more, the quota is reached or `keep_going`
    says no."""
    cfg = task.config
    started = time.monotonic()
    with PulledDelivery(subscriber, path, delivery) as pulls:
        while delivery.totals["pulled"] < task.quota and task.has_time(started) and keep_going():
            response = subscriber.pull(
                subscription=path, max_messages=min(cfg.cps_max_batch_size, task.quota - delivery.totals["pulled"]),
                timeout=PULL_TIMEOUT_S, retry=pull_retry(task.outage_timeout_s),
            )
            received = received_messages(response)
            if not received:
                return  # nothing more for now: this micro-batch is done
            pulls.deliver(converter, received)


class PulledDelivery:
    """Delivers unary pulls without waiting on each: the next pull goes out while Kafka acknowledges the last
    one's records, and acks leave on a thread of their own as Kafka's acknowledgements come in. A pull delivered
    and acked before the next one went out cost four round trips per cps.maxBatchSize messages (pull, Kafka's
    linger and acknowledgement, ack), 100 messages at the default. At most
    MAX_IN_FLIGHT messages wait on Kafka; while Kafka is slow, their ack deadlines are pushed back. Leaving the
    block waits until every record Kafka took is acked, unless it is left by an error: then what Kafka took but
    was not acked comes again (at least once, as before)."""

    def __init__(self, subscriber, path: str, delivery: "_Delivery"):
        self._subscriber, self._path, self._delivery = subscriber, path, delivery
        self._acks = ThreadPoolExecutor(1, thread_name_prefix="pubsub-acks")
        self._sent: list[Future] = []

    def __enter__(self) -> "PulledDelivery":
        return self

    def __exit__(self, kind, error, trace) -> None:
        try:
            if kind is None:
                self._delivery.wait_for_kafka(self._extend)
                self._ack(self._delivery.ackable())
                self._settle_acks(wait=True)
        finally:
            self._acks.shutdown(wait=True)

    def deliver(self, converter, received: list) -> None:
        """Hands one pull's messages (raw protobuf, `received_messages`) to Kafka, acks what Kafka has
        acknowledged so far, and waits while too much is in flight."""
        self._delivery.send(converter, [(m.message, m.message.message_id) for m in received],
                            [m.ack_id for m in received], raw=True)
        waited = time.monotonic()
        while self._delivery.in_flight > MAX_IN_FLIGHT:
            self._ack(self._delivery.ackable(wait_s=0.05))
            if time.monotonic() - waited > EXTEND_EVERY_S:
                self._extend(self._delivery.pending())
                waited = time.monotonic()
        self.settle()

    def settle(self) -> None:
        """Acks what Kafka has acknowledged so far; raises a refused record or a failed ack."""
        self._ack(self._delivery.ackable())
        self._settle_acks(wait=False)

    def _ack(self, ack_ids: list[str]) -> None:
        for chunk in ack_id_chunks(ack_ids):
            self._sent.append(self._acks.submit(self._subscriber.acknowledge, subscription=self._path, ack_ids=chunk))

    def _settle_acks(self, wait: bool) -> None:
        """Raises the first failed ack; forgets the acks that are done."""
        still = []
        for future in self._sent:
            if wait or future.done():
                future.result()
            else:
                still.append(future)
        self._sent = still

    def _extend(self, ack_ids: list[str]) -> None:
        for chunk in ack_id_chunks(ack_ids):
            self._subscriber.modify_ack_deadline(subscription=self._path, ack_ids=chunk,
                                                 ack_deadline_seconds=ACK_DEADLINE_EXTENSION_S)


def _streaming_pull(task: SourceTask, subscriber, path: str, converter, delivery: "_Delivery",
                    keep_going: Callable[[], bool]) -> None:
    """Streaming pull with the cps.streamingPull.* flow control (the client extends leases itself), until the
    stream goes quiet, the quota is reached or `keep_going` says no."""
    cfg = task.config
    arrived: queue.Queue = queue.Queue()
    with streaming_pull(subscriber, path, cfg, task.quota, arrived):
        started = time.monotonic()
        while delivery.totals["pulled"] < task.quota and task.has_time(started) and keep_going():
            try:
                first = arrived.get(timeout=STREAM_IDLE_S)
            except queue.Empty:
                return  # the stream went quiet: this micro-batch is done
            limit = min(cfg.cps_max_batch_size, task.quota - delivery.totals["pulled"])
            deliver_streamed(converter, delivery, drain(arrived, first, limit))


@contextlib.contextmanager
def streaming_pull(subscriber, path: str, cfg: CloudPubSubSourceConfig, most_messages: int,
                   arrived: queue.Queue) -> Iterator[None]:
    """A streaming pull putting what arrives in `arrived`, with the cps.streamingPull.* flow control (the client
    extends the leases itself); at the end the last acks go out before the stream is cancelled."""
    from google.cloud import pubsub_v1

    flow = pubsub_v1.types.FlowControl(
        max_messages=min(cfg.streaming_pull_flow_control_messages, most_messages),
        max_bytes=cfg.streaming_pull_flow_control_bytes,
        max_lease_duration=cfg.streaming_pull_max_ack_extension_ms / 1000 or 3600,
        max_duration_per_lease_extension=cfg.streaming_pull_max_ms_per_ack_extension / 1000,
    )
    stream = subscriber.subscribe(path, callback=arrived.put, flow_control=flow)
    try:
        yield
    finally:
        time.sleep(ACK_FLUSH_S)  # the client sends acks in the background; let the last ones go out
        stream.cancel()
        try:
            stream.result(timeout=30)
        except Exception:  # cancelled streams report it as an error
            pass


def drain(arrived: queue.Queue, first, limit: int) -> list:
    """`first` and what else is already waiting, at most `limit` in all."""
    batch = [first]
    while len(batch) < limit:
        try:
            batch.append(arrived.get_nowait())
        except queue.Empty:
            break
    return batch


def deliver_streamed(converter, delivery: "_Delivery", batch: list) -> None:
    """Writes streamed messages to Kafka, then acks those Kafka took (or that were dropped); the client extends
    the leases of what waits on Kafka itself."""
    delivery.send(converter, [(streamed_message_in(m), m.message_id) for m in batch], batch)
    delivery.wait_for_kafka(lambda pending: None)
    for message in delivery.ackable():
        message.ack()


class _Delivery:
    """Writes converted messages to Kafka and says which may be acked: delivered ones, and ones dropped under
    errors.tolerance=all (a conversion error, or a record Kafka refuses for good, as Kafka Connect's KIP-779 does).
    Otherwise, once Kafka refused a record, `ackable` raises and nothing more is acked. A message is acked through
    its handle (an ack id, or a streamed message). In a transaction, a record refused after it was sent fails it: it
    cannot be skipped alone."""

    def __init__(self, config: CloudPubSubSourceConfig, producer, in_transaction: bool = False):
        self.config = config
        self.producer = producer
        self._in_transaction = in_transaction
        self.written: dict[int, list[int]] = collections.defaultdict(lambda: [0, 0])  # partition -> [n, bytes]
        self.totals = {"pulled": 0, "acked": 0, "dropped": 0}
        self._pending: dict[int, object] = {}  # sent to Kafka, not acknowledged yet: token -> handle
        self._next_token = 0
        self._settled: list = []  # handles that may be acked
        self._failures: list[tuple[int, str]] = []  # (size, what): the largest are named first

    @property
    def in_flight(self) -> int:
        return len(self._pending)

    def pending(self) -> list:
        return list(self._pending.values())

    def send(self, converter, items: list[tuple], handles: list, raw: bool = False) -> None:
        """Converts and hands the messages to the producer; Kafka's acknowledgements arrive in `ackable`. `items`:
        (PubSubMessageIn, message id), or with `raw` (raw protobuf PubsubMessage, message id)."""
        from confluent_kafka import KafkaException

        cfg = self.config
        self.totals["pulled"] += len(items)
        for handle, (message, message_id) in zip(handles, items):
            try:
                record = converter.plain_record(message) if raw else None
                if record is None:
                    record = converter.convert(pb_message_in(message) if raw else message)
            except MessageError as exc:
                if cfg.errors_tolerance == "none":
                    raise MessageError(f"message {message_id}: {exc}") from exc
                log.warning("dropping message %s: %s (errors.tolerance=all)", message_id, exc)
                self._drop(handle)
                continue
            if record is None:  # a transform dropped it: acked, not written
                self._settled.append(handle)
                continue
            kwargs = {} if record.partition is None else {"partition": record.partition}
            size = len(record.value or b"") + len(record.key or b"")
            token, self._next_token = self._next_token, self._next_token + 1
            self._pending[token] = handle
            while True:
                try:
                    self.producer.produce(
                        record.topic or cfg.kafka_topic, key=record.key, value=record.value, headers=record.headers or None,
                        timestamp=record.timestamp_ms, on_delivery=self._on_delivery(token, size, message_id),
                        **kwargs)
                    break
                except BufferError:
                    self.producer.poll(0.1)
                except KafkaException as exc:  # refused before sending: too large for the producer, say
                    self._refused(self._pending.pop(token), message_id, exc.args[0], size, sent=False)
                    break

    def ackable(self, wait_s: float = 0) -> list:
        """The handles settled since the last call (counted as acked); raises once Kafka refused a record."""
        self.producer.poll(wait_s)
        if self._failures:
            # The broker refuses a whole produce request for one record in it: the largest are the likely cause.
            named = [what for _, what in sorted(self._failures, key=lambda failure: -failure[0])[:3]]
            raise BatchError(f"Kafka topic {self.config.kafka_topic} did not accept {len(self._failures)} records: "
                             f"{'; '.join(named)}")
        settled, self._settled = self._settled, []
        self.totals["acked"] += len(settled)
        return settled

    def wait_for_kafka(self, extend: Callable[[list], None]) -> None:
        """Until Kafka answered for everything sent; while it is slow, `extend` the leases of what waits on it."""
        while self.producer.flush(EXTEND_EVERY_S) > 0:
            extend(self.pending())

    def _on_delivery(self, token: int, size: int, message_id: str):
        def callback(err, msg):
            handle = self._pending.pop(token)
            if err is not None:
                self._refused(handle, message_id, err, size, sent=True)
                return
            self._settled.append(handle)
            counts = self.written[msg.partition()]
            counts[0] += 1
            counts[1] += size
        return callback

    def _drop(self, handle) -> None:
        self._settled.append(handle)
        self.totals["dropped"] += 1

    def _refused(self, handle, message_id: str, err, size: int, sent: bool) -> None:
        tolerate = self.config.errors_tolerance == "all" and not (sent and self._in_transaction)
        if tolerate and refused_for_good(err):
            log.warning("dropping message %s: Kafka refused it: %s (errors.tolerance=all)", message_id, err.str())
            self._drop(handle)
        else:
            self._failures.append((size, f"message {message_id} ({size} bytes): {err.str()}"))
