"""What exactly once costs: the Lite source moving the same Lite messages into Kafka at least once (the default)
and with exactly.once.support=required, side by side on the warm engine (Spark Connect), alternating rounds so
neither mode always runs on the warmer machine. Each read is one bridge's batch through a new Lite subscription of
the topic (from its first message); the exactly-once bridge keeps its name, so its tasks find their transactional
producers kept from the round before, as a bridge's batches do. `python -m bench.exactly_once`; issue #33's target
is a cost of at most 15 % of throughput."""

from __future__ import annotations

import argparse
import os
import statistics

MODES = {"at least once": {}, "exactly once": {"exactly.once.support": "required"}}
PARTITIONS = 4


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    from bench.common import bench_stack, warm_engine
    from bench.data import kafka_topic, lite_connection, lite_topic, publish_lite, unique_name
    from bench.process_memory import tree_cpu_seconds
    from connectors.bridge import BatchSettings
    from connectors.kafka.admin import KafkaAdmin
    from connectors.kafka.connection import KafkaConnection
    from connectors.pubsublite_source.batch import run_lite_source_batch
    from connectors.pubsublite_source.config import PubSubLiteSourceConfig
    from connectors.pubsublite.clients import subscription_path
    from google.cloud.pubsublite import Subscription
    from google.cloud.pubsublite.types import BacklogLocation

    DELIVER_IMMEDIATELY = Subscription.DeliveryConfig.DeliveryRequirement.DELIVER_IMMEDIATELY

    with bench_stack() as stack:
        spark, _ = warm_engine("connect", stack.env()["BRIDGE_SPARK_REMOTE"])
        server = {s.name: s.pid for s in stack.status()}["spark"]
        admin = KafkaAdmin(KafkaConnection(os.environ["KAFKA_BOOTSTRAP_SERVERS"]))
        topic, _ = lite_topic(unique_name("eos-bench"), PARTITIONS)
        publish_lite(topic, args.records, args.size)
        lite_admin = lite_connection().admin(topic.location.region)

        def run(keys: dict) -> tuple[float, float]:
            """Records per second and CPU seconds (this process and the engine's) for one whole read."""
            subscription = subscription_path("bench", str(topic.location), unique_name("eos-read"))
            lite_admin.create_subscription(Subscription(name=str(subscription), topic=str(topic), delivery_config=(
                Subscription.DeliveryConfig(delivery_requirement=DELIVER_IMMEDIATELY))), BacklogLocation.BEGINNING)
            config = PubSubLiteSourceConfig.model_validate({
                "pubsublite.project": "bench", "pubsublite.location": str(subscription.location),
                "pubsublite.subscription": subscription.name,
                "kafka.topic": kafka_topic(unique_name("eos-back"), PARTITIONS), **keys})
            cpu = tree_cpu_seconds(os.getpid(), server)
            result = run_lite_source_batch(spark, config, lite_connection(), admin, {},
                                           BatchSettings(max_records=args.records), "eos_bench")
            assert result.messages == args.records, result.messages
            return result.records_per_second, tree_cpu_seconds(os.getpid(), server) - cpu

        for keys in MODES.values():  # untimed: imports and first producers on the engine's workers
            run(keys)
        measured: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
        for round_ in range(args.rounds):
            for mode in (MODES if round_ % 2 == 0 else reversed(MODES)):
                measured[mode].append(run(MODES[mode]))
                rate, cpu = measured[mode][-1]
                print(f"round {round_ + 1} {mode:14} {rate:10,.0f} records/s  {cpu:6.2f} CPU s", flush=True)

    rates = {mode: statistics.median(r for r, _ in rows) for mode, rows in measured.items()}
    cpus = {mode: statistics.median(c for _, c in rows) for mode, rows in measured.items()}
    print(f"\n| mode | records/s (median of {args.rounds}) | CPU s | runs |\n|---|---:|---:|---|")
    for mode, rows in measured.items():
        print(f"| {mode} | {rates[mode]:,.0f} | {cpus[mode]:.2f} | "
              f"{', '.join(f'{r:,.0f}' for r, _ in rows)} |")
    cost = 1 - rates["exactly once"] / rates["at least once"]
    print(f"\nexactly once costs {cost:.0%} of throughput ({args.records:,} messages of {args.size} B, "
          f"{PARTITIONS} Lite partitions; target: at most 15 %)")


if __name__ == "__main__":
    main()
