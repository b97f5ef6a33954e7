"""Continuous mode, as users run it: one `dagster job execute -j <bridge>_job` of a `mode: continuous` bridge on the
warm engine, while a steady producer writes timestamped records (the value is the send time). Latency is
send -> arrival: Pub/Sub pull time (Cloud sink), the Lite server's publish time (Lite sink), moto's arrival
timestamp (Kinesis sink), the Pulsar broker's publish time (Pulsar sink), the S3 cursor object passing the record's
offset (archive), the Kafka broker's LogAppendTime (both sources). Then the bridge idles: CPU of the run's process
tree and of the engine's over 20 s, as % of one core.

The Java connector (seed defaults, tasks.max=2) runs the Cloud sink's and the Cloud source's rows' harness beside
them. The Cloud sink rows, the Kinesis and Pulsar rows and both source rows first move WARM_UP_RECORDS that are not measured: the fair
reference is a warm worker, and ours is measured warm too.

    python -m bench.continuous [--seconds 120] [--rate 1000]   (a stack of its own, like python -m bench)
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import contextlib
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Callable, Iterator

import yaml

from bench.common import BENCH_STACK_HOME, bench_stack, fresh_pubsub, median_spread, write_results
from bench.data import LITE_LOCATION, PROJECT, kafka_topic, lite_connection, lite_topic, pubsub_topic, unique_name
from bench.process_memory import TreeCpu
from local_stack.paths import PROJECT_ROOT

PARTITIONS = 4
CONTINUOUS = {"trigger_interval_ms": 200, "commit_interval_ms": 5000, "max_run_minutes": 30, "host": None}  # own run
IDLE_SECONDS = 20
WARM_UP_RECORDS = 100
WARM_UP_VALUE = b"warm-up"


def continuous_log(name: str) -> Path:
    """Where continuous_run writes the output of bridge `name`'s run (kept for a look afterwards)."""
    return BENCH_STACK_HOME / f"continuous-{name}.log"


@contextmanager
def continuous_run(entry: dict, remote: str, settle_s: float = 3) -> Iterator[subprocess.Popen]:
    """The bridge in `mode: continuous`, run as a user runs it, until the block ends (then terminated); the block
    starts `settle_s` after the run says it is moving (its first, empty, batch)."""
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        work = Path(tmp)
        (work / "bridges.yaml").write_text(yaml.safe_dump({"bridges": [
            {**entry, "mode": "continuous", "continuous": {**CONTINUOUS, **entry.get("continuous", {})}}]}))
        home = work / "dagster_home"
        home.mkdir()
        shutil.copy(PROJECT_ROOT / "dagster_home" / "dagster.yaml", home / "dagster.yaml")
        env = {**os.environ, "BRIDGES_FILE": str(work / "bridges.yaml"), "DAGSTER_HOME": str(home),
               "BRIDGE_SPARK_REMOTE": remote}
        log = continuous_log(entry["name"])
        log.parent.mkdir(parents=True, exist_ok=True)
        run = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "dagster"), "job", "execute",
                                "-m", "bridge_assets", "-j", f"{entry['name']}_job"], env=env, cwd=PROJECT_ROOT,
                               stdout=open(log, "wb"), stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + 120
            while "always on: moving" not in log.read_text(errors="replace"):
                if run.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the continuous run did not start:\n{log.read_text()[-3000:]}")
                time.sleep(0.2)
            time.sleep(settle_s)
            yield run
        finally:
            os.killpg(run.pid, signal.SIGINT)
            try:
                run.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(run.pid, signal.SIGKILL)


def steady(send: Callable[[float], None], rate: float, seconds: float) -> int:
    """Calls send(now) `rate` times a second for `seconds`, in small bursts; returns how many. Each `now` is
    above the one before (records are told apart by it)."""
    sent, started, stamp = 0, time.time(), 0.0
    while (now := time.time()) - started < seconds:
        due = int((now - started) * rate)
        while sent < due:
            stamp = max(time.time(), math.nextafter(stamp, math.inf))
            send(stamp)
            sent += 1
        time.sleep(0.005)
    return sent


