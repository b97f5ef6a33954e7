"""What exactly once costs: a connector moving the same records into Kafka at least once (the default) and with
exactly.once.support=required, side by side on the warm engine (Spark Connect), alternating rounds so neither mode
always runs on the warmer machine. Each mode keeps one bridge name across rounds, so the exactly-once tasks find
their transactional producers kept from the round before, as a bridge's batches do.

- lite: the Lite source reads the topic's messages through a new Lite subscription each round.
- cloud: the Cloud Pub/Sub source pulls a new topic's messages each round (pstest restarted first: its Pull scans
  everything it ever kept).
- kafka: the Kafka sink copies the records produced to its source topic that round to the target cluster.

`python -m bench.exactly_once [--connector lite,cloud,kafka]`; the target is a cost of at most 15 % of throughput."""

from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path
from typing import Callable

MODES = {"at least once": {}, "exactly once": {"exactly.once.support": "required"}}
PARTITIONS = 4
RESULTS = Path(__file__).with_name("exactly_once.json")
CONNECTORS = {"lite": "PubSubLiteSourceConnector", "cloud": "CloudPubSubSourceConnector", "kafka": "KafkaSinkConnector"}
# (mode, keys) -> the read, set up (topics made, messages published) and not yet run; it returns records per second
Reader = Callable[[str, dict], Callable[[], float]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connector", default="lite,cloud,kafka",
                        help="comma list of lite, cloud, kafka (default: all three)")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    from bench.common import bench_stack, stack_services, warm_engine, write_results
    from bench.process_memory import TreeCpu

    readers = {"lite": _lite_reader, "cloud": _cloud_reader, "kafka": _kafka_reader}
    chosen = [name.strip() for name in args.connector.split(",")]
    unknown = [name for name in chosen if name not in readers]
    if unknown:
        parser.error(f"unknown --connector {', '.join(unknown)}: choose from {', '.join(readers)}")
    summary = []
    with bench_stack() as stack:
        spark, _ = warm_engine("connect", stack.env()["BRIDGE_SPARK_REMOTE"])
        server = {s.name: s.pid for s in stack.status()}["spark"]
        services = stack_services(stack)
        for name in chosen:
            read = readers[name](spark, args.records, args.size)

            def run(mode: str) -> tuple[float, float]:
                go = read(mode, MODES[mode])
                with TreeCpu(os.getpid(), server, excluded=services) as cpu:
                    rate = go()
                    return rate, cpu.seconds()

            for mode in MODES:  # untimed: imports and first producers on the engine's workers
                run(mode)
            measured: dict[str, list[tuple[float, float]]] = {mode: [] for mode in MODES}
            for round_ in range(args.rounds):
                for mode in (MODES if round_ % 2 == 0 else reversed(MODES)):
                    measured[mode].append(run(mode))
                    rate, cpu = measured[mode][-1]
                    print(f"{name} round {round_ + 1} {mode:14} {rate:10,.0f} records/s  {cpu:6.2f} CPU s", flush=True)
            summary.append((name, measured))

    results = {"records": args.records, "size": args.size, "partitions": PARTITIONS, "rounds": args.rounds,
               "rows": {name: {mode: [{"records_per_s": round(rate), "cpu_s": round(cpu, 2)} for rate, cpu in rows]
                               for mode, rows in measured.items()} for name, measured in summary}}
    write_results(RESULTS, results)
    print(render(results))


def render(results: dict) -> str:
    """Per connector: each mode's records/s and CPU seconds, medians (min-max) of the rounds, and what exactly once
    costs (1 - the ratio of the medians; the target: at most 15 %)."""
    lines = [f"{results['records']:,} records of {results['size']:,} B, {results['partitions']} partitions, one "
             f"micro-batch on the warm engine, {results['rounds']} rounds with the modes alternating. Medians "
             "(min-max).", "", "| connector | mode | records/s | CPU s | exactly once costs |", "| --- | --- | --- | --- | --- |"]
    for key, modes in results["rows"].items():
        name = CONNECTORS.get(key, key)
        rates = {mode: [row["records_per_s"] for row in rows] for mode, rows in modes.items()}
        cost = 1 - statistics.median(rates["exactly once"]) / statistics.median(rates["at least once"])
        for mode, rows in modes.items():
            cpus = [row["cpu_s"] for row in rows]
            lines.append(f"| {name} | {mode} | {statistics.median(rates[mode]):,.0f} ({min(rates[mode]):,}-"
                         f"{max(rates[mode]):,}) | {statistics.median(cpus):.2f} ({min(cpus):.2f}-{max(cpus):.2f}) | "
                         + (f"{cost:.1%}" if mode == "exactly once" else "") + " |")
    return "\n".join(lines) + "\n"


