"""Each connector's micro-batch throughput on one engine, in a process of its own.

Classic and Spark Connect sessions cannot share a process (Connect switches pyspark into remote mode
for the whole process), so `python -m bench` runs this once per engine against its stack:
    python -m bench.throughput --engine classic|connect --out rows.json
Every row is one micro-batch (records read at the start, delivered and acknowledged at the end),
timed from plan to last acknowledgement; data is prepared before the clock starts. Before the rows,
each connector moves one untimed batch (see warm_up); those first batches are reported apart.
"""

from __future__ import annotations

import argparse
import json
import os
from collections import Counter
from dataclasses import asdict, dataclass, field

from bench.common import attached_stack, fresh_pubsub, run_sink_batch, warm_engine
from bench.data import (
    kafka_topic, lite_connection, lite_topic, produce_avro, publish_pubsub, pubsub_topic, unique_name,
)
from bench.process_memory import PeakMemory, TreeCpu, is_jvm
from bench.pubsub_counter import PubSubCounter

PARTITIONS = 4
# String keys, as the Java reference rows read them (bench.java_reference).
STRING_KEYS = {"key.converter": "org.apache.kafka.connect.storage.StringConverter"}
CLOUD_SINK_SETTINGS = {"seed defaults": STRING_KEYS,
                       "tuned": {**STRING_KEYS, "maxBufferSize": 1000, "maxDelayThresholdMs": 20}}
CLOUD_SOURCE_SETTINGS = {"seed defaults": {}, "tuned": {"cps.maxBatchSize": 1000}}
# The Schema Registry row: Avro values (fields as attributes, the memo as body) against ByteArray's seed row.
AVRO_SINK_SETTINGS = {**STRING_KEYS, "value.converter": "io.confluent.connect.avro.AvroConverter",
                      "messageBodyName": "memo"}
AVRO_LABEL = "Avro (Schema Registry), seed defaults"
LITE_SINK_SETTINGS = {"seed defaults": {}, "ordering mode KAFKA": {"pubsublite.ordering.mode": "KAFKA"}}
WARM_UP_RECORDS = 2_000
CONNECTORS = frozenset({"CloudPubSubSinkConnector", "PubSubLiteSinkConnector", "S3BlockGzipSinkConnector",
                        "CloudPubSubSourceConnector", "PubSubLiteSourceConnector"})
ARCHIVE_SETTINGS = {"seed defaults (64 MiB blocks)": {}, "1 MiB blocks": {"compressed_block_size": 1 << 20}}
# The Cloud Pub/Sub sink's and source's settings labels measured (--settings): every one unless a bench asks for fewer.
settings_wanted: frozenset[str] | None = None
# --counter-stats-url: the Cloud source's messages are preloaded into the counting Pub/Sub endpoint
# (bench.pubsub_counter, which PUBSUB_EMULATOR_HOST then names) instead of published to pstest.
pubsub_counter: PubSubCounter | None = None


def _wanted(label: str) -> bool:
    return settings_wanted is None or label in settings_wanted