def kafka_producer(**extra):
    from confluent_kafka import Producer

    return Producer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "linger.ms": 5, "log_level": 3,
                     **extra})


def produce_steady(topic: str, rate: float, seconds: float, on_delivery=None) -> int:
    producer = kafka_producer()

    def send(now: float) -> None:
        producer.produce(topic, value=repr(now).encode(), on_delivery=on_delivery)
        producer.poll(0)

    sent = steady(send, rate, seconds)
    producer.flush(30)
    return sent


def produce_warm_up(topic: str) -> None:
    """WARM_UP_RECORDS (WARM_UP_VALUE, told apart from the measured ones) for a sink to move first."""
    producer = kafka_producer()
    for _ in range(WARM_UP_RECORDS):
        producer.produce(topic, value=WARM_UP_VALUE)
    producer.flush(30)


def summary(latencies: list[float], sent: int) -> dict:
    if len(latencies) < sent:
        raise RuntimeError(f"only {len(latencies)} of {sent} records arrived")
    cuts = statistics.quantiles(latencies, n=100)
    return {"records": sent, "p50_s": round(statistics.median(latencies), 3), "p99_s": round(cuts[98], 3),
            "max_s": round(max(latencies), 3)}


def idle_cpu(run_pid: int, engine_pid: int | None) -> dict:
    """% of one core used by the run's process tree and by the engine's while nothing moves."""
    time.sleep(8)  # the last commit and the run's settling
    pids = [run_pid] + ([engine_pid] if engine_pid else [])
    with contextlib.ExitStack() as trees:
        cpus = [trees.enter_context(TreeCpu(pid)) for pid in pids]
        time.sleep(IDLE_SECONDS)
        shares = [round(100 * cpu.seconds() / IDLE_SECONDS, 1) for cpu in cpus]
    return {"idle_run_cpu_pct": shares[0], "idle_engine_cpu_pct": shares[1] if engine_pid else None}


class PubSubArrivals(threading.Thread):
    """Pulls a subscription and records (pull time - send time in the message)."""

    def __init__(self, subscription: str):
        super().__init__(daemon=True)
        from google.cloud import pubsub_v1

        self.client, self.subscription = pubsub_v1.SubscriberClient(), subscription
        self.latencies: list[float] = []
        self.values: list[bytes] = []  # what arrived, in order (the send times, as sent)
        self.errors: list[str] = []  # pulls and acks that failed (and were tried again)
        self.halt = threading.Event()

    def run(self) -> None:
        from google.api_core.exceptions import GoogleAPICallError

        while not self.halt.is_set():
            try:
                response = self.client.pull(subscription=self.subscription, max_messages=1000,
                                            return_immediately=True, timeout=30)
                now = time.time()
                if response.received_messages:
                    self.client.acknowledge(subscription=self.subscription,
                                            ack_ids=[m.ack_id for m in response.received_messages], timeout=30)
            except GoogleAPICallError as exc:  # an emulator swamped for a moment: the measurement goes on
                self.errors.append(f"{type(exc).__name__}: {exc}"[:200])
                self.halt.wait(0.1)
                continue
            if not response.received_messages:
                self.halt.wait(0.02)
                continue
            values = [m.message.data for m in response.received_messages]
            self.latencies += [now - float(v.decode()) for v in values]
            self.values += values

    def warm_up(self, topic: str, timeout_s: float = 120) -> None:
        """WARM_UP_RECORDS through the bridge before the measured ones, then forgotten: ours and Java's are both
        measured warm, with their consumers assigned and their publishers connected, not from their start."""
        sent = produce_steady(topic, WARM_UP_RECORDS, 1.0)
        deadline = time.monotonic() + timeout_s
        while len(self.latencies) < sent:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the warm-up records did not arrive within {timeout_s} s")
            time.sleep(0.1)
        time.sleep(0.5)
        self.latencies.clear()
        self.values.clear()

    def wait_for(self, count: int, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.latencies) < count and time.monotonic() < deadline:
            time.sleep(0.2)
        self.halt.set()
        self.join(15)


