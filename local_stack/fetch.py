"""Fetch and build what the local servers need: Kafka, Pulsar, Kafka Connect and registry jars, pstest.

Everything lands in the cache folder once and is reused. Maven and Go do the resolving, so
versions are pinned in the pom files and go.sum beside this module.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import shutil
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path
from typing import Callable, Iterator, TypeVar

from local_stack.paths import STACK_FILES, cache_dir

PROGRESS_EVERY_S = 15


class MissingToolError(RuntimeError):
    pass


_held = threading.local()
F = TypeVar("F", bound=Callable)


def one_fetch_at_a_time(fetch: F) -> F:
    """Processes fetch into the cache one at a time (an exclusive lock on .cache/.fetch.lock, held by the first
    fetch of a process and taken over by the fetches it calls): the suite's two workers on a fresh clone would
    otherwise both write one `.partial` folder (and Maven's local repository). The one that waited finds the thing
    fetched."""
    @functools.wraps(fetch)
    def serialized(*args, **kwargs):
        if getattr(_held, "lock", False):
            return fetch(*args, **kwargs)
        cache_dir().mkdir(parents=True, exist_ok=True)
        with open(cache_dir() / ".fetch.lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            _held.lock = True
            try:
                return fetch(*args, **kwargs)
            finally:
                _held.lock = False
                fcntl.flock(handle, fcntl.LOCK_UN)
    return serialized  # type: ignore[return-value]


@contextlib.contextmanager
def first_run_step(what: str) -> Iterator[None]:
    """Say what a first run fetches or builds, how it is going every few seconds, and when it is done
    (on stderr: `bridgectl local env` prints shell lines on stdout)."""
    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    started, done = time.monotonic(), threading.Event()

    def tick() -> None:
        while not done.wait(PROGRESS_EVERY_S):
            say(f"  ... still {what}: {time.monotonic() - started:.0f} s")

    say(f"{what} (first run only) ...")
    ticker = threading.Thread(target=tick, daemon=True)
    ticker.start()
    try:
        yield
    finally:
        done.set()
    say(f"  done {what} in {time.monotonic() - started:.0f} s")


def require_tool(name: str, purpose: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise MissingToolError(f"`{name}` not found on PATH: install it ({purpose}).")
    return path


def _copy_maven_dependencies(what: str, pom: Path, target: Path, transitive: bool = True) -> None:
    mvn = require_tool("mvn", "Apache Maven, to fetch jars from Maven Central")
    require_tool("java", "OpenJDK 17, to run the servers")
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    cmd = [
        mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
        f"-DoutputDirectory={partial}", "-DincludeScope=runtime",
    ]
    if not transitive:
        cmd.append("-DexcludeTransitive=true")
    with first_run_step(f"fetching {what} from Maven Central"):
        result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        errors = [line for line in result.stdout.splitlines() if "ERROR" in line][:3]
        raise RuntimeError(f"maven could not resolve {pom.name}: " + " | ".join(errors))
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)


@one_fetch_at_a_time
def kafka_server_jars() -> Path:
    """Folder with the Apache Kafka broker's classpath."""
    target = cache_dir() / "kafka-libs"
    if not target.is_dir():
        _copy_maven_dependencies("the Apache Kafka broker's jars", STACK_FILES / "maven" / "kafka-server.pom.xml",
                                 target)
    return target


@one_fetch_at_a_time
def pulsar_jars() -> Path:
    """Folder with an Apache Pulsar standalone's classpath (about 235 MB)."""
    target = cache_dir() / "pulsar-libs"
    if not target.is_dir():
        _copy_maven_dependencies("Apache Pulsar 4.0.7 (standalone)", STACK_FILES / "maven" / "pulsar-standalone.pom.xml",
                                 target)
    return target


@one_fetch_at_a_time
def schema_registry_app() -> Path:
    """Apicurio Registry's runner jar (a Confluent-API Schema Registry; the archive is about 140 MB)."""
    target = cache_dir() / "apicurio-registry"
    runner = target / "apicurio-registry-app-2.6.13.Final-runner.jar"
    if not runner.exists():
        archives = cache_dir() / "apicurio-registry-archive"
        _copy_maven_dependencies("Apicurio Registry 2.6.13 (Schema Registry)",
                                 STACK_FILES / "maven" / "apicurio-registry.pom.xml", archives, transitive=False)
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        for archive in archives.glob("*.tar.gz"):
            with tarfile.open(archive) as tar:
                tar.extractall(partial, filter="data")
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
        shutil.rmtree(archives)
    return runner


@one_fetch_at_a_time
def kafka_connect_jars() -> Path:
    """Folder with a Kafka Connect standalone worker's classpath (the benchmark's reference rows)."""
    target = cache_dir() / "kafka-connect-libs"
    if not target.is_dir():
        _copy_maven_dependencies("Kafka Connect 4.1.1", STACK_FILES / "maven" / "kafka-connect.pom.xml", target)
    return target


@one_fetch_at_a_time
def kafka_mirror_jars() -> Path:
    """Kafka Connect 4.1.1 with MirrorMaker 2's connectors (connect-mirror): the bench's Kafka -> Kafka reference."""
    target = cache_dir() / "kafka-mirror-libs"
    if not target.is_dir():
        _copy_maven_dependencies("Kafka Connect 4.1.1 with MirrorMaker 2 (connect-mirror)",
                                 STACK_FILES / "maven" / "kafka-mirror.pom.xml", target)
    return target


@one_fetch_at_a_time
def kafka_tools_jars() -> Path:
    """Apache Kafka's tools 4.1.1: the bench's brokers' limit reads with its ConsumerPerformance (no per-record work
    of a Python program)."""
    target = cache_dir() / "kafka-tools-libs"
    if not target.is_dir():
        _copy_maven_dependencies("Apache Kafka's tools 4.1.1 (its consumer performance test)",
                                 STACK_FILES / "maven" / "kafka-tools.pom.xml", target)
    return target


@one_fetch_at_a_time
def kafka_transforms_jars() -> Path:
    """Apache Kafka's single message transforms with JsonConverter, and Apicurio's AvroData (the reference of the
    transforms' differential test)."""
    target = cache_dir() / "kafka-transforms-avro-libs"
    if not target.is_dir():
        _copy_maven_dependencies("Apache Kafka's connect-transforms 4.1.1 and Apicurio's Avro converter 2.6.13",
                                 STACK_FILES / "maven" / "kafka-transforms.pom.xml", target)
    return target


@one_fetch_at_a_time
def kafka_connect_3_jars() -> Path:
    """Kafka Connect 3.9's classpath: the released Java Lite source (1.3.3) calls a ConsumerRecord constructor that
    Kafka 4 removed (NoSuchMethodError on a 4.x worker), so its reference row runs on a 3.9 worker."""
    target = cache_dir() / "kafka-connect-3-libs"
    if not target.is_dir():
        _copy_maven_dependencies("Kafka Connect 3.9.2", STACK_FILES / "maven" / "kafka-connect-3.pom.xml", target)
    return target


@one_fetch_at_a_time
def pubsub_java_connector_plugin() -> Path:
    """A Kafka Connect plugin folder holding the released Java Pub/Sub connector (63 MB, shaded)."""
    target = cache_dir() / "pubsub-java-connector"
    if not target.is_dir():
        _copy_maven_dependencies("com.google.cloud:pubsub-group-kafka-connector:1.3.3 (63 MB)",
                                 STACK_FILES / "maven" / "pubsub-java-connector.pom.xml", target, transitive=False)
    return target


@one_fetch_at_a_time
def spark_kafka_jars() -> Path:
    """Folder with Spark Structured Streaming's Kafka source and its clients (bench.streaming_shapes only)."""
    target = cache_dir() / "spark-sql-kafka-libs"
    if not target.is_dir():
        _copy_maven_dependencies("Spark's Kafka source 4.2.0 (spark-sql-kafka)",
                                 STACK_FILES / "maven" / "spark-sql-kafka.pom.xml", target, transitive=False)
    return target


PSTEST_SOURCES = ("main.go", "go.mod", "go.sum", "patch/seek_and_snapshots.go")
PSTEST_MODULE = "cloud.google.com/go/pubsub/v2"


def go_binary(name: str, source: Path, files: tuple[str, ...], what: str,
              build_folder: Callable[[str], Path] | None = None) -> Path:
    """A Go program built into the cache, named by a digest of its source files (so rebuilt when they change);
    `build_folder(go)` prepares the folder it is built in (default: `source` itself)."""
    digest = hashlib.sha256(b"".join((source / f).read_bytes() for f in files))
    binary = cache_dir() / "bin" / f"{name}-{digest.hexdigest()[:12]}"
    if not binary.exists():
        go = require_tool("go", f"the Go toolchain, to build {what}")
        binary.parent.mkdir(parents=True, exist_ok=True)
        with first_run_step(f"building {what} (Go modules from the Go proxy)"):
            folder = build_folder(go) if build_folder else source
            result = subprocess.run([go, "build", "-o", str(binary), "."], cwd=folder, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"building {what} failed: " + result.stderr.strip()[-800:])
    return binary


@one_fetch_at_a_time
def pstest_binary() -> Path:
    """Google's pstest fake Pub/Sub server, built from our small Go main, with our seek and snapshots in its package
    (patch/seek_and_snapshots.go says why)."""
    source = STACK_FILES / "pstest"
    return go_binary("pstest-server", source, PSTEST_SOURCES, "pstest, Google's Pub/Sub fake",
                     lambda go: _patched_pstest_source(go, source))


def _patched_pstest_source(go: str, source: Path) -> Path:
    """A build folder: our main, and beside it a copy of the pubsub module (the version go.mod pins, from Go's module
    cache) whose pstest has its Seek replaced by ours, put in place with a `replace` line."""
    build = cache_dir() / "build" / "pstest"
    shutil.rmtree(build, ignore_errors=True)
    build.mkdir(parents=True)
    for name in ("main.go", "go.mod", "go.sum"):
        shutil.copy(source / name, build / name)
    downloaded = subprocess.run([go, "mod", "download", "-json", PSTEST_MODULE], cwd=build, capture_output=True,
                                text=True)
    if downloaded.returncode != 0:
        raise RuntimeError(f"downloading {PSTEST_MODULE} failed: " + downloaded.stderr.strip()[-800:])
    module = build / "pubsub"
    shutil.copytree(json.loads(downloaded.stdout)["Dir"], module)
    for path in (module, *module.rglob("*")):
        path.chmod(path.stat().st_mode | 0o200)  # Go's module cache is read-only
    fake = module / "pstest" / "fake.go"
    text = fake.read_text()
    start = text.index("// Seek updates a subscription")
    end = text.index("\n}\n", text.index("func (s *GServer) Seek(", start)) + 3
    fake.write_text(text[:start] + text[end:])
    shutil.copy(source / "patch" / "seek_and_snapshots.go", module / "pstest" / "seek_and_snapshots.go")
    with (build / "go.mod").open("a") as go_mod:
        go_mod.write(f"\nreplace {PSTEST_MODULE} => ./pubsub\n")
    return build


# Debian bookworm's Prometheus (2.42): a pinned version, so the stack's config and rules are checked against it.
PROMETHEUS_DEB = "prometheus=2.42.0+ds-5+deb12u1"
# What Debian's Prometheus web UI loads from Debian's own script and font packages (its package depends on them).
PROMETHEUS_WEB_DEBS = ("fonts-glyphicons-halflings", "libjs-bootstrap", "libjs-bootstrap4", "libjs-d3",
                       "libjs-eonasdan-bootstrap-datetimepicker", "libjs-jquery", "libjs-jquery-hotkeys", "libjs-moment",
                       "libjs-moment-timezone", "libjs-mustache", "libjs-popper.js", "libjs-rickshaw")


@one_fetch_at_a_time
def prometheus_root() -> Path:
    """A folder holding Debian's Prometheus as its package lays it out (`usr/bin/prometheus`, `usr/bin/promtool`,
    the web UI under `usr/share/prometheus/web` with the scripts it links to under `usr/share/javascript`),
    unpacked from the packages rather than installed, so nothing system-wide changes."""
    target = cache_dir() / "prometheus"
    if not (target / "usr" / "bin" / "prometheus").exists():
        apt_get = require_tool("apt-get", "Debian's apt, to fetch the prometheus package")
        dpkg_deb = require_tool("dpkg-deb", "Debian's dpkg, to unpack the prometheus package")
        download = cache_dir() / "prometheus-debs"
        shutil.rmtree(download, ignore_errors=True)
        download.mkdir(parents=True)
        with first_run_step(f"fetching Prometheus from Debian's packages ({PROMETHEUS_DEB} and its web UI's scripts, "
                            "23 MB)"):
            result = subprocess.run([apt_get, "download", "-q", PROMETHEUS_DEB, *PROMETHEUS_WEB_DEBS], cwd=download,
                                    capture_output=True, text=True)
        packages = sorted(download.glob("*.deb"))
        if result.returncode != 0 or len(packages) != 1 + len(PROMETHEUS_WEB_DEBS):
            raise RuntimeError(f"apt-get download {PROMETHEUS_DEB} failed: " + result.stderr.strip()[-800:])
        partial = target.with_name(target.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        for package in packages:  # their links are relative: they meet inside `partial` as they would under /
            subprocess.run([dpkg_deb, "-x", str(package), str(partial)], check=True)
        shutil.rmtree(target, ignore_errors=True)
        partial.rename(target)
        shutil.rmtree(download)
    return target
