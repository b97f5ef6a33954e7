"""Start, stop and describe the local servers: Kafka (KRaft), Google's pstest Pub/Sub emulator, our
Pub/Sub Lite server (local_stack/lite_server), moto, and a Spark Connect server (the warm engine);
on request (`up --cluster`), a Spark standalone cluster with a Spark Connect server of its own that
takes TLS and a token, as a remote deployment would.

Each server is a child process started in its own session, its pid and start time kept in
`<home>/stack.json`, so `down` stops exactly what `up` started (by pid, never by name) and a pid
reused by an unrelated process is never signalled.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from local_stack import fetch, spark_servers
from local_stack.paths import default_dagster_home, default_stack_home, log4j2_config
from connectors.processes import process_start_ticks

DEFAULT_PORTS = {"kafka": 19092, "kafka_controller": 19093, "kafka_target": 19094, "kafka_target_controller": 19095,
                 "pubsub": 18085, "pubsublite": 18086, "s3": 15000, "pulsar": 16650, "pulsar_web": 18090,
                 "pulsar_bookie": 13181, "spark": 15002, "spark_master": 17077, "spark_master_ui": 18080,
                 "spark_cluster": 15003, "spark_cluster_tls": 15443, "schema_registry": 18081, "kafka_sasl": 19096,
                 "kafka_ssl": 19097, "prometheus": 19090, "metrics": 19464}
# Where picked ports (test and bench stacks) start: above every default, so they never take a default stack's.
_KEPT_PORTS_FROM = 20000
# spark: a Spark Connect server, the warm engine every run connects to (no JVM start per run).
# Its task slots: an always-on bridge's stream holds one for as long as its run lasts, mostly waiting on I/O, so
# the warm engine has far more slots than cores (local[*] would let two always-on bridges starve every other run).
CONNECT_SERVER_MASTER = "local[32]"
# kafka_sasl: the first cluster's SASL_PLAINTEXT listener (mechanism PLAIN), for clients that authenticate.
# kafka_ssl: the first cluster's SSL listener (the stack's local certificate; a client certificate is required).
# kafka_target: a second Kafka cluster, what a Kafka -> Kafka bridge replicates to.
# pulsar: an Apache Pulsar standalone (broker, embedded bookie), a target of replication.
# schema_registry: Apicurio Registry serving Confluent's Schema Registry API, its schemas in an H2 file under
# <home>/schema_registry, so that they outlive a restart as the Kafka records that name their ids do.
# prometheus: Debian's Prometheus, scraping the bridges' metrics endpoint (`metrics`: what `bridgectl dev` starts,
# `python -m bridge_metrics`) and any target file in <home>/prometheus/targets, with the alerting rules of
# observability/prometheus.
SERVICES = ("kafka", "kafka_target", "pubsub", "pubsublite", "s3", "pulsar", "schema_registry", "spark", "prometheus")
# Every this often Prometheus scrapes and evaluates its rules (a production server's default is a minute).
PROMETHEUS_INTERVAL_S = 5
# Each Kafka cluster: its data folder under the stack's home.
KAFKA_DATA = {"kafka": "kafka-data", "kafka_target": "kafka-target-data"}
# The cluster: a master, two workers, a Spark Connect server on it (plaintext, loopback only, token
# required) and the TLS front users reach it through.
CLUSTER_SERVICES = ("spark_master", "spark_worker_1", "spark_worker_2", "spark_cluster", "spark_cluster_tls")
READY_TIMEOUT_S = 120
# Where Apicurio serves Confluent's API; clients take this whole URL as `schema.registry.url`.
SCHEMA_REGISTRY_PATH = "/apis/ccompat/v7"


@dataclass(frozen=True)
class ServiceStatus:
    name: str
    address: str
    pid: int | None
    running: bool


# The service whose process listens on a port of another name.
PORT_OWNERS = {"kafka_controller": "kafka", "kafka_sasl": "kafka", "kafka_ssl": "kafka",
               "kafka_target_controller": "kafka_target",
               "pulsar_web": "pulsar", "pulsar_bookie": "pulsar",
               "spark_master_ui": "spark_master"}


def _parse_port(name: str, value: str) -> int:
    if not value.isdigit() or not 0 < int(value) < 65536:
        raise RuntimeError(f"BRIDGE_{name.upper()}_PORT={value!r} is not a port number (1-65535)")
    return int(value)


def _free_port(avoid: set[int] = frozenset()) -> int:
    """A port free now and not in `avoid`: the kernel may hand a released port out again at once, and two services
    of one stack given the same port found it taken when the second started (a clean-clone CI run failed on it)."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        if port not in avoid:
            return port


