"""Executor side of the Kinesis sink: one Spark partition's records into PutRecords requests within the service
limits; records Kinesis refuses for a while are sent again with backoff; a record too large for Kinesis goes
through errors.tolerance. The writer (sink_writer.SinkWriter) flushes only once every record was accepted, so the
driver records offsets only for delivered data. The driver checks the streams first (kinesis_writer)."""

from __future__ import annotations

import functools
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterator

import pyarrow as pa
from google.api_core.retry import exponential_sleep_generator

from connectors.config.routing import PerTarget
from connectors.errors import BatchError, RecordError
from connectors.framework.sink_tally import SinkTally, TalliedBatch
from connectors.framework.sink_writer import OpenWriter, SinkWriter, target_topics
from connectors.kinesis_sink.config import MAX_BYTES_PER_RECORD, KinesisSinkConfig
from connectors.outage import Unreachable

if TYPE_CHECKING:
    from connectors.kafka.admin import KafkaAdmin

# Whole-request errors worth another try (the others, such as a stream that does not exist, fail the task).
RETRIED_REQUEST_ERRORS = frozenset({"ProvisionedThroughputExceededException", "LimitExceededException",
                                    "InternalFailure", "ServiceUnavailable", "ThrottlingException"})


class KinesisRefused(BatchError):
    """Kinesis kept refusing records past the retry timeout, or refused a request for good."""

    def __init__(self, message: str, origins: list):
        super().__init__(message)
        self.origins = origins


@dataclass
class _Entry:
    record: dict[str, Any]  # Data, PartitionKey[, ExplicitHashKey]
    size: int
    origin: Any


class KinesisPutter:
    """Buffers records into PutRecords requests (at most `max_records` and `max_bytes` each) and sends them
    one at a time; a request's failed records go into the next one, after a backoff once nothing new is
    left to send alongside them."""

    def __init__(self, client, stream: str, max_records: int, max_bytes: int, retry_timeout_s: float,
                 delivered: Callable[[Any], None], clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep):
        self._client, self._stream = client, stream
        self._max_records, self._max_bytes, self._retry_timeout_s = max_records, max_bytes, retry_timeout_s
        self._delivered, self._clock, self._sleep = delivered, clock, sleep
        self._pending: list[_Entry] = []
        self._pending_bytes = 0

    def add(self, data: bytes, partition_key: str, origin: Any, explicit_hash_key: str | None = None) -> None:
        record: dict[str, Any] = {"Data": data, "PartitionKey": partition_key}
        if explicit_hash_key is not None:
            record["ExplicitHashKey"] = explicit_hash_key
        size = len(data) + len(partition_key.encode())
        if (len(self._pending) >= self._max_records or self._pending_bytes + size > self._max_bytes):
            self._send(self._take_request(), final=False)
        self._pending.append(_Entry(record, size, origin))
        self._pending_bytes += size

    def close(self) -> None:
        """Returns once every record added was accepted."""
        while self._pending:
            self._send(self._take_request(), final=True)

    def _take_request(self) -> list[_Entry]:
        request, size = [], 0
        while self._pending and len(request) < self._max_records and size + self._pending[0].size <= self._max_bytes:
            entry = self._pending.pop(0)
            request.append(entry)
            size += entry.size
        self._pending_bytes -= size
        return request

    def _send(self, request: list[_Entry], final: bool) -> None:
        deadline = self._clock() + self._retry_timeout_s
        delays = exponential_sleep_generator(0.1, 5.0)
        while request:
            failed = self._put(request, deadline, delays)
            if not failed:
                return
            if self._clock() >= deadline:
                entry, code, message = failed[0]
                raise KinesisRefused(f"Kinesis stream {self._stream} kept refusing {len(failed)} records for "
                                     f"{self._retry_timeout_s:.0f} s ({code}: {message})", origins=[entry.origin])
            request = [entry for entry, _, _ in failed]
            if not final and len(request) < self._max_records // 2:
                # Few refused: they go out again with the next request, after its new records had time to come.
                self._pending[:0] = request
                self._pending_bytes += sum(entry.size for entry in request)
                self._sleep(next(delays))
                return
            self._sleep(next(delays))

    def _put(self, request: list[_Entry], deadline: float, delays: Iterator[float]) -> list[tuple[_Entry, str, str]]:
        """One PutRecords call (whole-request throttling waited out); the records it refused."""
        from botocore.exceptions import ClientError

        while True:
            try:
                response = self._client.put_records(StreamName=self._stream, Records=[e.record for e in request])
                break
            except ClientError as exc:
                code = exc.response.get("Error", {}).get("Code", "")
                if code not in RETRIED_REQUEST_ERRORS or self._clock() >= deadline:
                    raise KinesisRefused(f"Kinesis stream {self._stream}: {code}: "
                                         f"{exc.response.get('Error', {}).get('Message', exc)}",
                                         origins=[e.origin for e in request]) from None
                self._sleep(next(delays))
        failed = []
        for entry, result in zip(request, response["Records"]):
            if result.get("ErrorCode"):
                failed.append((entry, result["ErrorCode"], result.get("ErrorMessage", "")))
            else:
                self._delivered(entry.origin)
        return failed


