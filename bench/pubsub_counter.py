"""The counting Pub/Sub endpoint (pubsub_counter/main.go, built here with Go like the stack's pstest): a bench's
Pub/Sub rows point ours and the Java connector at it instead of pstest, whose publish path and Pull cost cap both
sides. It keeps nothing: `stats()` says what arrived (messages, bytes, per second) and what subscriptions served and
got acked; `preload()` gives a subscription messages to serve."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from local_stack.fetch import go_binary, one_fetch_at_a_time
from local_stack.stack import _free_port

SOURCE = Path(__file__).parent / "pubsub_counter"


@one_fetch_at_a_time
def counter_binary() -> Path:
    return go_binary("pubsub-counter", SOURCE, ("main.go", "flood.go", "go.mod", "go.sum"), "the counting Pub/Sub endpoint")


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


def flood(counter: PubSubCounter, messages: int, size: int) -> dict:
    """The endpoint's own limit, a floor of it: a Go client (the same binary) publishing `messages` of `size` bytes in
    requests of 1,000, 8 in flight, as fast as it answers; what it sent, and the seconds it took."""
    done = subprocess.run([str(counter_binary()), "--flood", counter.endpoint, "--messages", str(messages),
                           "--size", str(size)], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"the flood client failed: {done.stderr.strip()[-400:]}")
    return json.loads(done.stdout)


@contextmanager
def running_counter() -> Iterator[PubSubCounter]:
    port = _free_port()
    stats_port = _free_port(avoid={port})
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
