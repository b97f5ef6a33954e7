"""Executor side of the Pulsar sink: one Spark partition's records sent to Pulsar with the Kafka key as the
partition key, headers as properties and the record's timestamp as the event time, one producer per target
topic (sink_writer.SinkWriter: flushed once Pulsar acknowledged every message)."""

from __future__ import annotations

import threading

import pyarrow as pa

from connectors.config.routing import PerTarget
from connectors.errors import BatchError, RecordError
from connectors.framework.sink_tally import SinkTally, TalliedBatch
from connectors.framework.sink_writer import SinkWriter, target_topics
from connectors.outage import Unreachable
from connectors.pulsar_sink.config import PulsarSinkConfig

NO_TIMESTAMP = -1
# After the producers' flush returned, how long the client's threads may take to run the last send callbacks (they
# run after the acknowledgement that ends the flush, one by one): milliseconds, in practice.
CALLBACKS_AFTER_FLUSH_S = 30.0


def pulsar_client(config: PulsarSinkConfig):
    """Made inside the Spark task: Pulsar clients cannot be pickled. Its own log goes to Python's, warnings up."""
    import logging

    import pulsar

    token = config.auth_token.get_secret_value() if config.auth_token else None
    logger = logging.getLogger("kafka-pubsub-bridge.pulsar")
    logger.setLevel(logging.WARNING)
    return pulsar.Client(config.service_url, authentication=pulsar.AuthenticationToken(token) if token else None,
                         operation_timeout_seconds=max(1, config.send_timeout_ms // 1000), logger=logger)


class _KeptClient:
    """A process's Pulsar client for one service and its producers, one per target topic and producer settings."""

    def __init__(self, config: PulsarSinkConfig):
        self.client, self._producers, self._lock = pulsar_client(config), {}, threading.Lock()

    def producer(self, topic: str, cfg: PulsarSinkConfig):
        settings = (topic, cfg.send_timeout_ms, cfg.batching_enabled, cfg.batching_max_messages,
                    cfg.batching_max_publish_delay_ms)
        with self._lock:
            if settings not in self._producers:
                self._producers[settings] = self.client.create_producer(
                    topic, send_timeout_millis=cfg.send_timeout_ms, batching_enabled=cfg.batching_enabled,
                    batching_max_messages=cfg.batching_max_messages,
                    batching_max_publish_delay_ms=cfg.batching_max_publish_delay_ms, block_if_queue_full=True)
            return self._producers[settings]


_KEPT_LOCK = threading.Lock()
_KEPT: dict[tuple, _KeptClient] = {}


def kept_pulsar_client(config: PulsarSinkConfig) -> _KeptClient:
    """This process's client for the bridge's Pulsar service, made on first use and kept: an always-on sink
    delivers a round of records every few tens of milliseconds, and a client per round would cost a connection
    and a producer handshake with the broker every time. Forgotten (and closed) after a failed round."""
    key = (config.service_url, config.auth_token.get_secret_value() if config.auth_token else None,
           config.send_timeout_ms)
    with _KEPT_LOCK:
        if key not in _KEPT:
            _KEPT[key] = _KeptClient(config)
        return _KEPT[key]


def _forget(kept: _KeptClient) -> None:
    with _KEPT_LOCK:
        for key in [k for k, v in _KEPT.items() if v is kept]:
            del _KEPT[key]
    kept.client.close()


class PulsarWriter(SinkWriter):
    """A task's records sent through this process's kept client, one producer per target topic."""

    def __init__(self, config: PulsarSinkConfig, tally: SinkTally):
        import pulsar

        super().__init__(tally)
        self.config, self._pulsar = config, pulsar
        self._kept = kept_pulsar_client(config)
        # The producer of each target topic this task sent through (flushed at its end), routed once per Kafka topic.
        self._producer_for = PerTarget(config.topic_for, lambda target: self._kept.producer(target, config))
        # Callbacks come from the client's own threads, and may still be running when a producer's flush returns:
        # the task's summary waits for every one (`_unanswered` sends).
        self._lock, self._refused, self._failed = threading.Lock(), [], []
        self._answered, self._unanswered = threading.Condition(self._lock), 0

    def _callback(self, slot: TalliedBatch, row: int):
        ok, refusals = self._pulsar.Result.Ok, (self._pulsar.Result.MessageTooBig, self._pulsar.Result.InvalidMessage)

        def done(result, message_id) -> None:
            with self._lock:
                if result == ok:
                    slot.counts(row).published += 1
                elif result in refusals:
                    self._refused.append((slot, row, result))
                else:
                    self._failed.append((slot, row, result))
                self._unanswered -= 1
                self._answered.notify_all()
        return done

    def _send(self, producer, value: bytes, callback, **kwargs) -> None:
        with self._lock:
            self._unanswered += 1
        try:
            producer.send_async(value, callback, **kwargs)
        except BaseException:  # not sent: no callback will come for it
            with self._lock:
                self._unanswered -= 1
            raise

    def put(self, records: pa.RecordBatch) -> None:
        slot = TalliedBatch(records, self.tally)
        columns = {name: records.column(name).to_pylist()
                   for name in ("key", "value", "headers", "timestamp_ms", "timestampType")}
        topics = target_topics(records)
        for row in range(records.num_rows):
            value = columns["value"][row]
            if value is None:  # a tombstone has no Pulsar counterpart
                slot.counts(row).skipped += 1
                continue
            key = columns["key"][row]
            kwargs = {"properties": {h["key"]: (h["value"] or b"").decode("utf-8", "backslashreplace")
                                     for h in columns["headers"][row] or []}}
            if key is not None:
                kwargs["partition_key"] = key.decode("utf-8", "backslashreplace")
            if columns["timestampType"][row] != NO_TIMESTAMP and columns["timestamp_ms"][row] is not None:
                kwargs["event_timestamp"] = columns["timestamp_ms"][row]
            self._send(self._producer_for(topics[row]), value, self._callback(slot, row),
                       **kwargs)

    def flush(self) -> None:
        cfg = self.config
        for producer in self._producer_for.by_target.values():
            producer.flush()
        with self._answered:
            if not self._answered.wait_for(lambda: self._unanswered == 0, CALLBACKS_AFTER_FLUSH_S):
                raise Unreachable(f"Pulsar at {cfg.service_url}: {self._unanswered} sends were not answered "
                                  f"{CALLBACKS_AFTER_FLUSH_S:.0f} s after the producers' flush; the run recorded "
                                  "nothing")
        if self._failed:
            slot, row, result = self._failed[0]
            if result == self._pulsar.Result.Timeout:
                raise Unreachable(f"Pulsar at {cfg.service_url} did not acknowledge {len(self._failed)} messages "
                                  f"within {cfg.send_timeout_ms / 1000:.0f} s; the run recorded nothing")
            raise BatchError(f"{slot.record(row).where}: Pulsar refused {len(self._failed)} messages: {result}")
        for slot, row, result in self._refused:
            self.tally.reject(slot.record(row), "PULSAR_SEND", RecordError(f"Pulsar refused it: {result}"))

    def __exit__(self, exc_type, exc, traceback) -> bool | None:
        if exc_type is None:
            return None
        _forget(self._kept)  # the next task starts with a new client
        if isinstance(exc, self._pulsar.Timeout):
            raise Unreachable(f"Pulsar at {self.config.service_url} did not answer within "
                              f"{self.config.send_timeout_ms / 1000:.0f} s; the run recorded nothing") from None
        return None
