"""The counting Pub/Sub endpoint (pubsub_counter/main.go, built here with Go like the stack's pstest): a bench's
Pub/Sub rows point ours and the Java connector at it instead of pstest, whose publish path and Pull cost cap both
sides. It keeps nothing: `stats()` says what arrived (messages, bytes, per second) and what subscriptions served and
got acked; `preload()` gives a subscription messages to serve."""

from __future__ import annotations

import hashlib
import json
import socket
import subprocess
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from bridgectl.fetch import first_run_step, one_fetch_at_a_time, require_tool
from bridgectl.paths import cache_dir

SOURCE = Path(__file__).parent / "pubsub_counter"


@one_fetch_at_a_time
def counter_binary() -> Path:
    digest = hashlib.sha256(b"".join((SOURCE / name).read_bytes() for name in ("main.go", "go.mod", "go.sum")))
    binary = cache_dir() / "bin" / f"pubsub-counter-{digest.hexdigest()[:12]}"  # rebuilt when the source changes
    if not binary.exists():
        go = require_tool("go", "the Go toolchain, to build the benchmarks' counting Pub/Sub endpoint")
        binary.parent.mkdir(parents=True, exist_ok=True)
        with first_run_step("building the counting Pub/Sub endpoint (Go modules from the Go proxy)"):
            built = subprocess.run([go, "build", "-o", str(binary), "."], cwd=SOURCE, capture_output=True, text=True)
        if built.returncode != 0:
            raise RuntimeError("building the counting Pub/Sub endpoint failed: " + built.stderr.strip()[-800:])
    return binary


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass(frozen=True)
class PubSubCounter:
    endpoint: str  # host:port of its gRPC (plaintext: PUBSUB_EMULATOR_HOST, or the Java connector's TLS front)
    stats_url: str

    def stats(self) -> dict:
        with urllib.request.urlopen(f"{self.stats_url}/stats", timeout=10) as answer:
            return json.load(answer)

    def reset(self) -> None:
        urllib.request.urlopen(urllib.request.Request(f"{self.stats_url}/reset", method="POST"), timeout=10).close()

    def preload(self, subscription: str, messages: int, size: int) -> None:
        """`messages` more messages of `size` bytes for `subscription` (a path) to serve; it exists from then on."""
        url = f"{self.stats_url}/preload?subscription={subscription}&messages={messages}&size={size}"
        urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=10).close()


@contextmanager
def running_counter() -> Iterator[PubSubCounter]:
    port, stats_port = _free_port(), _free_port()
    process = subprocess.Popen([str(counter_binary()), "--port", str(port), "--stats-port", str(stats_port)],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        ready = process.stdout.readline()
        if "listening" not in ready:
            raise RuntimeError(f"the counting Pub/Sub endpoint did not start (it said {ready.strip()!r})")
        yield PubSubCounter(f"127.0.0.1:{port}", f"http://127.0.0.1:{stats_port}")
    finally:
        process.terminate()
        process.wait(10)
