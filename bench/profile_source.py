"""Where a Cloud Pub/Sub source batch's time goes: the same batch as the bench's source rows (10,000 messages),
once as one pull task run alone in this process under cProfile, once as a whole micro-batch on a warm classic
Spark session (its fixed cost: the plan, a Spark job, each task's clients), each on a fresh pstest.

    python -m bench.profile_source [--records 10000] [--size 1024] [--exactly-once] [--counter]

With --exactly-once the bridge has exactly.once.support=required (its pull task: exactly_once.py). With --counter
the pull task alone reads a subscription of the counting endpoint (bench.pubsub_counter) preloaded with `--records`
messages, with no emulator behind it (as bench.cloud_pubsub_on_counter's source rows), and no micro-batch follows.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import time

import pyarrow as pa

from bench.common import bench_stack, fresh_pubsub, warm_engine
from bench.data import kafka_topic, publish_pubsub, pubsub_topic, unique_name


def _filled(records: int, size: int) -> str:
    fresh_pubsub()
    name = unique_name("profile-source")
    topic, _ = pubsub_topic(name)
    publish_pubsub(topic, records, size)
    kafka_topic(name, 4)
    return name


EXACTLY_ONCE: dict = {}


def _config(name: str):
    from connectors.cloud_pubsub_source.config import CloudPubSubSourceConfig

    return CloudPubSubSourceConfig.model_validate({"cps.project": "bench", "cps.subscription": name,
                                                   "kafka.topic": name, **EXACTLY_ONCE})


def _task_body(task, admin, name: str):
    """The pull task as Spark runs it for slot 0, with its positions topic under exactly once."""
    import functools

    from connectors.cloud_pubsub_source.exactly_once import ExactlyOnceTask, pull_and_deliver_in_transactions
    from connectors.cloud_pubsub_source.write import pull_and_deliver
    from connectors.kafka.transactions import PositionsTopic

    if not task.config.exactly_once:
        return functools.partial(pull_and_deliver, task)
    positions = PositionsTopic(task.config.positions_topic_name(name), admin.connection.librdkafka_config())
    return functools.partial(pull_and_deliver_in_transactions,
                             ExactlyOnceTask(task, positions, positions.ensure(admin, 2)))


def main() -> None:
    from connectors.bridge import BatchSettings
    from connectors.cloud_pubsub.clients import PubSubConnection
    from connectors.cloud_pubsub_source.batch import run_source_batch
    from connectors.cloud_pubsub_source.write import SourceTask
    from connectors.kafka.admin import KafkaAdmin
    from connectors.kafka.connection import KafkaConnection

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--exactly-once", action="store_true")
    parser.add_argument("--counter", action="store_true", help="the pull task alone, on the counting endpoint")
    args = parser.parse_args()
    if args.exactly_once:
        EXACTLY_ONCE["exactly.once.support"] = "required"
    if args.counter:
        _profile_on_counter(args.records, args.size)
        return
    with bench_stack() as stack:
        connection = PubSubConnection(emulator_host=os.environ["PUBSUB_EMULATOR_HOST"])
        admin = KafkaAdmin(KafkaConnection(os.environ["KAFKA_BOOTSTRAP_SERVERS"]))

        name = _filled(args.records, args.size)
        task = SourceTask(_config(name), connection, admin.connection.librdkafka_config(), args.records)
        body = _task_body(task, admin, "profile_source")
        profile = cProfile.Profile()
        started = time.monotonic()
        profile.enable()
        [summary] = body(iter([pa.RecordBatch.from_pydict({"slot": [0]})]))
        profile.disable()
        alone_s = time.monotonic() - started
        moved = sum(summary.column("written").to_pylist())

        spark, _ = warm_engine("classic", stack.env().get("BRIDGE_SPARK_REMOTE"))
        warm_up = _filled(2_000, args.size)
        run_source_batch(spark, _config(warm_up), connection, admin, BatchSettings(max_records=2_000), "profile-source",
                     "connect-profile-source")
        name = _filled(args.records, args.size)
        result = run_source_batch(spark, _config(name), connection, admin, BatchSettings(max_records=args.records),
                                  "profile-source", "connect-profile-source")
        print(f"{args.records:,} messages of {args.size} B\n"
              f"- one pull task alone, in this process: {moved:,} in {alone_s:.2f} s ({moved / alone_s:,.0f}/s)\n"
              f"- a whole micro-batch, 2 tasks, warm classic engine: {result.written:,} in {result.duration_s:.2f} s "
              f"({result.written / result.duration_s:,.0f}/s)\n")
        pstats.Stats(profile).sort_stats("tottime").print_stats(15)


def _profile_on_counter(records: int, size: int) -> None:
    from bench.pubsub_counter import running_counter
    from connectors.cloud_pubsub.clients import PubSubConnection
    from connectors.cloud_pubsub_source.write import SourceTask
    from connectors.kafka.admin import KafkaAdmin
    from connectors.kafka.connection import KafkaConnection

    with bench_stack(), running_counter() as counter:
        admin = KafkaAdmin(KafkaConnection(os.environ["KAFKA_BOOTSTRAP_SERVERS"]))

        def pull_task(profile: cProfile.Profile | None) -> tuple[int, float, float]:
            """(messages moved, seconds, CPU seconds) of one pull task over a freshly preloaded subscription."""
            name = unique_name("profile-source-counter")
            counter.preload(f"projects/bench/subscriptions/{name}", records, size)
            kafka_topic(name, 4)
            task = SourceTask(_config(name), PubSubConnection(emulator_host=counter.endpoint),
                              admin.connection.librdkafka_config(), records)
            body = _task_body(task, admin, "profile_source")
            started, cpu_started = time.monotonic(), time.process_time()
            if profile is not None:
                profile.enable()
            [summary] = body(iter([pa.RecordBatch.from_pydict({"slot": [0]})]))
            if profile is not None:
                profile.disable()
            return (sum(summary.column("written").to_pylist()), time.monotonic() - started,
                    time.process_time() - cpu_started)

        pull_task(None)  # warm: imports, the producer kept for the next task
        print(f"{records:,} messages of {size} B from the counting endpoint, one pull task alone in this process")
        for round_no in range(3):
            moved, seconds, cpu_s = pull_task(None)
            print(f"- {moved:,} in {seconds:.2f} s ({moved / seconds:,.0f}/s), {cpu_s * 100_000 / moved:.2f} CPU s "
                  "per 100k (this process: the task and librdkafka's threads)")
        profile = cProfile.Profile()
        moved, seconds, _ = pull_task(profile)
        print(f"- under cProfile: {moved:,} in {seconds:.2f} s\n")
        pstats.Stats(profile).sort_stats("tottime").print_stats(25)


if __name__ == "__main__":
    main()
