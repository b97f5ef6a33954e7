"""The Pulsar sink's writer counts a task's records only once every send callback has run: the client runs them on
its own threads, and the last ones may come after a producer's flush returned (seen once in a suite: 51 records read,
39 counted published, the rest answered a moment later)."""

import threading

import pulsar

from connectors.config.common import ErrorHandlingKeys
from connectors.framework.sink_tally import SinkTally
from connectors.pulsar_sink import write
from connectors.pulsar_sink.config import PulsarSinkConfig
from tests.unit.kafka_rows import awkward_kafka_rows


class _LateAnswers:
    """A producer whose flush returns at once and whose callbacks run 0.3 s later on another thread; one message of
    each batch is refused."""

    def __init__(self):
        self._callbacks: list = []

    def send_async(self, value, callback, **kwargs) -> None:
        self._callbacks.append(callback)

    def flush(self) -> None:
        callbacks, self._callbacks = self._callbacks, []
        results = [pulsar.Result.MessageTooBig] + [pulsar.Result.Ok] * (len(callbacks) - 1)
        threading.Timer(0.3, lambda: [c(r, None) for c, r in zip(callbacks, results)]).start()


def test_the_summary_waits_for_every_send_callback(monkeypatch):
    producer = _LateAnswers()
    monkeypatch.setattr(write._KeptClient, "producer", lambda self, topic, cfg: producer)
    config = PulsarSinkConfig.model_validate({"topics": "t", "pulsar.service.url": "pulsar://127.0.0.1:1",
                                              "errors.tolerance": "all"})
    tally = SinkTally("b", ErrorHandlingKeys.model_validate({"errors.tolerance": "all"}), {})
    batch = awkward_kafka_rows()
    with write.PulsarWriter(config, tally) as writer:
        writer.put(batch)
        writer.flush()
    rows = tally.summary()
    sent = batch.num_rows - batch.column("value").null_count  # a tombstone is not sent
    assert sum(r["published"] for r in rows) == sent - 1
    assert sum(r["skipped"] for r in rows) == batch.num_rows - sent
    assert sum(r["failed_dropped"] for r in rows) == 1  # the refused one, tolerated