@dataclass
class Row:
    connector: str
    engine: str
    size: int
    settings: str
    records: int
    seconds: float
    peak_mb: float
    cpu_s: float  # user+sys of this process tree and, on Connect, the server's (JVM and Python workers)
    # On Connect: the server's resident memory when the row started (its JVM and Python workers, grown by earlier
    # rows); peak_mb - engine_at_start_mb is the run process plus what the server grew by for this run.
    engine_at_start_mb: float
    # cpu_s split by process: this run process, the engine's JVM, the engine's Python workers (`other`: exited ones)
    cpu_split: dict[str, float] = field(default_factory=dict)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--engine", choices=("classic", "connect"), required=True)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--source-records", type=int, default=10_000,
                        help="Cloud Pub/Sub source: pstest's Pull scans the whole backlog per call")
    parser.add_argument("--sizes", default="100,1024")
    parser.add_argument("--out", required=True)
    parser.add_argument("--only", default="", help="a comma list of connectors to measure (default: every one)")
    parser.add_argument("--settings", default="",
                        help="a comma list of the Cloud Pub/Sub sink's and source's settings labels to measure "
                             "(default: every one)")
    parser.add_argument("--counter-stats-url", default="",
                        help="the counting Pub/Sub endpoint's stats URL (PUBSUB_EMULATOR_HOST names it): the Cloud "
                             "source reads messages preloaded there, and no row restarts pstest")
    args = parser.parse_args()
    only = frozenset(filter(None, args.only.split(",")))
    global settings_wanted, pubsub_counter
    settings_wanted = frozenset(filter(None, args.settings.split(","))) or None
    if args.counter_stats_url:
        pubsub_counter = PubSubCounter(os.environ["PUBSUB_EMULATOR_HOST"], args.counter_stats_url)

    from connectors.bridge import BatchSettings
    from connectors.kafka.admin import KafkaAdmin
    from connectors.kafka.connection import KafkaConnection

    stack = attached_stack()
    servers = {s.name: s.pid for s in stack.status()}
    remote = stack.env()["BRIDGE_SPARK_REMOTE"]
    spark, start_s = warm_engine(args.engine, remote)
    # On Connect the work happens in the server: its process tree counts as the run's memory. (The
    # other servers are not this process's descendants: the parent started them.)
    also = (servers["spark"],) if args.engine == "connect" else ()
    admin = KafkaAdmin(KafkaConnection(os.environ["KAFKA_BOOTSTRAP_SERVERS"]))
    rows: list[Row] = []

    def measure(connector: str, size: int, settings: str, run) -> None:
        with TreeCpu(os.getpid(), *also) as tree_cpu, PeakMemory(also=also) as memory:
            records, seconds = run()
            cpu = tree_cpu.seconds()
            split = Counter()
            for pid, used in tree_cpu.by_process().items():
                split[_process_kind(pid)] += used
        rows.append(Row(connector, args.engine, size, settings, records, round(seconds, 3), round(memory.peak / 1e6),
                        round(cpu, 2), round(memory.also_at_start / 1e6),
                        {kind: round(used, 2) for kind, used in split.items()}))
        print(f"{connector:28} {args.engine:8} {size:5} B  {settings:32} {records:>8,} in {seconds:6.1f} s",
              flush=True)

    first_batches = warm_up(spark, admin, args.records, only)
    batch = BatchSettings(max_records=args.records, initial_offsets="earliest")
    for size in [int(s) for s in args.sizes.split(",")]:
        source_topic = kafka_topic(unique_name(f"bench-{size}"), PARTITIONS, args.records, size)
        _each(only, measure, spark, admin, source_topic, size, batch, args.source_records, args.records)
    with open(args.out, "w") as out:
        json.dump({"engine": args.engine, "session_start_s": round(start_s, 2), "first_batches": first_batches,
                   "rows": [asdict(r) for r in rows]}, out, indent=1)


def _process_kind(pid: int) -> str:
    if pid == os.getpid():
        return "run process"
    try:
        return "engine JVM" if is_jvm(pid) else "Python workers"
    except OSError:
        return "other"


def _each(only, measure, spark, admin, topic, size, batch, source_records, lite_records) -> None:
    """Every connector's rows (those in `only`, when it names any); the Lite source reads what the Lite sink
    published, so it brings the Lite sink's rows with it."""
    def wanted(*connectors: str) -> bool:
        return not only or any(c in only for c in connectors)

    if wanted("CloudPubSubSinkConnector"):
        _cloud_sink(measure, spark, admin, topic, size, batch)
        if size >= 1024 and _wanted(AVRO_LABEL):
            _cloud_sink_avro(measure, spark, admin, size, batch)
    if wanted("PubSubLiteSinkConnector", "PubSubLiteSourceConnector"):
        lite_subscription = _lite_sink(measure, spark, admin, topic, size, batch)
    if wanted("S3BlockGzipSinkConnector"):
        _archive(measure, spark, admin, topic, size, batch)
    if wanted("CloudPubSubSourceConnector"):
        _cloud_source(measure, spark, admin, size, source_records)
    if wanted("PubSubLiteSourceConnector"):
        _lite_source(measure, spark, admin, lite_subscription, size, lite_records)


