"""The reference: the released Java Pub/Sub Group Kafka Connector (1.3.3) in a Kafka Connect
standalone worker, against the bench's own Kafka and pstest, timed as follows.

- Sink: done when the committed offsets of group connect-<name> reach the end offsets (polled every
  0.1 s; offset.flush.interval.ms=1000); steady rate = records / (done - the first partition
  assignment in the worker's log). CPU = the worker JVM's user+sys over that same span.
- Source: the Kafka topic stamps arrival (LogAppendTime); steady rate = records / (last - first
  arrival). CPU = the JVM's over first record seen to done.
- Warm: the same row measured on a second connector added (REST API) to a worker whose first connector
  has just moved as many records, so the JVM's JIT has compiled the path; ours run on warm engines too.
The worker reaches pstest through bench.tls_front (the connector only speaks TLS to Google hosts).
With BENCH_JAVA_JFR=<folder>, every worker records a JFR profile from its start into <folder>/<worker>.jfr
(started with the JVM: one started by attaching to a warm worker kept its JIT compiler busy through the row).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, NamedTuple

from bench.data import LITE_LOCATION, PROJECT, unique_name
from bench.process_memory import TreeCpu, tree_rss_by_kind
from bench.tls_front import TRUST_STORE_PASSWORD
from local_stack import fetch
from local_stack.stack import _free_port

FRONT_LISTEN = "127.0.0.2:443"
LITE_FRONT_LISTEN = "127.0.0.3:443"
LOG4J2 = """status = error
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = %d{UNIX_MILLIS} %p [%t] %c - %m%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
"""


class JavaReference:
    def __init__(self, folder: Path, credentials: Path, kafka: str):
        self.folder = folder
        self.credentials = credentials
        self.kafka = kafka
        self.classpath = str(fetch.kafka_connect_jars() / "*")
        self.plugin = fetch.pubsub_java_connector_plugin()

    def connector_config(self, name: str, connector: dict[str, str]) -> dict[str, str]:
        return {"name": name, "gcp.credentials.file.path": str(self.credentials / "service-account.json"),
                "key.converter": "org.apache.kafka.connect.storage.StringConverter",
                "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter", **connector}

    def start_worker(self, name: str, connector: dict[str, str], classpath: str | None = None,
                     ) -> tuple[subprocess.Popen, Path, int]:
        """A standalone worker running `connector` (on `classpath`, default Kafka Connect 4's): the process, its log
        and its REST port."""
        work = self._work(name)
        port = _free_port()
        _properties(work / "worker.properties", {
            **self._worker_keys(port), "offset.storage.file.filename": str(work / "offsets")})
        _properties(work / "connector.properties", self.connector_config(name, connector))
        return self._launch(work, "org.apache.kafka.connect.cli.ConnectStandalone",
                            [work / "worker.properties", work / "connector.properties"], classpath), work / "worker.log", port

    def start_distributed_worker(self, name: str, classpath: str | None = None, exactly_once: bool = False,
                                 timeout_s: float = 120) -> tuple[subprocess.Popen, Path, int]:
        """A one-worker distributed Connect cluster (its config, offsets and status topics on this reference's Kafka)
        with no connector yet, once its REST API answers; `exactly_once`: KIP-618's exactly.once.source.support
        (standalone workers have none)."""
        work = self._work(name)
        port = _free_port()
        _properties(work / "worker.properties", {
            **self._worker_keys(port), "group.id": name, "config.storage.topic": f"{name}-configs",
            "offset.storage.topic": f"{name}-offsets", "status.storage.topic": f"{name}-status",
            "config.storage.replication.factor": "1", "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            **({"exactly.once.source.support": "enabled"} if exactly_once else {})})
        worker = self._launch(work, "org.apache.kafka.connect.cli.ConnectDistributed", [work / "worker.properties"],
                              classpath)
        deadline = time.monotonic() + timeout_s
        while not _rest_answers(port):
            check_worker(worker, work / "worker.log", deadline)
            time.sleep(0.5)
        return worker, work / "worker.log", port

    def _work(self, name: str) -> Path:
        work = self.folder / name
        work.mkdir(parents=True)
        (work / "log4j2.properties").write_text(LOG4J2)
        return work

    def _worker_keys(self, port: int) -> dict[str, str]:
        return {"bootstrap.servers": self.kafka, "plugin.path": str(self.plugin),
                "key.converter": "org.apache.kafka.connect.storage.StringConverter",
                "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
                "offset.flush.interval.ms": "1000", "listeners": f"http://127.0.0.1:{port}"}

    def _launch(self, work: Path, main_class: str, arguments: list[Path], classpath: str | None) -> subprocess.Popen:
        profile = os.environ.get("BENCH_JAVA_JFR")
        command = [
            fetch.require_tool("java", "OpenJDK 17"), "-Xms256m", "-Xmx2g",  # connect-standalone.sh's heap
            *([f"-XX:StartFlightRecording=settings=profile,dumponexit=true,filename={profile}/{work.name}.jfr"]
              if profile else []),
            f"-Djdk.net.hosts.file={self.credentials / 'hosts'}",
            f"-Djavax.net.ssl.trustStore={self.credentials / 'trust.p12'}",
            f"-Djavax.net.ssl.trustStorePassword={TRUST_STORE_PASSWORD}", "-Djavax.net.ssl.trustStoreType=PKCS12",
            f"-Dlog4j2.configurationFile={work / 'log4j2.properties'}", "-cp", classpath or self.classpath,
            main_class, *map(str, arguments),
        ]
        with open(work / "worker.log", "w") as out:
            # The Lite source (1.3.3) does not hand gcp.credentials.file.path to its Lite client, which then looks
            # for Application Default Credentials: the same key file, as the environment names it.
            env = {**os.environ, "GOOGLE_APPLICATION_CREDENTIALS": str(self.credentials / "service-account.json")}
            return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)

    def sink(self, admin, topic: str, destination: str, records: int, tasks_max: int,
             warm_up_topic: str | None = None, timeout_s: float = 300, lite: bool = False,
             warm_up_destination: str | None = None) -> dict:
        """Kafka `topic` (already filled) -> Pub/Sub `destination` with the seed's defaults (with `lite`, the
        PubSubLiteSinkConnector to the Lite topic `destination` in LITE_LOCATION).

        With `warm_up_topic`, the worker first moves that topic with a connector of its own (to
        `warm_up_destination`, default `destination`), and the row is a second connector added through the worker's
        REST API to the same JVM, already warm."""
        name = unique_name("java-lite-sink" if lite else "java-sink")

        def config(connector_topic: str, destination: str = destination) -> dict[str, str]:
            return {**_pubsub_end("sink", lite, destination), "tasks.max": str(tasks_max), "topics": connector_topic}

        deadline = time.monotonic() + timeout_s
        worker, log, port = self.start_worker(f"{name}-warm-up" if warm_up_topic else name,
                                              config(warm_up_topic, warm_up_destination or destination)
                                              if warm_up_topic else config(topic))
        try:
            if warm_up_topic:
                _sink_done(admin, worker, log, f"{name}-warm-up", warm_up_topic, deadline)
                add_connector(port, self.connector_config(name, config(topic)))
            return _row(records, *_sink_done(admin, worker, log, name, topic, deadline))
        finally:
            stop_worker(worker)

    def source(self, admin, subscription: str, kafka_topic: str, records: int, tasks_max: int,
               warm_up: tuple[str, str] | None = None, timeout_s: float = 300, lite: bool = False) -> dict:
        """Pub/Sub `subscription` (already filled) -> Kafka `kafka_topic` (LogAppendTime) with the seed's defaults
        (with `lite`, the PubSubLiteSourceConnector from the Lite subscription in LITE_LOCATION).

        With `warm_up` (a filled subscription, a Kafka topic), the worker first moves that with a connector
        of its own, and the row is a second connector added through the REST API to the same, warm JVM."""
        name = unique_name("java-lite-source" if lite else "java-source")

        def config(connector_subscription: str, connector_topic: str) -> dict[str, str]:
            return {**_pubsub_end("source", lite, connector_subscription.rsplit("/", 1)[-1]),
                    "tasks.max": str(tasks_max), "kafka.topic": connector_topic}

        deadline = time.monotonic() + timeout_s
        # The Lite source's client calls a ConsumerRecord constructor that Kafka 4 removed: a 3.9 worker for it.
        worker, log, port = self.start_worker(f"{name}-warm-up" if warm_up else name,
                                              config(*(warm_up or (subscription, kafka_topic))),
                                              str(fetch.kafka_connect_3_jars() / "*") if lite else None)
        try:
            if warm_up:
                _source_done(admin, worker, log, warm_up[1], records, deadline)
                add_connector(port, self.connector_config(name, config(subscription, kafka_topic)))
            return _source_done(admin, worker, log, kafka_topic, records, deadline)
        finally:
            stop_worker(worker)

    def lite_rows(self, admin, topic: str, warm_up_topic: str, records: int, size: int) -> dict[str, dict]:
        """The Lite sink (Kafka `topic` -> a 4-partition Lite topic) and then the Lite source (that topic's
        subscription -> Kafka), tasks.max=2, on warm workers: the sink's warm-up (`warm_up_topic`) and row each fill a
        Lite subscription of their own, which the source's warm-up and row then read."""
        from bench.data import lite_topic

        (row_topic, row_subscription), (warm_topic, warm_subscription) = (
            lite_topic(unique_name(f"java-lite-{kind}-{size}"), 4) for kind in ("row", "warm-up"))
        rows = {"lite_sink_2_warm": self.sink(admin, topic, row_topic.name, records, tasks_max=2,
                                              warm_up_topic=warm_up_topic, lite=True,
                                              warm_up_destination=warm_topic.name)}
        back, warm_back = (unique_name(f"java-lite-back-{kind}") for kind in ("row", "warm-up"))
        for name in (back, warm_back):
            admin.create_topic(name, 4, {"message.timestamp.type": "LogAppendTime"})
        rows["lite_source_2_warm"] = self.source(admin, str(row_subscription), back, records, tasks_max=2,
                                                 warm_up=(str(warm_subscription), warm_back), lite=True)
        return rows


# (direction, Lite?) -> the Java connector's class, and its keys for the project, the location and the Pub/Sub end.
_JAVA_CONNECTORS = {
    ("sink", False): ("com.google.pubsub.kafka.sink.CloudPubSubSinkConnector", "cps.project", None, "cps.topic"),
    ("source", False): ("com.google.pubsub.kafka.source.CloudPubSubSourceConnector", "cps.project", None,
                        "cps.subscription"),
    ("sink", True): ("com.google.pubsublite.kafka.sink.PubSubLiteSinkConnector", "pubsublite.project",
                     "pubsublite.location", "pubsublite.topic"),
    ("source", True): ("com.google.pubsublite.kafka.source.PubSubLiteSourceConnector", "pubsublite.project",
                       "pubsublite.location", "pubsublite.subscription"),
}


def _pubsub_end(direction: str, lite: bool, name: str) -> dict[str, str]:
    """The connector class and where it publishes or pulls: a Cloud Pub/Sub topic or subscription, or a Lite one
    in LITE_LOCATION."""
    connector_class, project_key, location_key, name_key = _JAVA_CONNECTORS[(direction, lite)]
    keys = {"connector.class": connector_class, project_key: PROJECT, name_key: name}
    return keys | ({location_key: LITE_LOCATION} if location_key else {})


def _source_done(admin, worker: subprocess.Popen, log: Path, kafka_topic: str, records: int,
                 deadline: float) -> dict:
    """Wait until `records` arrived in `kafka_topic`: the row (first to last arrival, the worker's CPU from
    the first record seen to done)."""
    first_cpu, done_cpu, peak, _ = wait_for_arrivals(admin, worker, log, kafka_topic, records, deadline)
    first, last = arrival_span(kafka_topic, admin.partitions([kafka_topic])[kafka_topic], records)
    return _row(records, last - first, done_cpu - first_cpu, peak)


class Arrivals(NamedTuple):
    first_cpu: float  # CPU seconds used when the first records were seen in the topic
    done_cpu: float  # ... and when the last were
    peak: int  # the writer's peak resident bytes until then
    first_written: int  # how many records were there when the first were seen (those not counted in the CPU)


def wait_for_arrivals(admin, worker: subprocess.Popen, log: Path, topic: str, records: int,
                      deadline: float, transactional: bool = False, also: tuple[int, ...] = ()) -> Arrivals:
    """Wait until `records` are in `topic` (on `admin`'s cluster), written by the worker (or by a run of ours, its
    engine's process in `also`): the CPU seconds of the worker's tree and `also`'s when the first arrived and when the
    last did, and the worker's peak resident bytes until then. `transactional`: the topic's offsets count commit
    markers too, so the copy is done once they also stop moving for a second (that second's CPU, the writer idle, is
    counted)."""
    first_cpu, first_written, peak, settled = None, 0, 0, None
    with TreeCpu(worker.pid, *also) as cpu:
        while True:
            peak = max(peak, worker_rss(worker))
            # Asked each time: a topic made just before may show only some of its partitions at first (a bench
            # waited out its deadline on a warm-up copy that had long arrived).
            written = sum(admin.end_offsets(admin.partitions([topic])).get(topic, {}).values())
            if written and first_cpu is None:
                first_cpu, first_written = cpu.seconds(), written
            if written >= records and not transactional:
                return Arrivals(first_cpu, cpu.seconds(), peak, first_written)
            if written >= records:
                if settled is None or settled[0] != written:
                    settled = (written, time.monotonic())
                elif time.monotonic() - settled[1] >= 1.0:
                    return Arrivals(first_cpu, cpu.seconds(), peak, first_written)
            check_worker(worker, log, deadline)
            time.sleep(0.1)


def _sink_done(admin, worker: subprocess.Popen, log: Path, name: str, topic: str,
               deadline: float) -> tuple[float, float, int]:
    """Wait until the sink connector `name` committed all of `topic`: (seconds from its first partition
    assignment to done, the worker's CPU seconds over that span, its peak resident bytes until then)."""
    partitions = admin.partitions([topic])
    end = sum(admin.end_offsets(partitions).get(topic, {}).values())
    assigned = re.compile(rf"^(\d{{13}}) .*\[task-thread-{re.escape(name)}-\d+\].*Adding newly assigned partitions",
                          re.M)
    assigned_cpu, peak = None, 0
    with TreeCpu(worker.pid) as cpu:
        while True:
            peak = max(peak, worker_rss(worker))
            if assigned_cpu is None and assigned.search(log.read_text(errors="replace")):
                assigned_cpu = cpu.seconds()
            committed = admin.committed_offsets(f"connect-{name}", partitions).get(topic, {})
            if sum(committed.values()) >= end:
                done, done_cpu = time.time(), cpu.seconds()
                break
            check_worker(worker, log, deadline)
            time.sleep(0.1)
    first = int(assigned.search(log.read_text(errors="replace")).group(1)) / 1000
    return done - first, done_cpu - (assigned_cpu or 0.0), peak


def worker_rss(worker: subprocess.Popen) -> int:
    """The worker JVM's resident bytes now (sampled every 0.1 s by the waits above)."""
    return sum(tree_rss_by_kind(worker.pid).values())


def _rest_answers(port: int) -> bool:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/connectors", timeout=2) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError):
        return False


def add_connector(port: int, config: dict[str, str]) -> None:
    """A connector added to a running worker through its REST API."""
    import json
    import urllib.request

    body = json.dumps({"name": config["name"], "config": config}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/connectors", data=body, method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        if response.status not in (200, 201):
            raise RuntimeError(f"the Java worker refused connector {config['name']}: HTTP {response.status}")


def arrival_span(topic: str, partitions: list[int], records: int, bootstrap: str | None = None) -> tuple[float, float]:
    """First and last broker timestamps (seconds) of a LogAppendTime topic's first `records` records (on the stack's
    Kafka, or `bootstrap`)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap or os.environ["KAFKA_BOOTSTRAP_SERVERS"],
                         "group.id": unique_name("span"),
                         "enable.auto.commit": False, "log_level": 3})
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    stamps: list[int] = []
    deadline = time.monotonic() + 60
    while len(stamps) < records and time.monotonic() < deadline:
        for message in consumer.consume(10_000, 1.0):
            if message.error() is None:
                stamps.append(message.timestamp()[1])
    consumer.close()
    return min(stamps) / 1000, max(stamps) / 1000


def _row(records: int, seconds: float, cpu_s: float, peak_bytes: int) -> dict:
    return {"records": records, "seconds": round(seconds, 3), "cpu_s": round(cpu_s, 2),
            "cpu_per_100k": round(cpu_s * 100_000 / records, 2), "peak_mb": round(peak_bytes / 1e6)}


def _properties(path: Path, values: dict[str, str]) -> None:
    import javaproperties

    path.write_text(javaproperties.dumps(values, timestamp=False))


def check_worker(worker: subprocess.Popen, log: Path, deadline: float) -> None:
    if worker.poll() is not None or time.monotonic() > deadline:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:])
        raise RuntimeError(f"the process logging to {log} {'exited' if worker.poll() is not None else 'timed out'}:"
                           f"\n{tail}")


def stop_worker(worker: subprocess.Popen) -> None:
    worker.terminate()
    try:
        worker.wait(30)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait()


@contextmanager
def java_reference(folder: Path) -> Iterator[JavaReference]:
    """The TLS fronts in front of the stack's pstest and Lite server, and a JavaReference using them."""
    # The Lite connectors reach the stack's Lite server (TLS, its own certificate) as LITE_LOCATION's region.
    front = subprocess.Popen([sys.executable, "-m", "bench.tls_front", "--dir", str(folder / "tls"),
                              "--upstream", os.environ["PUBSUB_EMULATOR_HOST"], "--listen", FRONT_LISTEN,
                              "--lite-upstream", os.environ["PUBSUBLITE_API_ENDPOINT"],
                              "--lite-ca", os.environ["GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"],
                              "--lite-region", LITE_LOCATION.rsplit("-", 1)[0], "--lite-listen", LITE_FRONT_LISTEN],
                             stdout=subprocess.PIPE, text=True)
    try:
        ready = front.stdout.readline()
        if not ready.startswith("ready"):
            raise RuntimeError(f"the TLS front in front of pstest did not start (it said {ready!r})")
        yield JavaReference(folder, folder / "tls", os.environ["KAFKA_BOOTSTRAP_SERVERS"])
    finally:
        front.terminate()
        front.wait(10)