def _kept_port(avoid: set[int] = frozenset()) -> int:
    """A port for a stack's state, free now, not in `avoid` and below the kernel's ephemeral range: a kept port is
    not always bound (the metrics endpoint until `bridgectl dev` starts it, Kafka while it restarts), and in that
    range any outbound connection or port-0 server of the machine may take it meanwhile."""
    low = _ephemeral_low()
    while True:
        port = random.randrange(_KEPT_PORTS_FROM, low)
        if port in avoid:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port


def _ephemeral_low() -> int:
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768  # Linux's default
    return max(low, _KEPT_PORTS_FROM + 1000)


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _answers_a_query(remote: str) -> bool:
    """Whether the Spark Connect server at `remote` runs a first query (in a session of its own, released after)."""
    try:
        return subprocess.run([sys.executable, "-m", "local_stack.spark_first_query", remote], timeout=120,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
    except subprocess.TimeoutExpired:
        return False


class LocalStack:
    def __init__(self, home: Path | None = None, pick_free_ports: bool = False):
        self.home = (home or default_stack_home()).resolve()
        self.state_file = self.home / "stack.json"
        self._pick_free_ports = pick_free_ports

    # --- state -----------------------------------------------------------------------------
    def _load_state(self) -> dict:
        if self.state_file.exists():
            return json.loads(self.state_file.read_text())
        return {}

    def _save_state(self, state: dict) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        # Written aside and renamed: another process reading it meanwhile (a bench starting while the last one's
        # stack goes down) sees the old state or the new, never an empty file.
        written = self.state_file.with_name(f"{self.state_file.name}.{os.getpid()}.tmp")
        written.write_text(json.dumps(state, indent=2))
        os.replace(written, self.state_file)

    def ports(self) -> dict[str, int]:
        """Ports are chosen on the first `up` and kept (Kafka's metadata log remembers its controller's);
        a BRIDGE_<NAME>_PORT override always wins, or says exactly what stands in its way."""
        with self._picking_alone():
            return self._ports()

    @contextlib.contextmanager
    def _picking_alone(self) -> Iterator[None]:
        """Stacks beside each other pick their ports one at a time: two of the suite's workers starting together
        each read the other's ports before either had saved them, and picked the same one (a clean-clone run's
        second stack found its Pulsar bookie port bound by the first stack's Kafka controller)."""
        if not self._pick_free_ports:
            yield
            return
        self.home.parent.mkdir(parents=True, exist_ok=True)
        with open(self.home.parent / ".port-picking.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _ports(self) -> dict[str, int]:
        state = self._load_state()
        ports = state.setdefault("ports", {})
        changed = False
        taken = set(ports.values())
        siblings_read = False
        for name, default in DEFAULT_PORTS.items():
            override = os.environ.get(f"BRIDGE_{name.upper()}_PORT")
            if override is not None:
                wanted = _parse_port(name, override)
                if ports.get(name) not in (None, wanted):
                    self._check_movable(name, ports[name], wanted)
            elif name in ports:
                continue
            else:
                if self._pick_free_ports and not siblings_read:  # read only when a port is to be picked
                    taken |= self._siblings_ports()
                    siblings_read = True
                wanted = _kept_port(taken) if self._pick_free_ports else default
            changed |= ports.get(name) != wanted
            ports[name] = wanted
            taken.add(wanted)
        if changed:
            self._save_state(state)
        return ports

    def _siblings_ports(self) -> set[int]:
        """The ports other stacks beside this one keep (the suite's workers' stacks, the bench's): a picked port is
        free when picked, but a sibling's is bound only while its server runs."""
        kept: set[int] = set()
        for state_file in self.home.parent.glob("*/stack.json"):
            if state_file != self.state_file:
                try:
                    kept |= set(json.loads(state_file.read_text()).get("ports", {}).values())
                except (OSError, ValueError):
                    continue  # being written (it is replaced whole) or not a stack's
        return kept

    def _check_movable(self, name: str, current: int, wanted: int) -> None:
        variable = f"BRIDGE_{name.upper()}_PORT={wanted}"
        service = PORT_OWNERS.get(name, name)
        if self._alive(service):
            raise RuntimeError(f"{variable}, but {service} is running on port {current}: stop the stack "
                               "(bridgectl local down) and start it again to move it, or unset the variable")
        data = self.home / KAFKA_DATA.get(service, "")
        if name.endswith("_controller") and (data / "meta.properties").exists():
            raise RuntimeError(f"{variable}, but Kafka's data in {data} names controller port "
                               f"{current}: remove that directory (its topics go with it) or unset the variable")

    def _alive(self, service: str) -> int | None:
        entry = self._load_state().get("pids", {}).get(service)
        if not entry:
            return None
        pid, ticks = entry["pid"], entry["start_ticks"]
        return pid if process_start_ticks(pid) == ticks else None

    def record_ui_url(self, url: str | None) -> None:
        """The Dagster UI `bridgectl dev` serves on this stack (None: it stopped)."""
        state = self._load_state()
        if url is None:
            state.pop("dagster_url", None)
        else:
            state["dagster_url"] = url
        self._save_state(state)

    def ui_url(self) -> str | None:
        """The Dagster UI of this stack while `bridgectl dev` serves it."""
        return self._load_state().get("dagster_url")

    # --- public ------------------------------------------------------------------------------
    def env(self) -> dict[str, str]:
        ports = self.ports()
        ui = {"DAGSTER_URL": url} if (url := self.ui_url()) else {}
        return {**ui,
            "KAFKA_BOOTSTRAP_SERVERS": f"127.0.0.1:{ports['kafka']}",
            "KAFKA_TARGET_BOOTSTRAP_SERVERS": f"127.0.0.1:{ports['kafka_target']}",
            "PULSAR_SERVICE_URL": f"pulsar://127.0.0.1:{ports['pulsar']}",
            "PULSAR_ADMIN_URL": f"http://127.0.0.1:{ports['pulsar_web']}",
            "SCHEMA_REGISTRY_URL": self.schema_registry_url(),
            "PUBSUB_EMULATOR_HOST": f"127.0.0.1:{ports['pubsub']}",
            "PUBSUBLITE_API_ENDPOINT": f"127.0.0.1:{ports['pubsublite']}",
            # The Lite client always dials TLS; gRPC then trusts the local server's own certificate.
            "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH": str(self.lite_certificate()),
            "AWS_ENDPOINT_URL": f"http://127.0.0.1:{ports['s3']}",
            # moto accepts any credentials; these keep boto3 from looking for real ones.
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
            "DAGSTER_HOME": str(default_dagster_home()),
            "BRIDGE_SPARK_REMOTE": f"sc://127.0.0.1:{ports['spark']}",
            "SPARK_LOCAL_IP": "127.0.0.1",
            "PROMETHEUS_URL": self.prometheus_url(),
        }

    def cluster_env(self) -> dict[str, str]:
        """env() for runs on the local cluster: through its Spark Connect server (TLS and a token), or
        BRIDGE_SPARK_CLUSTER_MASTER for a classic session whose executors live on the workers."""
        ports = self.ports()
        return {**self.env(),
                "BRIDGE_SPARK_REMOTE": f"sc://127.0.0.1:{ports['spark_cluster_tls']}/;use_ssl=true",
                "BRIDGE_SPARK_REMOTE_TOKEN": self.cluster_token(),
                "BRIDGE_SPARK_CLUSTER_MASTER": self.master_url()}

    def kafka_sasl_bootstrap_servers(self) -> str:
        """The first cluster's SASL_PLAINTEXT listener; its user and password: `kafka_sasl_credentials()`."""
        return f"127.0.0.1:{self.ports()['kafka_sasl']}"

    def kafka_sasl_credentials(self) -> tuple[str, str]:
        """The user the SASL listener takes (mechanism PLAIN), its password made once (file mode 600)."""
        return "bridge", self._secret(self.home / "kafka" / "sasl-password")

    def kafka_ssl_bootstrap_servers(self) -> str:
        """The first cluster's SSL listener: the stack's local certificate (`local_certificate()`, which a client
        trusts as its CA), and it asks the client for a certificate that certificate signed (`kafka_client_tls()`)."""
        return f"127.0.0.1:{self.ports()['kafka_ssl']}"

    def local_certificate(self) -> tuple[Path, Path]:
        """The stack's one local certificate and key (localhost, 127.0.0.1): the Lite server's, the cluster's TLS
        front's and Kafka's SSL listener's; made once."""
        from local_stack.lite_server.tls import ensure_certificate

        return ensure_certificate(self.lite_certificate().parent)

    def kafka_client_tls(self) -> tuple[Path, Path]:
        """A client certificate and key for Kafka's SSL listener, signed by the local certificate; made once."""
        from local_stack.lite_server.tls import ensure_client_certificate

        return ensure_client_certificate(self.home / "kafka" / "client-tls", *self.local_certificate())

    def _secret(self, path: Path) -> str:
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch(mode=0o600)
            path.write_text(secrets.token_urlsafe(32))
        return path.read_text().strip()

    def schema_registry_url(self) -> str:
        return f"http://127.0.0.1:{self.ports()['schema_registry']}{SCHEMA_REGISTRY_PATH}"

    def prometheus_url(self) -> str:
        return f"http://127.0.0.1:{self.ports()['prometheus']}"

    def prometheus_targets(self) -> Path:
        """The folder Prometheus reads scrape targets from (file service discovery, read again within seconds):
        `<name>.json` holding `[{"targets": ["127.0.0.1:<port>"]}]` adds a metrics endpoint."""
        return self.home / "prometheus" / "targets"

    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.ports()['spark_master']}"

    def cluster_token(self) -> str:
        """The bearer token the cluster's Spark Connect server requires, made once (file mode 600)."""
        return self._secret(self.home / "spark-cluster" / "token")

    def status(self) -> list[ServiceStatus]:
        ports = self.ports()
        recorded = self._load_state().get("pids", {})
        names = list(SERVICES) + [name for name in CLUSTER_SERVICES if name in recorded]
        return [
            ServiceStatus(name, f"127.0.0.1:{ports[name]}" if name in ports else "-", self._alive(name),
                          self._alive(name) is not None)
            for name in names
        ]

    def up(self, log: Callable[[str], None] = print, only: tuple[str, ...] = SERVICES) -> None:
        starters = {"kafka": lambda: self._start_kafka("kafka"),
                    "kafka_target": lambda: self._start_kafka("kafka_target"), "pubsub": self._start_pubsub,
                    "pubsublite": self._start_pubsublite, "pulsar": self._start_pulsar, "s3": self._start_s3,
                    "schema_registry": self._start_schema_registry, "spark": self._start_spark,
                    "prometheus": self._start_prometheus,
                    "spark_master": self._start_spark_master, "spark_worker_1": lambda: self._start_spark_worker(1),
                    "spark_worker_2": lambda: self._start_spark_worker(2),
                    "spark_cluster": self._start_spark_cluster, "spark_cluster_tls": self._start_spark_cluster_tls}
        checks = {"kafka": lambda: self._kafka_ready("kafka"), "kafka_target": lambda: self._kafka_ready("kafka_target"),
                  "pubsub": self._pubsub_ready, "pulsar": self._pulsar_ready,
                  "schema_registry": self._schema_registry_ready, "prometheus": self._prometheus_ready,
                  "pubsublite": self._pubsublite_ready, "s3": self._s3_ready, "spark": self._spark_ready,
                  "spark_master": lambda: self._port_ready("spark_master"),
                  "spark_worker_1": lambda: self._workers_alive() >= 1,
                  "spark_worker_2": lambda: self._workers_alive() >= 2,
                  "spark_cluster": lambda: self._port_ready("spark_cluster"),
                  "spark_cluster_tls": lambda: self._port_ready("spark_cluster_tls")}
        started = []
        for name in only:
            if self._alive(name):
                log(f"{name}: already running")
                continue
            for port_name in (name, *[n for n, owner in PORT_OWNERS.items() if owner == name]):
                port = self.ports().get(port_name)
                if port is not None and _port_open(port):
                    raise RuntimeError(
                        f"{name}: port {port} is taken by a process this stack did not start; "
                        f"stop it or set BRIDGE_{port_name.upper()}_PORT to a free port"
                    )
            self._record(name, starters[name]())
            started.append(name)
            if name.startswith("spark_"):  # each needs the one before it: master, workers, server, front
                self._wait(name, checks[name])
        for name in started:
            if not name.startswith("spark_"):  # the cluster's were waited for as they started
                self._wait(name, checks[name])
            log(f"{name}: ready" + (f" on 127.0.0.1:{self.ports()[name]}" if name in self.ports() else ""))

    def down(self, log: Callable[[str], None] = print,
             only: tuple[str, ...] = tuple(reversed(CLUSTER_SERVICES)) + SERVICES) -> None:
        for name in only:
            pid = self._alive(name)
            if pid is None:
                continue
            os.killpg(pid, signal.SIGTERM)
            deadline = time.monotonic() + 30
            while process_start_ticks(pid) is not None and time.monotonic() < deadline:
                time.sleep(0.2)
            if process_start_ticks(pid) is not None:
                os.killpg(pid, signal.SIGKILL)
            log(f"{name}: stopped (pid {pid})")
            state = self._load_state()  # re-read: forget only what was stopped here
            if state.get("pids", {}).get(name, {}).get("pid") == pid:
                del state["pids"][name]
                self._save_state(state)

    # --- services ----------------------------------------------------------------------------
    def _spawn(self, name: str, cmd: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
        log_path = self.home / "logs" / f"{name}.log"
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(log_path, "ab") as out:
            return subprocess.Popen(
                cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, env={**os.environ, **(env or {})},
            )

    def _record(self, name: str, proc: subprocess.Popen) -> None:
        state = self._load_state()
        state.setdefault("pids", {})[name] = {
            "pid": proc.pid, "start_ticks": process_start_ticks(proc.pid)
        }
        self._save_state(state)

    def _kafka_properties(self, name: str) -> Path:
        ports = self.ports()
        data_dir = self.home / KAFKA_DATA[name]
        props = self.home / name / "server.properties"
        props.parent.mkdir(parents=True, exist_ok=True)
        props.touch(mode=0o600)  # it holds the SASL listener's password
        props.chmod(0o600)
        listeners = [f"PLAINTEXT://127.0.0.1:{ports[name]}"]
        sasl, ssl = [], []
        if f"{name}_sasl" in ports:  # the first cluster also takes SASL PLAIN, for clients that authenticate
            listeners.append(f"SASL_PLAINTEXT://127.0.0.1:{ports[name + '_sasl']}")
            user, password = self.kafka_sasl_credentials()
            sasl = ["sasl.enabled.mechanisms=PLAIN",
                    "listener.name.sasl_plaintext.plain.sasl.jaas.config="
                    "org.apache.kafka.common.security.plain.PlainLoginModule required "
                    f'user_{user}="{password}";']
        if f"{name}_ssl" in ports:  # and TLS with client certificates (mutual TLS), in PEM files
            listeners.append(f"SSL://127.0.0.1:{ports[name + '_ssl']}")
            keystore, password = self._kafka_keystore(name)
            ssl = ["listener.name.ssl.ssl.keystore.type=PKCS12", f"listener.name.ssl.ssl.keystore.location={keystore}",
                   f"listener.name.ssl.ssl.keystore.password={password}",
                   "listener.name.ssl.ssl.truststore.type=PEM",
                   f"listener.name.ssl.ssl.truststore.location={self.local_certificate()[0]}",
                   "listener.name.ssl.ssl.client.auth=required"]
        props.write_text("\n".join([
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.bootstrap.servers=127.0.0.1:{ports[name + '_controller']}",
            f"listeners={','.join(listeners)},CONTROLLER://127.0.0.1:{ports[name + '_controller']}",
            f"advertised.listeners={','.join(listeners)}",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,"
            "SSL:SSL",
            *sasl,
            *ssl,
            f"log.dirs={data_dir}",
            "num.partitions=1",
            "offsets.topic.replication.factor=1",
            # 50 partitions (the default) make a fresh single broker slow to serve group offsets.
            "offsets.topic.num.partitions=4",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
            # The log cleaner looks for compactable segments every second, not every 15 s, so compacted
            # topics (and the tests of them) see compaction soon.
            "log.cleaner.backoff.ms=1000",
            "",
        ]))
        return props

    def _java(self, main: str, *args: str) -> list[str]:
        java = fetch.require_tool("java", "OpenJDK 17, to run Kafka")
        libs = fetch.kafka_server_jars()
        return [
            java, "-Xms256m", "-Xmx768m", f"-Dlog4j2.configurationFile={log4j2_config()}",
            "-cp", f"{libs}/*", main, *args,
        ]

    def _kafka_keystore(self, name: str) -> tuple[Path, str]:
        """Kafka's keystore for its SSL listener (the local certificate and its key), made once, and its password.
        PKCS#12 with PKCS#12's own 3DES encryption: Java 17 does not read the PBES2 that PEM keys are encrypted with,
        and a PEM keystore file must be encrypted."""
        from cryptography import x509
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.serialization import pkcs12

        cert, key = self.local_certificate()
        password = self._secret(self.home / name / "ssl-keystore-password")
        keystore = self.home / name / "ssl-keystore.p12"
        if keystore.exists() and keystore.stat().st_mtime >= cert.stat().st_mtime:  # made from this certificate
            return keystore, password
        encryption = (serialization.PrivateFormat.PKCS12.encryption_builder()
                      .key_cert_algorithm(pkcs12.PBES.PBESv1SHA1And3KeyTripleDESCBC).build(password.encode()))
        keystore.touch(mode=0o600)
        keystore.write_bytes(pkcs12.serialize_key_and_certificates(
            b"kafka", serialization.load_pem_private_key(key.read_bytes(), password=None),
            x509.load_pem_x509_certificate(cert.read_bytes()), None, encryption))
        return keystore, password

    def _start_kafka(self, name: str) -> subprocess.Popen:
        props = self._kafka_properties(name)
        if not (self.home / KAFKA_DATA[name] / "meta.properties").exists():
            cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
            result = subprocess.run(
                # "=" form: a base64 id may start with "-", which would read as an option
                self._java("kafka.tools.StorageTool", "format", f"--cluster-id={cluster_id}",
                           "-c", str(props), "--standalone"),
                capture_output=True, text=True,
            )
            if result.returncode != 0:
                raise RuntimeError("formatting Kafka storage failed: " + result.stderr[-800:])
        return self._spawn(name, self._java("kafka.Kafka", str(props)))

    def _start_pulsar(self) -> subprocess.Popen:
        ports, home = self.ports(), self.home / "pulsar"
        home.mkdir(parents=True, exist_ok=True)
        conf = home / "standalone.conf"
        conf.write_text("\n".join([
            "clusterName=standalone", "bindAddress=127.0.0.1", "advertisedAddress=127.0.0.1",
            f"brokerServicePort={ports['pulsar']}", f"webServicePort={ports['pulsar_web']}",
            "managedLedgerDefaultEnsembleSize=1", "managedLedgerDefaultWriteQuorum=1", "managedLedgerDefaultAckQuorum=1",
            "allowAutoTopicCreation=true", "",
        ]))
        java = fetch.require_tool("java", "OpenJDK 17, to run Pulsar")
        opens = [f"--add-opens={module}=ALL-UNNAMED" for module in (
            "java.base/jdk.internal.platform", "java.management/sun.management", "java.base/java.lang",
            "java.base/sun.net", "java.base/java.io")]  # what Pulsar's own start script passes
        return self._spawn("pulsar", [
            java, "-Xms128m", "-Xmx768m", *opens, f"-Dlog4j2.configurationFile={log4j2_config()}",
            "-cp", f"{fetch.pulsar_jars()}/*", "org.apache.pulsar.PulsarStandaloneStarter", "--config", str(conf),
            "--no-functions-worker", "--no-stream-storage", "--bookkeeper-dir", str(home / "bookie"),
            "--metadata-dir", str(home / "metadata"), "--bookkeeper-port", str(ports["pulsar_bookie"]),
        ])

    def _start_schema_registry(self) -> subprocess.Popen:
        java = fetch.require_tool("java", "OpenJDK 17, to run the Schema Registry")
        runner = fetch.schema_registry_app()
        data = self.home / "schema_registry"
        data.mkdir(parents=True, exist_ok=True)
        # Apicurio's default store is an H2 database in memory: a restarted registry would answer 404 for the schema
        # ids that the records kept in Kafka name. The same H2 in a file keeps them; WRITE_DELAY=0 writes each commit
        # to the file as it is made (H2 otherwise writes in the background, and a clean-clone suite lost a schema
        # registered a second before the registry stopped).
        return self._spawn("schema_registry", [java, "-Xms64m", "-Xmx384m", "-jar", str(runner)], env={
            "QUARKUS_HTTP_HOST": "127.0.0.1", "QUARKUS_HTTP_PORT": str(self.ports()["schema_registry"]),
            "QUARKUS_LOG_LEVEL": "WARN", "REGISTRY_DATASOURCE_URL": f"jdbc:h2:file:{data / 'registry'};WRITE_DELAY=0",
        })

    def _start_prometheus(self) -> subprocess.Popen:
        from local_stack.paths import PROJECT_ROOT

        home, interval = self.home / "prometheus", f"{PROMETHEUS_INTERVAL_S}s"
        self.prometheus_targets().mkdir(parents=True, exist_ok=True)
        # The endpoint `bridgectl dev` serves; a test adds its own file beside it.
        (self.prometheus_targets() / "bridgectl-dev.json").write_text(json.dumps(
            [{"targets": [f"127.0.0.1:{self.ports()['metrics']}"]}]))
        config = home / "prometheus.yml"
        config.write_text(json.dumps({  # YAML is a superset of JSON
            "global": {"scrape_interval": interval, "evaluation_interval": interval},
            "rule_files": [str(PROJECT_ROOT / "observability" / "prometheus" / "bridge-alerts.yml")],
            "scrape_configs": [{"job_name": "bridges", "file_sd_configs": [
                {"files": [str(self.prometheus_targets() / "*.json")], "refresh_interval": interval}]}],
        }, indent=2))
        root = fetch.prometheus_root()
        return self._spawn("prometheus", [
            str(root / "usr" / "bin" / "prometheus"), f"--config.file={config}",
            f"--storage.tsdb.path={home / 'data'}", "--storage.tsdb.retention.time=2d",
            f"--web.listen-address=127.0.0.1:{self.ports()['prometheus']}",
            f"--web.local-assets={root / 'usr' / 'share' / 'prometheus' / 'web'}/",
            f"--web.console.templates={root / 'etc' / 'prometheus' / 'consoles'}",
            f"--web.console.libraries={root / 'etc' / 'prometheus' / 'console_libraries'}"])

    def _start_pubsub(self) -> subprocess.Popen:
        binary = fetch.pstest_binary()
        return self._spawn("pubsub", [str(binary), "-port", str(self.ports()["pubsub"])])

    def lite_certificate(self) -> Path:
        return self.home / "pubsublite-data" / "lite-server.crt"

    def _start_pubsublite(self) -> subprocess.Popen:
        from local_stack.lite_server.tls import ensure_certificate

        data_dir = self.home / "pubsublite-data"
        ensure_certificate(data_dir)  # before the start, so `env` names a file that exists
        return self._spawn("pubsublite", [sys.executable, "-m", "local_stack.lite_server",
                                          "--port", str(self.ports()["pubsublite"]), "--data", str(data_dir)])

    def _spark_env(self) -> dict[str, str]:
        # Python workers run the connectors: this interpreter has them installed, and they need the
        # stack's environment (endpoints, the Lite certificate) like any run.
        env = {**self.env(), "PYSPARK_PYTHON": sys.executable, "SPARK_HOME": str(spark_servers.spark_home())}
        env.pop("BRIDGE_SPARK_REMOTE")
        return env

    def _start_spark(self) -> subprocess.Popen:
        command = spark_servers.connect_server_command(
            self.ports()["spark"], os.environ.get("BRIDGE_SPARK_MASTER", CONNECT_SERVER_MASTER), {})
        return self._spawn("spark", command, self._spark_env())

    def _start_spark_master(self) -> subprocess.Popen:
        ports = self.ports()
        return self._spawn("spark_master", spark_servers.master_command(ports["spark_master"],
                                                                        ports["spark_master_ui"]), self._spark_env())

    def _start_spark_worker(self, number: int) -> subprocess.Popen:
        work_dir = self.home / "spark-cluster" / f"worker-{number}"
        work_dir.mkdir(parents=True, exist_ok=True)
        return self._spawn(f"spark_worker_{number}",
                           spark_servers.worker_command(self.master_url(), _free_port(), work_dir), self._spark_env())

    def _start_spark_cluster(self) -> subprocess.Popen:
        command = spark_servers.connect_server_command(self.ports()["spark_cluster"], self.master_url(),
                                                       spark_servers.cluster_app_conf())
        # The token by environment, never on a command line that `ps` shows.
        return self._spawn("spark_cluster", command,
                           {**self._spark_env(), "SPARK_CONNECT_AUTHENTICATE_TOKEN": self.cluster_token()})

    def _start_spark_cluster_tls(self) -> subprocess.Popen:
        # The stack's one local certificate (localhost, 127.0.0.1), already trusted through
        # GRPC_DEFAULT_SSL_ROOTS_FILE_PATH.
        cert, key = self.local_certificate()
        ports = self.ports()
        return self._spawn("spark_cluster_tls", [
            sys.executable, "-m", "local_stack.tls_proxy", "--cert", str(cert), "--key", str(key),
            "--listen", f"127.0.0.1:{ports['spark_cluster_tls']}", "--upstream", f"127.0.0.1:{ports['spark_cluster']}"])

    def _start_s3(self) -> subprocess.Popen:
        return self._spawn(
            "s3", [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.ports()["s3"])]
        )

    # --- readiness ---------------------------------------------------------------------------
    def _wait(self, name: str, ready: Callable[[], bool]) -> None:
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._alive(name) is None:
                raise RuntimeError(f"{name} exited during start; last log lines:\n{self._log_tail(name)}")
            if ready():
                return
            time.sleep(0.3)
        raise RuntimeError(f"{name} not ready after {READY_TIMEOUT_S}s; last log lines:\n{self._log_tail(name)}")

    def _log_tail(self, name: str, lines: int = 15) -> str:
        path = self.home / "logs" / f"{name}.log"
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) if path.exists() else ""

    def _kafka_ready(self, name: str) -> bool:
        from confluent_kafka.admin import AdminClient

        if not _port_open(self.ports()[name]):
            return False
        admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{self.ports()[name]}", "log_level": 0})
        try:
            return len(admin.list_topics(timeout=2).brokers) > 0
        except Exception:
            return False

    def _pulsar_ready(self) -> bool:
        """The broker answers and its default namespace exists (the standalone creates it last)."""
        try:
            url = f"http://127.0.0.1:{self.ports()['pulsar_web']}/admin/v2/namespaces/public"
            with urllib.request.urlopen(url, timeout=2) as response:
                return "public/default" in response.read().decode()
        except OSError:
            return False

    def _schema_registry_ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.schema_registry_url() + "/subjects", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    def _prometheus_ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.prometheus_url() + "/-/ready", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    def _pubsub_ready(self) -> bool:
        return _port_open(self.ports()["pubsub"])

    def _pubsublite_ready(self) -> bool:
        return _port_open(self.ports()["pubsublite"])

    def _spark_ready(self) -> bool:
        # Ready once it has run a query, not once its port answers: a fresh JVM took 1.1-2.6 s longer to plan its
        # first job (code paths loaded and compiled on first use), and a host's first start paid them before its
        # bridges' first records moved (at thirty bridges, all moving 9.7-11.6 s after the run's start; 7.1-8.9 s
        # on an engine that had answered one query).
        return _port_open(self.ports()["spark"]) and _answers_a_query(f"sc://127.0.0.1:{self.ports()['spark']}")

    def _port_ready(self, name: str) -> bool:
        return _port_open(self.ports()[name])

    def _workers_alive(self) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ports()['spark_master_ui']}/json/", timeout=2) as r:
                return sum(1 for w in json.load(r).get("workers", []) if w.get("state") == "ALIVE")
        except OSError:
            return 0

    def _s3_ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.ports()['s3']}/moto-api/", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False


def default_dagster_url() -> str:
    """Where bridgectl finds Dagster: $DAGSTER_URL (`bridgectl local env` exports it), else the UI that
    `bridgectl dev` serves on the local stack, else Dagster's own default."""
    return os.environ.get("DAGSTER_URL") or LocalStack().ui_url() or "http://127.0.0.1:3000"