def warm_up(spark, admin, records: int, only: frozenset[str] = frozenset()) -> list[dict]:
    """One batch of each connector (and each setting) before the rows, untimed there: the seconds of each.

    Why: a connector's first batch on an engine also imports its code into the Python workers and opens
    their Kafka consumers, and the engine's JVM compiles its per-job path over the first jobs (measured, when
    Spark's JVM Kafka reader was in use: the same 100k-record row at 30k/s first, 44k/s from the third). A
    warm engine in the sensor-driven mode has paid for these in its first runs. So the Cloud Pub/Sub sink (the
    first row) first moves `records` records, and every other connector a small batch; the Java rows are
    given both on a new worker and on a warm one."""
    from connectors.bridge import BatchSettings

    first: list[dict] = []

    def record(connector: str, size: int, settings: str, run) -> None:
        moved, seconds = run()
        first.append({"connector": connector, "settings": settings, "records": moved, "seconds": round(seconds, 2)})
        print(f"{connector:28} first batch  {settings:32} {moved:>8,} in {seconds:6.1f} s", flush=True)

    size, small = 100, BatchSettings(max_records=WARM_UP_RECORDS, initial_offsets="earliest")
    topic = kafka_topic(unique_name("warm-up"), PARTITIONS, records, size)
    if not only or "CloudPubSubSinkConnector" in only:
        _cloud_sink(record, spark, admin, topic, size, BatchSettings(max_records=records, initial_offsets="earliest"))
        if _wanted(AVRO_LABEL):
            _cloud_sink_avro(record, spark, admin, 1024, small)
    rest = (only or CONNECTORS) - {"CloudPubSubSinkConnector"}  # warmed up with a whole batch above
    if rest:
        _each(rest, record, spark, admin, topic, size, small, WARM_UP_RECORDS, WARM_UP_RECORDS)
    return first


def _cloud_sink(measure, spark, admin, topic, size, batch):
    from connectors.cloud_pubsub.clients import PubSubConnection
    from connectors.cloud_pubsub_sink.write import pubsub_writer
    from connectors.cloud_pubsub_sink.config import CloudPubSubSinkConfig

    connection = PubSubConnection(emulator_host=os.environ["PUBSUB_EMULATOR_HOST"])
    for label, keys in CLOUD_SINK_SETTINGS.items():
        if not _wanted(label):
            continue
        if pubsub_counter is None:  # the counting endpoint keeps nothing: no emulator to start afresh
            fresh_pubsub()
        destination = unique_name("cps-sink")
        pubsub_topic(destination, subscribe=False)
        config = CloudPubSubSinkConfig.model_validate(
            {"topics": topic, "cps.project": "bench", "cps.topic": destination, **keys})

        def run():
            # A fresh group each run: a batch's delivered commits (BatchProgress) would start the next past them.
            result = run_sink_batch(spark, config, admin, batch, pubsub_writer(config, connection, 30),
                                    unique_name("connect-bench"))
            assert result.totals["published"] == batch.max_records, result.totals
            return result.totals["published"], result.duration_s

        measure("CloudPubSubSinkConnector", size, label, run)


def _cloud_sink_avro(measure, spark, admin, size, batch):
    from connectors.cloud_pubsub.clients import PubSubConnection
    from connectors.cloud_pubsub_sink.write import pubsub_writer
    from connectors.cloud_pubsub_sink.config import CloudPubSubSinkConfig

    topic = kafka_topic(unique_name(f"bench-avro-{size}"), PARTITIONS)
    produce_avro(topic, batch.max_records, size)
    fresh_pubsub()
    destination = unique_name("cps-sink-avro")
    pubsub_topic(destination, subscribe=False)
    config = CloudPubSubSinkConfig.model_validate({
        "topics": topic, "cps.project": "bench", "cps.topic": destination, **AVRO_SINK_SETTINGS,
        "value.converter.schema.registry.url": os.environ["SCHEMA_REGISTRY_URL"]})

    def run():
        result = run_sink_batch(spark, config, admin, batch, pubsub_writer(config, connection, 30),
                                unique_name("connect-bench"))
        assert result.totals["published"] == batch.max_records, result.totals
        return result.totals["published"], result.duration_s

    connection = PubSubConnection(emulator_host=os.environ["PUBSUB_EMULATOR_HOST"])
    measure("CloudPubSubSinkConnector", size, AVRO_LABEL, run)


