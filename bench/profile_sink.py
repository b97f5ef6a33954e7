"""Where a sink's executor time goes: cProfile of one task's work, outside Spark.

Runs the same function a Spark task runs (the shared write_records over the sink's writer) over Arrow batches of N records
against a fresh local stack's pstest or Lite server, and prints the functions with the most own time.
Usage: python -m bench.profile_sink [--connector cloud|lite] [--records 20000] [--size 1024] [--counter]
With --counter the Cloud sink publishes to the counting Pub/Sub endpoint (bench.pubsub_counter) instead of pstest.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import functools
import os
import pstats
import time

import pyarrow as pa

from bench.common import bench_stack
from bench.data import lite_connection, lite_topic, payload, pubsub_topic
from bench.pubsub_counter import running_counter


def batches(count: int, size: int, per_batch: int = 2000):
    """Batches of Kafka rows as the Kafka reader gives them (range_reader's schema, with headers)."""
    from connectors.kafka.range_reader import RECORD_SCHEMA_WITH_HEADERS

    value = payload(size)
    for start in range(0, count, per_batch):
        n = min(per_batch, count - start)
        yield pa.RecordBatch.from_pydict({
            "topic": ["t"] * n, "partition": [0] * n, "offset": list(range(start, start + n)),
            "key": [str(i % 1000).encode() for i in range(start, start + n)], "value": [value] * n,
            "timestamp_ms": [int(time.time() * 1000)] * n, "timestampType": [0] * n, "headers": [[]] * n},
            schema=RECORD_SCHEMA_WITH_HEADERS)


def cloud_sink_task(name: str, java_defaults: bool):
    from connectors.cloud_pubsub.clients import PubSubConnection
    from connectors.cloud_pubsub_sink.config import CloudPubSubSinkConfig
    from connectors.cloud_pubsub_sink.write import pubsub_writer

    pubsub_topic(name, subscribe=False)
    tuning = {} if java_defaults else {"maxBufferSize": 1000, "maxDelayThresholdMs": 20}
    config = CloudPubSubSinkConfig.model_validate({"topics": "t", "cps.project": "bench", "cps.topic": name, **tuning})
    return _task(config, pubsub_writer(config, PubSubConnection(emulator_host=os.environ["PUBSUB_EMULATOR_HOST"]), 30))


def lite_sink_task(name: str):
    from connectors.pubsublite_sink.config import PubSubLiteSinkConfig
    from connectors.pubsublite_sink.write import LiteTarget, LiteWriter

    topic, _ = lite_topic(name, 1)
    config = PubSubLiteSinkConfig.model_validate({"topics": "t", "pubsublite.project": "bench", "pubsublite.location":
                                                  str(topic.location), "pubsublite.topic": name})
    return _task(config, functools.partial(LiteWriter, LiteTarget(config, lite_connection(),
                                                                  {str(config.topic_path()): 1})))


def _task(config, open_writer):
    """What a Spark task runs: the shared task body over the sink's writer (connectors/framework/sink_writer.py)."""
    from connectors.framework.sink_writer import TallySettings, write_records

    return functools.partial(write_records, TallySettings("profile", config, {}), open_writer)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--connector", choices=("cloud", "lite"), default="cloud")
    parser.add_argument("--java-defaults", action="store_true",
                        help="the Cloud sink at the Java connector's batching defaults")
    parser.add_argument("--counter", action="store_true", help="the Cloud sink into the counting Pub/Sub endpoint")
    args = parser.parse_args()
    with bench_stack(), (running_counter() if args.counter else contextlib.nullcontext()) as counter:
        if counter is not None:
            os.environ["PUBSUB_EMULATOR_HOST"] = counter.endpoint
        name = f"profile-{os.getpid()}"
        publish = cloud_sink_task(name, args.java_defaults) if args.connector == "cloud" else lite_sink_task(name)
        profile = cProfile.Profile()
        started = time.monotonic()
        profile.enable()
        list(publish(batches(args.records, args.size)))
        profile.disable()
        elapsed = time.monotonic() - started
        print(f"{args.records:,} records of {args.size} B in {elapsed:.1f} s: {args.records / elapsed:,.0f}/s "
              "in one task (one core); wall time includes waiting for the Pub/Sub end")
        pstats.Stats(profile).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