def kafka_arrivals(topic: str, count: int, timeout_s: float = 120) -> list[float]:
    """LogAppendTime - send time, for the first `count` records of a topic."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": os.environ["KAFKA_BOOTSTRAP_SERVERS"], "group.id": unique_name("lat"),
                         "enable.auto.commit": False, "log_level": 3})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    latencies: list[float] = []
    deadline = time.monotonic() + timeout_s
    while len(latencies) < count and time.monotonic() < deadline:
        for message in consumer.consume(10_000, 1.0):
            if message.error() is None and message.value() != WARM_UP_VALUE:
                latencies.append(message.timestamp()[1] / 1000 - float(message.value().decode()))
    consumer.close()
    return latencies


def warm_up_source(send: Callable[[bytes], None], topic: str, timeout_s: float = 120) -> None:
    """WARM_UP_RECORDS through a source bridge before the measured ones (which kafka_arrivals tells apart): a
    source is measured warm, as the sinks are, not from its start."""
    from connectors.kafka.admin import KafkaAdmin
    from connectors.kafka.connection import KafkaConnection

    for _ in range(WARM_UP_RECORDS):
        send(WARM_UP_VALUE)
    admin, deadline = KafkaAdmin(KafkaConnection(os.environ["KAFKA_BOOTSTRAP_SERVERS"])), time.monotonic() + timeout_s
    while sum(admin.end_offsets({topic: list(range(PARTITIONS))}).get(topic, {}).values()) < WARM_UP_RECORDS:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the warm-up records did not arrive within {timeout_s} s")
        time.sleep(0.1)
    time.sleep(0.5)


def cloud_sink(remote: str, engine_pid: int, rate: float, seconds: float) -> dict:
    fresh_pubsub()
    topic = kafka_topic(unique_name("cont-cps"), PARTITIONS)
    _, subscription = pubsub_topic(topic)
    arrivals = PubSubArrivals(subscription)
    arrivals.start()
    entry = {"name": "cont_cloud_sink", "connector": "CloudPubSubSinkConnector", "batch": {"initial_offsets": "latest"},
             "config": {"topics": topic, "cps.project": PROJECT, "cps.topic": topic,
                        "value.converter": "org.apache.kafka.connect.storage.StringConverter"}}
    with continuous_run(entry, remote) as run:
        arrivals.warm_up(topic)
        sent = produce_steady(topic, rate, seconds)
        arrivals.wait_for(sent)
        return summary(arrivals.latencies, sent) | idle_cpu(run.pid, engine_pid)


@contextmanager
def java_worker(name: str, connector: dict[str, str], ready_line: str | None = None) -> Iterator[subprocess.Popen]:
    """The Java connector (1.3.3) in a Connect standalone worker running `connector`, once `ready_line` is in its log
    (or at once); stopped when the block ends."""
    from bench.java_reference import java_reference

    folder = BENCH_STACK_HOME / "java-continuous"
    shutil.rmtree(folder, ignore_errors=True)
    with java_reference(folder) as reference:
        worker, log, _ = reference.start_worker(unique_name(name), connector)
        try:
            deadline = time.monotonic() + 120
            while ready_line and ready_line not in log.read_text(errors="replace"):
                if worker.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the Java worker did not start:\n{log.read_text()[-3000:]}")
                time.sleep(0.2)
            yield worker
        finally:
            worker.terminate()
            worker.wait(30)


def java_cloud_sink_worker(topic: str) -> AbstractContextManager[subprocess.Popen]:
    """The Java sink (seed defaults, tasks.max=2) from `topic` to the Pub/Sub topic of the same name, once its
    partitions are assigned."""
    return java_worker("java-cont", {"connector.class": "com.google.pubsub.kafka.sink.CloudPubSubSinkConnector",
                                     "tasks.max": "2", "topics": topic, "cps.project": PROJECT, "cps.topic": topic},
                       "Adding newly assigned partitions")


def java_idle_cpu(worker: subprocess.Popen) -> dict:
    time.sleep(8)
    with TreeCpu(worker.pid) as cpu:
        time.sleep(IDLE_SECONDS)
        return {"idle_run_cpu_pct": round(100 * cpu.seconds() / IDLE_SECONDS, 1)}


def java_cloud_sink(rate: float, seconds: float) -> dict:
    """The same harness against the Java connector (seed defaults, tasks.max=2) in a Connect worker."""
    fresh_pubsub()
    topic = kafka_topic(unique_name("cont-java"), PARTITIONS)
    _, subscription = pubsub_topic(topic)
    with java_cloud_sink_worker(topic) as worker:
        arrivals = PubSubArrivals(subscription)
        arrivals.start()
        arrivals.warm_up(topic)
        sent = produce_steady(topic, rate, seconds)
        arrivals.wait_for(sent)
        return summary(arrivals.latencies, sent) | java_idle_cpu(worker)


def lite_sink(remote: str, engine_pid: int, rate: float, seconds: float) -> dict:
    from tests.e2e.lite_helpers import read_lite_partition

    topic = kafka_topic(unique_name("cont-lite"), PARTITIONS)
    lite, subscription = lite_topic(topic, PARTITIONS)
    entry = {"name": "cont_lite_sink", "connector": "PubSubLiteSinkConnector", "batch": {"initial_offsets": "latest"},
             "config": {"topics": topic, "pubsublite.project": PROJECT, "pubsublite.location": LITE_LOCATION,
                        "pubsublite.topic": topic}}
    with continuous_run(entry, remote) as run:
        sent = produce_steady(topic, rate, seconds)
        stats = lite_connection().topic_stats_service(lite.location.region)

        def heads() -> dict[int, int]:
            return {p: stats.compute_head_cursor(request={"topic": str(lite), "partition": p}).head_cursor.offset
                    for p in range(PARTITIONS)}

        deadline = time.monotonic() + 120
        while sum(heads().values()) < sent and time.monotonic() < deadline:
            time.sleep(0.5)
        idle = idle_cpu(run.pid, engine_pid)
    latencies = [m.publish_time.ToNanoseconds() / 1e9 - float(m.message.data.decode())
                 for p, n in heads().items() for m in read_lite_partition(subscription, p, n)]
    return summary(latencies, sent) | idle


def kinesis_sink(remote: str, engine_pid: int, rate: float, seconds: float) -> dict:
    """Send -> the record's ApproximateArrivalTimestamp (moto stamps it as it takes the PutRecords request)."""
    from tests.e2e.helpers import create_kinesis_stream, kinesis_records_by_shard

    topic = kafka_topic(unique_name("cont-kin"), PARTITIONS)
    create_kinesis_stream(topic, PARTITIONS)
    entry = {"name": "cont_kinesis_sink", "connector": "KinesisSinkConnector", "batch": {"initial_offsets": "latest"},
             "config": {"topics": topic, "kinesis.stream.name": topic}}

    def records() -> list[dict]:
        return [r for shard in kinesis_records_by_shard(topic).values() for r in shard]

    with continuous_run(entry, remote) as run:
        produce_warm_up(topic)
        deadline = time.monotonic() + 120
        while len(records()) < WARM_UP_RECORDS and time.monotonic() < deadline:
            time.sleep(0.5)
        sent = produce_steady(topic, rate, seconds)
        deadline = time.monotonic() + 120
        while len(found := records()) < WARM_UP_RECORDS + sent and time.monotonic() < deadline:
            time.sleep(2)
        idle = idle_cpu(run.pid, engine_pid)
    latencies = [r["ApproximateArrivalTimestamp"].timestamp() - float(r["Data"].decode()) for r in found
                 if r["Data"] != WARM_UP_VALUE]
    return summary(latencies, sent) | idle


