"""Executor side of the Pulsar sink: one Spark partition's records sent to Pulsar with the Kafka key as the
partition key, headers as properties and the record's timestamp as the event time, one producer per target
topic; counts are yielded only after Pulsar acknowledged every message."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa

from connectors.errors import BatchError
from connectors.kafka.record import RecordError
from connectors.kafka.sink_tally import SinkTally, TalliedBatch
from connectors.outage import Unreachable
from connectors.pulsar_sink.config import PulsarSinkConfig

NO_TIMESTAMP = -1


@dataclass(frozen=True)
class PulsarTask:
    bridge_name: str
    config: PulsarSinkConfig
    kafka_client_config: dict[str, str]


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


def send_arrow_batches(task: PulsarTask, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    import pulsar

    cfg = task.config
    tally = SinkTally(task.bridge_name, cfg, task.kafka_client_config)
    kept = kept_pulsar_client(cfg)
    producers: dict[str, object] = {}  # the ones this call sent through, flushed at its end
    lock, refused, failed = threading.Lock(), [], []  # callbacks come from the client's own threads

    def producer_for(topic: str):
        if topic not in producers:
            producers[topic] = kept.producer(topic, cfg)
        return producers[topic]

    def callback(slot: TalliedBatch, row: int):
        def done(result, message_id) -> None:
            with lock:
                if result == pulsar.Result.Ok:
                    slot.counts(row).published += 1
                elif result in (pulsar.Result.MessageTooBig, pulsar.Result.InvalidMessage):
                    refused.append((slot, row, result))
                else:
                    failed.append((slot, row, result))
        return done

    try:
        for batch in batches:
            slot = TalliedBatch(batch, tally)
            columns = {name: batch.column(name).to_pylist()
                       for name in ("topic", "key", "value", "headers", "timestamp_ms", "timestampType")}
            for row in range(batch.num_rows):
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
                producer_for(cfg.topic_for(columns["topic"][row])).send_async(value, callback(slot, row), **kwargs)
        for producer in producers.values():
            producer.flush()
    except pulsar.Timeout:
        _forget(kept)
        raise Unreachable(f"Pulsar at {cfg.service_url} did not answer within {cfg.send_timeout_ms / 1000:.0f} s; "
                          "the run recorded nothing") from None
    except BaseException:
        _forget(kept)
        raise
    if failed:
        _forget(kept)
        slot, row, result = failed[0]
        if result == pulsar.Result.Timeout:
            raise Unreachable(f"Pulsar at {cfg.service_url} did not acknowledge {len(failed)} messages within "
                              f"{cfg.send_timeout_ms / 1000:.0f} s; the run recorded nothing")
        raise BatchError(f"{slot.record(row).where}: Pulsar refused {len(failed)} messages: {result}")
    for slot, row, result in refused:
        tally.reject(slot.record(row), "PULSAR_SEND", RecordError(f"Pulsar refused it: {result}"))
    tally.flush_dead_letters()
    yield tally.summary()
