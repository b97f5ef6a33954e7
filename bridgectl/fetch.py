"""Fetch and build what the local servers and Spark need: Kafka jars, Spark's Kafka source, pstest.

Everything lands in the cache folder once and is reused. Maven and Go do the resolving, so
versions are pinned in the pom files and go.sum beside this module.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

from bridgectl.paths import STACK_FILES, cache_dir

# pyspark already ships Scala, Hadoop client, snappy, lz4 and slf4j; copying only these avoids two
# versions of one class on the classpath.
SPARK_KAFKA_ARTIFACTS = (
    "spark-sql-kafka-0-10_2.13",
    "spark-token-provider-kafka-0-10_2.13",
    "kafka-clients",
    "commons-pool2",
)


class MissingToolError(RuntimeError):
    pass


def require_tool(name: str, purpose: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise MissingToolError(f"`{name}` not found on PATH: install it ({purpose}).")
    return path


def _copy_maven_dependencies(pom: Path, target: Path, include: tuple[str, ...] = (), transitive: bool = True) -> None:
    mvn = require_tool("mvn", "Apache Maven, to fetch jars from Maven Central")
    require_tool("java", "OpenJDK 17, to run Kafka and Spark")
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    cmd = [
        mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
        f"-DoutputDirectory={partial}", "-DincludeScope=runtime",
    ]
    if include:
        cmd.append("-DincludeArtifactIds=" + ",".join(include))
    if not transitive:
        cmd.append("-DexcludeTransitive=true")
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        errors = [line for line in result.stdout.splitlines() if "ERROR" in line][:3]
        raise RuntimeError(f"maven could not resolve {pom.name}: " + " | ".join(errors))
    shutil.rmtree(target, ignore_errors=True)
    partial.rename(target)


def kafka_server_jars() -> Path:
    """Folder with the Apache Kafka broker's classpath."""
    target = cache_dir() / "kafka-libs"
    if not target.is_dir():
        _copy_maven_dependencies(STACK_FILES / "maven" / "kafka-server.pom.xml", target)
    return target


def spark_kafka_jars() -> list[str]:
    """Jar files that add Spark's Kafka source to the pinned pyspark."""
    target = cache_dir() / "spark-kafka-libs"
    if not target.is_dir():
        _copy_maven_dependencies(
            STACK_FILES / "maven" / "spark-kafka.pom.xml", target, SPARK_KAFKA_ARTIFACTS
        )
    return sorted(str(p) for p in target.glob("*.jar"))


def kafka_connect_jars() -> Path:
    """Folder with a Kafka Connect standalone worker's classpath (the benchmark's reference rows)."""
    target = cache_dir() / "kafka-connect-libs"
    if not target.is_dir():
        print("fetching Kafka Connect 4.1.1 from Maven Central (first use only) ...", flush=True)
        _copy_maven_dependencies(STACK_FILES / "maven" / "kafka-connect.pom.xml", target)
    return target


def pubsub_java_connector_plugin() -> Path:
    """A Kafka Connect plugin folder holding the released Java Pub/Sub connector (63 MB, shaded)."""
    target = cache_dir() / "pubsub-java-connector"
    if not target.is_dir():
        print("fetching com.google.cloud:pubsub-group-kafka-connector:1.3.3 from Maven Central (63 MB, first use "
              "only) ...", flush=True)
        _copy_maven_dependencies(STACK_FILES / "maven" / "pubsub-java-connector.pom.xml", target, transitive=False)
    return target


def pstest_binary() -> Path:
    """Google's pstest fake Pub/Sub server, built from our small Go main."""
    source = STACK_FILES / "pstest"
    digest = hashlib.sha256(b"".join((source / f).read_bytes() for f in ("main.go", "go.mod", "go.sum")))
    binary = cache_dir() / "bin" / f"pstest-server-{digest.hexdigest()[:12]}"  # rebuilt when the source changes
    if not binary.exists():
        go = require_tool("go", "the Go toolchain, to build Google's pstest Pub/Sub emulator")
        binary.parent.mkdir(parents=True, exist_ok=True)
        result = subprocess.run(
            [go, "build", "-o", str(binary), "."],
            cwd=STACK_FILES / "pstest", capture_output=True, text=True,
        )
        if result.returncode != 0:
            raise RuntimeError("building pstest failed: " + result.stderr.strip()[-800:])
    return binary