def pulsar_sink(remote: str, engine_pid: int, rate: float, seconds: float) -> dict:
    """Send -> the message's publish time (the Pulsar broker's, as it takes the message)."""
    import logging

    import pulsar

    topic = kafka_topic(unique_name("cont-pls"), PARTITIONS)
    logger = logging.getLogger("bench-pulsar")
    logger.setLevel(logging.WARNING)
    client = pulsar.Client(os.environ["PULSAR_SERVICE_URL"], logger=logger)
    consumer = client.subscribe(f"persistent://public/default/{topic}", "bench",
                                initial_position=pulsar.InitialPosition.Earliest)
    entry = {"name": "cont_pulsar_sink", "connector": "PulsarSinkConnector", "batch": {"initial_offsets": "latest"},
             "config": {"topics": topic, "pulsar.service.url": os.environ["PULSAR_SERVICE_URL"]}}
    latencies: list[float] = []
    try:
        with continuous_run(entry, remote) as run:
            produce_warm_up(topic)
            for _ in range(WARM_UP_RECORDS):
                consumer.receive(timeout_millis=120_000)
            sent = produce_steady(topic, rate, seconds)
            deadline = time.monotonic() + 120
            while len(latencies) < sent and time.monotonic() < deadline:
                try:
                    message = consumer.receive(timeout_millis=1000)
                except pulsar.Timeout:
                    continue
                latencies.append(message.publish_timestamp() / 1000 - float(message.data().decode()))
            idle = idle_cpu(run.pid, engine_pid)
    finally:
        client.close()
    return summary(latencies, sent) | idle