def _lite_sink(measure, spark, admin, topic, size, batch):
    from connectors.pubsublite_sink.write import lite_writer
    from connectors.pubsublite_sink.config import PubSubLiteSinkConfig

    for label, keys in LITE_SINK_SETTINGS.items():
        name = unique_name("lite-sink")
        _, subscription = lite_topic(name, PARTITIONS)
        config = PubSubLiteSinkConfig.model_validate({
            "topics": topic, "pubsublite.project": "bench", "pubsublite.location": str(subscription.location),
            "pubsublite.topic": name, **keys})

        def run():
            result = run_sink_batch(spark, config, admin, batch, lite_writer(config, lite_connection(), admin, 30),
                                    unique_name("connect-bench"))
            assert result.totals["published"] == batch.max_records, result.totals
            return result.totals["published"], result.duration_s

        measure("PubSubLiteSinkConnector", size, label, run)
    return subscription  # holds what the last sink row published: the Lite source reads it


def _archive(measure, spark, admin, topic, size, batch):
    import boto3

    from connectors.s3_block_gzip_sink.batch import run_archive_batch
    from connectors.s3_block_gzip_sink.config import S3BlockGzipSinkConfig

    for label, keys in ARCHIVE_SETTINGS.items():
        bucket = unique_name("archive")
        boto3.client("s3").create_bucket(Bucket=bucket)
        config = S3BlockGzipSinkConfig.model_validate({"topics": topic, "s3.bucket": bucket, "s3.path_style": True,
                                                       **keys})

        def run():
            result = run_archive_batch(spark, config, admin, batch, unique_name("archive-group"), "bench-archive")
            assert result.totals["records"] == batch.max_records, result.totals
            return result.totals["records"], result.duration_s

        measure("S3BlockGzipSinkConnector", size, label, run)


def _cloud_source(measure, spark, admin, size, count):
    from connectors.cloud_pubsub.clients import PubSubConnection
    from connectors.cloud_pubsub_source.batch import run_source_batch
    from connectors.cloud_pubsub_source.config import CloudPubSubSourceConfig
    from connectors.bridge import BatchSettings

    connection = PubSubConnection(emulator_host=os.environ["PUBSUB_EMULATOR_HOST"])
    for label, keys in CLOUD_SOURCE_SETTINGS.items():
        if not _wanted(label):
            continue
        name = unique_name("cps-source")
        if pubsub_counter is not None:
            pubsub_counter.preload(f"projects/bench/subscriptions/{name}", count, size)
        else:
            fresh_pubsub()
            topic, _ = pubsub_topic(name)
            publish_pubsub(topic, count, size)
        kafka_topic(name, PARTITIONS)
        config = CloudPubSubSourceConfig.model_validate(
            {"cps.project": "bench", "cps.subscription": name, "kafka.topic": name, **keys})

        def run():
            result = run_source_batch(spark, config, connection, admin, BatchSettings(max_records=count), name,
                                      f"connect-{name}")
            return result.written, result.duration_s

        measure("CloudPubSubSourceConnector", size, label, run)


def _lite_source(measure, spark, admin, subscription, size, count):
    from connectors.bridge import BatchSettings
    from connectors.pubsublite_source.batch import run_lite_source_batch
    from connectors.pubsublite_source.config import PubSubLiteSourceConfig

    back = kafka_topic(unique_name("lite-back"), PARTITIONS)
    config = PubSubLiteSourceConfig.model_validate({
        "pubsublite.project": "bench", "pubsublite.location": str(subscription.location),
        "pubsublite.subscription": subscription.name, "kafka.topic": back})

    def run():
        result = run_lite_source_batch(spark, config, lite_connection(), admin, {}, BatchSettings(max_records=count),
                                       "bench", "connect-bench")
        assert result.messages == count, result.messages
        return result.messages, result.duration_s

    measure("PubSubLiteSourceConnector", size, "seed defaults", run)


if __name__ == "__main__":
    main()