def kinesis_client(config: KinesisSinkConfig):
    """Made inside the Spark task: boto3 clients cannot be pickled."""
    import boto3

    secret = config.aws_secret_access_key.get_secret_value() if config.aws_secret_access_key else None
    return boto3.client("kinesis", region_name=config.region, endpoint_url=config.endpoint,
                        aws_access_key_id=config.aws_access_key_id, aws_secret_access_key=secret)


_KEPT_LOCK = threading.Lock()
_KEPT: dict[tuple, Any] = {}


def kept_kinesis_client(config: KinesisSinkConfig):
    """This process's client for the bridge's Kinesis endpoint and credentials, made on first use and kept: making
    a boto3 client costs tens of milliseconds of CPU, and an always-on sink delivers a round every few tens of
    milliseconds. boto3 clients are safe to share between threads."""
    key = (config.region, config.endpoint, config.aws_access_key_id,
           config.aws_secret_access_key.get_secret_value() if config.aws_secret_access_key else None)
    with _KEPT_LOCK:
        if key not in _KEPT:
            _KEPT[key] = kinesis_client(config)
        return _KEPT[key]


# How long a worker keeps a stream's shard list: an always-on sink in partition mode delivers a round every few tens of
# milliseconds, and a ListShards call per round would cost more than the round's puts. A list gone stale after a
# reshard still routes every record (Kinesis sends an explicit hash key to the open shard whose range holds it).
SHARD_LIST_KEPT_S = 30.0
_SHARD_LISTS: dict[tuple[int, str], tuple[float, list[str]]] = {}


def kept_shard_hash_keys(client, stream: str, clock: Callable[[], float] = time.monotonic) -> list[str]:
    """`shard_hash_keys` of the stream, asked again only after SHARD_LIST_KEPT_S (per kept client)."""
    key, now = (id(client), stream), clock()
    with _KEPT_LOCK:
        kept = _SHARD_LISTS.get(key)
    if kept is not None and now - kept[0] < SHARD_LIST_KEPT_S:
        return kept[1]
    keys = shard_hash_keys(client, stream)
    with _KEPT_LOCK:
        _SHARD_LISTS[key] = (now, keys)
    return keys


def shard_hash_keys(client, stream: str) -> list[str]:
    """The starting hash key of each open shard, in order: a Kafka partition's explicit hash key."""
    keys, token = [], None
    while True:
        page = client.list_shards(NextToken=token) if token else client.list_shards(StreamName=stream)
        keys += [shard["HashKeyRange"]["StartingHashKey"] for shard in page["Shards"]
                 if "EndingSequenceNumber" not in shard.get("SequenceNumberRange", {})]
        token = page.get("NextToken")
        if not token:
            return sorted(keys, key=int)