def archive(remote: str, engine_pid: int, rate: float, seconds: float) -> dict:
    import boto3

    from connectors.s3_block_gzip_sink.layout import cursor_key

    topic = kafka_topic(unique_name("cont-arch"), PARTITIONS)
    bucket = unique_name("cont-arch")
    s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"])
    s3.create_bucket(Bucket=bucket)
    entry = {"name": "cont_archive", "connector": "S3BlockGzipSinkConnector", "batch": {"initial_offsets": "latest"},
             "config": {"topics": topic, "s3.bucket": bucket, "s3.prefix": "c", "s3.path_style": True,
                        "value.converter": "org.apache.kafka.connect.storage.StringConverter"}}
    sent_at: dict[tuple[int, int], float] = {}
    seen: list[tuple[float, int, int]] = []  # (time, partition, next_offset) as the cursor objects move
    halt = threading.Event()

    def watch_cursors() -> None:
        while not halt.is_set():
            for p in range(PARTITIONS):
                try:
                    doc = json.loads(s3.get_object(Bucket=bucket, Key=cursor_key("c", topic, p))["Body"].read())
                    seen.append((time.time(), p, int(doc["next_offset"])))
                except s3.exceptions.NoSuchKey:
                    pass
            halt.wait(0.05)

    def delivered(err, message) -> None:
        sent_at[(message.partition(), message.offset())] = float(message.value().decode())

    with continuous_run(entry, remote) as run:
        watcher = threading.Thread(target=watch_cursors, daemon=True)
        watcher.start()
        sent = produce_steady(topic, rate, seconds, on_delivery=delivered)
        deadline = time.monotonic() + 120
        ends = {}
        while time.monotonic() < deadline:
            ends = {p: max((o for _, q, o in seen if q == p), default=0) for p in range(PARTITIONS)}
            if all(ends[p] > max((o for q, o in sent_at if q == p), default=-1) for p in range(PARTITIONS)):
                break
            time.sleep(0.5)
        halt.set()
        watcher.join(5)
        idle = idle_cpu(run.pid, engine_pid)
    latencies = []
    for (p, offset), at in sent_at.items():
        arrival = next(t for t, q, o in seen if q == p and o > offset)
        latencies.append(arrival - at)
    return summary(latencies, sent) | idle


