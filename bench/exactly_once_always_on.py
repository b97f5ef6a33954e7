"""Exactly once always on: each exactly-once connector's always-on bridge with and without
`exactly.once.support=required`, side by side in alternating rounds on one stack, while a steady sender writes
timestamped records (the value is the send time). Latency is send -> arrival at a `read_committed` consumer, timed
when the consumer gets the record: that is where the guarantee is (a record's LogAppendTime is when the broker
appended it, before its transaction committed). The target for exactly once: p50 within the transaction boundary
(`poll`: a round) + 0.1 s of the at-least-once row's.

    python -m bench.exactly_once_always_on [--seconds 20] [--rate 1000] [--rounds 3] [--only Lite,...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from pathlib import Path
from typing import Callable

from bench.common import alternating_rounds, bench_stack, fresh_pubsub, write_results
from bench.continuous import (
    PARTITIONS, WARM_UP_VALUE, continuous_run, produce_warm_up, steady, summary, warm_up_source,
)
from bench.data import LITE_LOCATION, PROJECT, kafka_topic, lite_connection, lite_topic, pubsub_topic, topic_records, unique_name
from local_stack.paths import PROJECT_ROOT

REQUIRED = {"exactly.once.support": "required"}


class CommittedArrivals(threading.Thread):
    """A read_committed consumer of a topic from its start: each record's arrival time minus its send time (its
    value), the warm-up records left out, until `count` came or `stop()`."""

    def __init__(self, bootstrap_servers: str, topic: str):
        from confluent_kafka import Consumer, TopicPartition

        super().__init__(daemon=True)
        # fetch.wait.max.ms: a fetch at the end answers within 5 ms of a record becoming visible, not 500.
        self._consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": unique_name("eos-lat"),
                                   "enable.auto.commit": False, "isolation.level": "read_committed",
                                   "fetch.wait.max.ms": 5, "log_level": 3})
        self._consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        self.latencies: list[float] = []
        self.count: int | None = None
        self._stopped = threading.Event()

    def run(self) -> None:
        while not self._stopped.is_set() and (self.count is None or len(self.latencies) < self.count):
            for message in self._consumer.consume(10_000, 0.05):
                arrived = time.time()
                if message.error() is None and message.value() != WARM_UP_VALUE:
                    self.latencies.append(arrived - float(message.value().decode()))
        self._consumer.close()

    def wait_for(self, count: int, timeout_s: float = 120) -> list[float]:
        self.count = count
        self.join(timeout_s)
        self._stopped.set()
        return self.latencies


def lite_source(remote: str, exactly_once: bool, rate: float, seconds: float) -> dict:
    from google.cloud.pubsublite.cloudpubsub import PublisherClient

    name = unique_name("eos-lsrc")
    lite, subscription = lite_topic(name, PARTITIONS)
    kafka_topic(name, PARTITIONS)
    entry = {"name": "eos_lite_source", "connector": "PubSubLiteSourceConnector",
             "config": {"pubsublite.project": PROJECT, "pubsublite.location": LITE_LOCATION,
                        "pubsublite.subscription": subscription.name, "kafka.topic": name,
                        **(REQUIRED if exactly_once else {})}}
    with PublisherClient(**lite_connection().client_kwargs(lite.location.region)) as publisher:
        return _source_latency(entry, remote, name, lambda value: publisher.publish(lite, value), rate, seconds)


def cloud_source(remote: str, exactly_once: bool, rate: float, seconds: float) -> dict:
    from google.cloud import pubsub_v1

    fresh_pubsub()
    name = unique_name("eos-csrc")
    topic, subscription = pubsub_topic(name)
    kafka_topic(name, PARTITIONS)
    entry = {"name": "eos_cloud_source", "connector": "CloudPubSubSourceConnector",
             "config": {"cps.project": PROJECT, "cps.subscription": subscription.rsplit("/", 1)[1],
                        "kafka.topic": name, **(REQUIRED if exactly_once else {})}}
    publisher = pubsub_v1.PublisherClient(pubsub_v1.types.BatchSettings(max_messages=100, max_latency=0.005))
    return _source_latency(entry, remote, name, lambda value: publisher.publish(topic, value), rate, seconds)


def _source_latency(entry: dict, remote: str, topic: str, publish: Callable[[bytes], object], rate: float,
                    seconds: float) -> dict:
    """A source bridge's row: warmed up, then `rate` messages a second for `seconds` through `publish` (which
    returns a future), timed at a read_committed consumer of `topic`."""
    with continuous_run(entry, remote):
        futures: list = []
        warm_up_source(lambda value: futures.append(publish(value)), topic)
        arrivals = CommittedArrivals(os.environ["KAFKA_BOOTSTRAP_SERVERS"], topic)
        arrivals.start()
        sent = steady(lambda now: futures.append(publish(repr(now).encode())), rate, seconds)
        [f.result(60) for f in futures]
        return summary(arrivals.wait_for(sent), sent)


def kafka_sink(remote: str, exactly_once: bool, rate: float, seconds: float) -> dict:
    from bench.continuous import kafka_producer

    name = unique_name("eos-repl")
    target = os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"]
    kafka_topic(name, PARTITIONS)
    entry = {"name": "eos_kafka_sink", "connector": "KafkaSinkConnector",
             "batch": {"initial_offsets": "earliest"},
             "config": {"topics": name, "target.bootstrap.servers": target, **(REQUIRED if exactly_once else {})}}
    with continuous_run(entry, remote):
        produce_warm_up(name)
        _wait_for_records(target, name, 1)
        arrivals = CommittedArrivals(target, name)
        arrivals.start()
        producer = kafka_producer()

        def send(now: float) -> None:
            producer.produce(name, value=repr(now).encode())
            producer.poll(0)

        sent = steady(send, rate, seconds)
        producer.flush(30)
        return summary(arrivals.wait_for(sent), sent)


def _wait_for_records(bootstrap_servers: str, topic: str, count: int, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if topic_records(bootstrap_servers, topic) >= count:
            time.sleep(0.5)
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"no record reached {topic} on {bootstrap_servers} within {timeout_s} s")
        time.sleep(0.2)


ROWS: dict[str, Callable[[str, bool, float, float], dict]] = {
    "PubSubLiteSourceConnector": lite_source,
    "CloudPubSubSourceConnector": cloud_source,
    "KafkaSinkConnector": kafka_sink,
}


def _line(row: dict) -> str:
    return f"p50 {row['p50_s']:.3f} s, p99 {row['p99_s']:.3f} s, max {row['max_s']:.2f} s ({row['records']} records)"


def render(results: dict) -> list[str]:
    """The docs' table: each connector's medians over the rounds (spread in brackets)."""
    lines = ["| bridge (always on) | exactly once | send → read_committed p50 | p99 | rounds |",
             "| --- | --- | --- | --- | --- |"]
    for connector, sides in results["rows"].items():
        for side, rows in sides.items():
            p50s, p99s = sorted(r["p50_s"] for r in rows), sorted(r["p99_s"] for r in rows)
            lines.append(f"| {connector} | {side} | {statistics.median(p50s):.3f} s ({p50s[0]:.3f}–{p50s[-1]:.3f}) | "
                         f"{statistics.median(p99s):.3f} s ({p99s[0]:.3f}–{p99s[-1]:.3f}) | {len(rows)} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--rate", type=float, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", help="comma-separated connector names")
    parser.add_argument("--out", default=str(PROJECT_ROOT / "bench" / "exactly_once_always_on.json"))
    args = parser.parse_args()
    chosen = [c for c in ROWS if not args.only or c in args.only.split(",")]
    results: dict = {"rate_per_s": args.rate, "seconds": args.seconds, "rows": {}}
    with bench_stack() as stack:
        remote = stack.env()["BRIDGE_SPARK_REMOTE"]
        for connector in chosen:
            print(f"{connector}:", flush=True)
            measure = ROWS[connector]
            results["rows"][connector] = alternating_rounds(args.rounds, {
                "at least once": lambda _round, m=measure: m(remote, False, args.rate, args.seconds),
                "exactly once": lambda _round, m=measure: m(remote, True, args.rate, args.seconds),
            }, lambda line: print(line, flush=True), describe=_line)
    write_results(Path(args.out), results)
    print("\n".join(render(results)))


if __name__ == "__main__":
    main()