def _lite_reader(spark, records: int, size: int) -> Reader:
    from bench.data import kafka_topic, lite_connection, lite_topic, publish_lite, unique_name
    from connectors.bridge import BatchSettings
    from connectors.pubsublite.clients import subscription_path
    from connectors.pubsublite_source.batch import run_lite_source_batch
    from connectors.pubsublite_source.config import PubSubLiteSourceConfig
    from google.cloud.pubsublite import Subscription
    from google.cloud.pubsublite.types import BacklogLocation

    deliver_immediately = Subscription.DeliveryConfig.DeliveryRequirement.DELIVER_IMMEDIATELY
    topic, _ = lite_topic(unique_name("eos-bench"), PARTITIONS)
    publish_lite(topic, records, size)
    lite_admin = lite_connection().admin(topic.location.region)

    def read(mode: str, keys: dict) -> Callable[[], float]:
        subscription = subscription_path("bench", str(topic.location), unique_name("eos-read"))
        lite_admin.create_subscription(Subscription(name=str(subscription), topic=str(topic), delivery_config=(
            Subscription.DeliveryConfig(delivery_requirement=deliver_immediately))), BacklogLocation.BEGINNING)
        config = PubSubLiteSourceConfig.model_validate({
            "pubsublite.project": "bench", "pubsublite.location": str(subscription.location),
            "pubsublite.subscription": subscription.name,
            "kafka.topic": kafka_topic(unique_name("eos-back"), PARTITIONS), **keys})

        def go() -> float:
            result = run_lite_source_batch(spark, config, lite_connection(), _admin(), {},
                                           BatchSettings(max_records=records), _bridge("lite", mode),
                                           f"connect-{_bridge('lite', mode)}")
            assert result.messages == records, result.messages
            return result.records_per_second
        return go

    return read


def _cloud_reader(spark, records: int, size: int) -> Reader:
    from bench.common import fresh_pubsub
    from bench.data import kafka_topic, publish_pubsub, pubsub_topic, unique_name
    from connectors.bridge import BatchSettings
    from connectors.cloud_pubsub.clients import PubSubConnection
    from connectors.cloud_pubsub_source.batch import run_source_batch
    from connectors.cloud_pubsub_source.config import CloudPubSubSourceConfig

    def read(mode: str, keys: dict) -> Callable[[], float]:
        fresh_pubsub()
        name = unique_name("eos-cps")
        topic, _ = pubsub_topic(name)
        publish_pubsub(topic, records, size)
        config = CloudPubSubSourceConfig.model_validate({
            "cps.project": "bench", "cps.subscription": name, "kafka.partition.count": PARTITIONS,
            "kafka.topic": kafka_topic(unique_name("eos-back"), PARTITIONS), **keys})
        connection = PubSubConnection(emulator_host=os.environ["PUBSUB_EMULATOR_HOST"])

        def go() -> float:
            result = run_source_batch(spark, config, connection, _admin(), BatchSettings(max_records=records),
                                      _bridge("cloud", mode), f"connect-{_bridge('cloud', mode)}")
            assert result.written == records, result.written
            return result.records_per_second
        return go

    return read


def _kafka_reader(spark, records: int, size: int) -> Reader:
    from bench.data import kafka_topic, produce, unique_name
    from connectors.bridge import BatchSettings
    from connectors.kafka_sink.plugin import run_replica_batch
    from connectors.kafka_sink.config import KafkaSinkConfig

    source = kafka_topic(unique_name("eos-repl"), PARTITIONS)

    def read(mode: str, keys: dict) -> Callable[[], float]:
        admin = _admin()
        before = admin.end_offsets(admin.partitions([source]))
        produce(source, records, size)
        config = KafkaSinkConfig.model_validate({
            "topics": source, "target.bootstrap.servers": os.environ["KAFKA_TARGET_BOOTSTRAP_SERVERS"],
            "topic.rename.format": f"{mode.replace(' ', '-')}.${{topic}}", **keys})
        bridge = _bridge("kafka", mode)

        def go() -> float:
            result = run_replica_batch(spark, bridge, config, admin, before, BatchSettings(max_records=records),
                                       f"connect-{bridge}")
            assert result.batch.totals["records"] == records, result.batch.totals
            return result.batch.records_per_second
        return go

    return read


def _bridge(connector: str, mode: str) -> str:
    return f"eos_bench_{connector}_{mode.replace(' ', '_')}"


def _admin():
    from connectors.kafka.admin import KafkaAdmin
    from connectors.kafka.connection import KafkaConnection

    return KafkaAdmin(KafkaConnection(os.environ["KAFKA_BOOTSTRAP_SERVERS"]))


if __name__ == "__main__":
    main()