def cloud_source(remote: str, engine_pid: int, rate: float, seconds: float) -> dict:
    from google.cloud import pubsub_v1

    from connectors.kafka.admin import KafkaAdmin
    from connectors.kafka.connection import KafkaConnection

    fresh_pubsub()
    name = unique_name("cont-src")
    topic, subscription = pubsub_topic(name)
    KafkaAdmin(KafkaConnection(os.environ["KAFKA_BOOTSTRAP_SERVERS"])).create_topic(
        name, PARTITIONS, {"message.timestamp.type": "LogAppendTime"})
    entry = {"name": "cont_cloud_source", "connector": "CloudPubSubSourceConnector",
             "config": {"cps.project": PROJECT, "cps.subscription": subscription.rsplit("/", 1)[1],
                        "kafka.topic": name}}
    publisher = pubsub_v1.PublisherClient(pubsub_v1.types.BatchSettings(max_messages=100, max_latency=0.005))
    with continuous_run(entry, remote) as run:
        futures = []
        warm_up_source(lambda value: futures.append(publisher.publish(topic, value)), name)
        sent = steady(lambda now: futures.append(publisher.publish(topic, repr(now).encode())), rate, seconds)
        [f.result(60) for f in futures]
        latencies = kafka_arrivals(name, sent)
        return summary(latencies, sent) | idle_cpu(run.pid, engine_pid)


def java_cloud_source(rate: float, seconds: float) -> dict:
    """The Cloud source row's harness against the Java connector (seed defaults, tasks.max=2) in a Connect worker:
    the same subscription, Kafka topic (LogAppendTime), publisher and warm-up."""
    from google.cloud import pubsub_v1

    from connectors.kafka.admin import KafkaAdmin
    from connectors.kafka.connection import KafkaConnection

    fresh_pubsub()
    name = unique_name("cont-java-src")
    topic, subscription = pubsub_topic(name)
    KafkaAdmin(KafkaConnection(os.environ["KAFKA_BOOTSTRAP_SERVERS"])).create_topic(
        name, PARTITIONS, {"message.timestamp.type": "LogAppendTime"})
    publisher = pubsub_v1.PublisherClient(pubsub_v1.types.BatchSettings(max_messages=100, max_latency=0.005))
    with java_worker("java-cont-src", {
            "connector.class": "com.google.pubsub.kafka.source.CloudPubSubSourceConnector", "tasks.max": "2",
            "cps.project": PROJECT, "cps.subscription": subscription.rsplit("/", 1)[1], "kafka.topic": name}) as worker:
        futures = []
        warm_up_source(lambda value: futures.append(publisher.publish(topic, value)), name)
        sent = steady(lambda now: futures.append(publisher.publish(topic, repr(now).encode())), rate, seconds)
        [f.result(60) for f in futures]
        latencies = kafka_arrivals(name, sent)
        return summary(latencies, sent) | java_idle_cpu(worker)


def lite_source(remote: str, engine_pid: int, rate: float, seconds: float) -> dict:
    from google.cloud.pubsublite.cloudpubsub import PublisherClient

    from connectors.kafka.admin import KafkaAdmin
    from connectors.kafka.connection import KafkaConnection

    name = unique_name("cont-lsrc")
    lite, subscription = lite_topic(name, PARTITIONS)
    KafkaAdmin(KafkaConnection(os.environ["KAFKA_BOOTSTRAP_SERVERS"])).create_topic(
        name, PARTITIONS, {"message.timestamp.type": "LogAppendTime"})
    entry = {"name": "cont_lite_source", "connector": "PubSubLiteSourceConnector",
             "config": {"pubsublite.project": PROJECT, "pubsublite.location": LITE_LOCATION,
                        "pubsublite.subscription": subscription.name, "kafka.topic": name}}
    with continuous_run(entry, remote) as run, \
            PublisherClient(**lite_connection().client_kwargs(lite.location.region)) as publisher:
        futures = []
        warm_up_source(lambda value: futures.append(publisher.publish(lite, value)), name)
        sent = steady(lambda now: futures.append(publisher.publish(lite, repr(now).encode())), rate, seconds)
        [f.result(60) for f in futures]
        latencies = kafka_arrivals(name, sent)
        return summary(latencies, sent) | idle_cpu(run.pid, engine_pid)