def check_stream(config: KinesisSinkConfig, stream: str) -> None:
    """Driver side: a stream that does not exist or is not ACTIVE fails the run before anything is read, in one line."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        summary = kinesis_client(config).describe_stream_summary(StreamName=stream)
    except ClientError as exc:
        error = exc.response.get("Error", {})
        raise BatchError(f"Kinesis stream {stream} ({config.region}): {error.get('Code')}: "
                         f"{error.get('Message')}") from None
    except BotoCoreError as exc:
        raise Unreachable(f"Kinesis at {config.endpoint or config.region}: {exc}") from None
    status = summary["StreamDescriptionSummary"]["StreamStatus"]
    if status not in ("ACTIVE", "UPDATING"):
        raise BatchError(f"Kinesis stream {stream} is {status}, not ACTIVE")


def kinesis_writer(config: KinesisSinkConfig, kafka: KafkaAdmin) -> OpenWriter:
    """Driver side: the bridge's Kinesis streams each checked to exist, then how a task opens its writer. Routed by
    a transform, those its records' topics decide are checked by the task at first use."""
    topics = list(kafka.partitions(config.topic_list() or None, config.topics_regex))
    for topic in config.topics_after_transforms(topics) if config.routed_by_transforms() else topics:
        check_stream(config, config.stream_for(topic))
    return functools.partial(KinesisWriter, config)


class KinesisWriter(SinkWriter):
    """A task's records put through this process's kept client, one putter (and shard list) per stream: several
    with ${topic} in the stream name."""

    def __init__(self, config: KinesisSinkConfig, tally: SinkTally):
        super().__init__(tally)
        self.config, self._client = config, kept_kinesis_client(config)
        # A putter (and shard list) per stream this task put to, routed once per Kafka topic.
        self._putter_for = PerTarget(config.stream_for, self._putter)

    def _delivered(self, origin) -> None:
        slot, row = origin
        slot.counts(row).published += 1

    def _putter(self, stream: str) -> tuple[KinesisPutter, list[str]]:
        cfg = self.config
        if cfg.routed_by_transforms():
            check_stream(cfg, stream)
        return (KinesisPutter(self._client, stream, cfg.max_request_records, cfg.max_request_bytes,
                              cfg.retry_timeout_ms / 1000, self._delivered),
                kept_shard_hash_keys(self._client, stream) if cfg.partition_key == "partition" else [])

    def put(self, records: pa.RecordBatch) -> None:
        cfg, slot = self.config, TalliedBatch(records, self.tally)
        keys, values = records.column("key").to_pylist(), records.column("value").to_pylist()
        partitions, topics = records.column("partition").to_pylist(), target_topics(records)
        for row, (key, value, partition, topic) in enumerate(zip(keys, values, partitions, topics)):
            if value is None:  # a tombstone has nothing to put
                slot.counts(row).skipped += 1
                continue
            if cfg.partition_key == "key" and key:
                partition_key = key.decode("utf-8", errors="backslashreplace")[:256]
            else:
                partition_key = str(partition)
            if len(value) + len(partition_key.encode()) > MAX_BYTES_PER_RECORD:
                self.tally.reject(slot.record(row), "KINESIS_PUT", RecordError(
                    f"{len(value)} bytes: over Kinesis's limit of {MAX_BYTES_PER_RECORD} bytes per record"))
                continue
            putter, hash_keys = self._putter_for(topic)
            putter.add(value, partition_key, (slot, row), hash_keys[partition % len(hash_keys)] if hash_keys else None)

    def flush(self) -> None:
        for putter, _ in self._putter_for.by_target.values():
            putter.close()

    def __exit__(self, exc_type, exc, traceback) -> bool | None:
        if isinstance(exc, KinesisRefused):  # named by the first record it holds back
            slot, row = exc.origins[0]
            raise BatchError(f"{slot.record(row).where}: {exc}") from None
        return None