ROWS = {
    "CloudPubSubSinkConnector": cloud_sink,
    "PubSubLiteSinkConnector": lite_sink,
    "KinesisSinkConnector": kinesis_sink,
    "PulsarSinkConnector": pulsar_sink,
    "S3BlockGzipSinkConnector": archive,
    "CloudPubSubSourceConnector": cloud_source,
    "PubSubLiteSourceConnector": lite_source,
}
# The Java connector's rows through the same harness (its other connectors are not measured this way): result key.
JAVA_ROWS = {"CloudPubSubSinkConnector": ("java_cloud_sink", java_cloud_sink),
             "CloudPubSubSourceConnector": ("java_cloud_source", java_cloud_source)}


def measure_continuous(stack, rate: float, seconds: float, log: Callable[[str], None] = print,
                       only: list[str] | None = None) -> dict:
    """Every row (or the connectors in `only`; their Java rows then only with "java")."""
    remote = stack.env()["BRIDGE_SPARK_REMOTE"]
    engine_pid = {s.name: s.pid for s in stack.status()}["spark"]
    results = {"rate_per_s": rate, "seconds": seconds, "settings": CONTINUOUS, "rows": {}}
    for connector, (key, measure_java) in JAVA_ROWS.items():
        if not only or ("java" in only and connector in only):
            log(f"continuous mode: Java reference, {connector} ...")
            results[key] = measure_java(rate, seconds)
    for connector, measure in ROWS.items():
        if not only or connector in only:
            log(f"continuous mode: {connector} ...")
            results["rows"][connector] = measure(remote, engine_pid, rate, seconds)
    return results


def render_continuous(results: dict) -> list[str]:
    """The table of a `measure_continuous` result, or of several (`runs`): each value the median (min-max) of the
    runs."""
    runs = results.get("runs") or [results]
    lines = [f"{runs[0]['rate_per_s']:,.0f} records/s for {runs[0]['seconds']:.0f} s, 4 partitions, warm engine"
             + (f"; {len(runs)} runs, medians (min-max)." if len(runs) > 1 else ", one run."), "",
             "| bridge | send → arrival p50 | p99 | max | idle: run | idle: engine |",
             "| --- | --- | --- | --- | --- | --- |"]
    names = [(f"{name} (ours)" if JAVA_ROWS.get(name, ("",))[0] in runs[0] else name, name)
             for name in runs[0]["rows"]]
    for connector, (key, _) in JAVA_ROWS.items():
        if key in runs[0]:
            at = next((i + 1 for i, (label, _) in enumerate(names) if label.startswith(connector)), len(names))
            names.insert(at, (f"{connector} (Java 1.3.3, tasks.max=2)", key))
    for label, name in names:
        rows = [run["rows"][name] if name in run["rows"] else run[name] for run in runs]

        def cell(key: str, fmt: str) -> str:
            values = [row[key] for row in rows if row.get(key) is not None]
            return median_spread(values, fmt) if values else "–"

        lines.append(f"| {label} | {cell('p50_s', '{:.2f}')} s | {cell('p99_s', '{:.2f}')} s | "
                     f"{cell('max_s', '{:.1f}')} s | {cell('idle_run_cpu_pct', '{}')} % | "
                     f"{cell('idle_engine_cpu_pct', '{}')}" + (" %" if rows[0].get("idle_engine_cpu_pct") is not None
                                                               else "") + " |")
    return lines


def render(results: dict) -> str:
    return "\n".join(render_continuous(results)) + "\n"

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--rate", type=float, default=1000)
    parser.add_argument("--only", help="comma-separated connector names to measure alone; with java, their "
                        "Java rows too (the Cloud Pub/Sub sink and source have one)")
    parser.add_argument("--out", default=str(PROJECT_ROOT / "bench" / "continuous.json"))
    args = parser.parse_args()
    with bench_stack() as stack:
        results = measure_continuous(stack, args.rate, args.seconds,
                                     only=args.only.split(",") if args.only else None)
    write_results(Path(args.out), results)
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
