"""How to reach a Kafka cluster, as librdkafka (confluent-kafka) takes it: admin, the range reader, producers."""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Literal


@dataclass(frozen=True)
class KafkaConnection:
    bootstrap_servers: str
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = None
    sasl_username: str | None = None
    sasl_password: str | None = None
    # TLS (security.protocol SSL or SASL_SSL): PEM files, as librdkafka takes them (ssl.ca.location and so on).
    ssl_ca_location: str | None = None
    ssl_certificate_location: str | None = None
    ssl_key_location: str | None = None
    ssl_key_password: str | None = None

    def __repr__(self) -> str:  # never print the passwords
        return f"KafkaConnection(bootstrap_servers={self.bootstrap_servers!r}, security_protocol={self.security_protocol!r})"

    def librdkafka_config(self) -> dict[str, str]:
        config = {"bootstrap.servers": self.bootstrap_servers, "security.protocol": self.security_protocol}
        if self.sasl_mechanism:
            config.update({"sasl.mechanism": self.sasl_mechanism, "sasl.username": self.sasl_username or "",
                           "sasl.password": self.sasl_password or ""})
        tls = {"ssl.ca.location": self.ssl_ca_location, "ssl.certificate.location": self.ssl_certificate_location,
               "ssl.key.location": self.ssl_key_location, "ssl.key.password": self.ssl_key_password}
        config.update({key: value for key, value in tls.items() if value})
        return config


class _OncePerMinute(logging.Filter):
    """librdkafka repeats a failing connection's line every few milliseconds to a second for as long
    as a broker is down; one line per distinct message a minute says the same."""

    def __init__(self, interval_s: float = 60.0):
        super().__init__()
        self._interval_s = interval_s
        self._last: dict[str, float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key = re.sub(r"\d+", "#", record.getMessage())  # timings and ids differ between repeats
        now = time.monotonic()
        if now - self._last.get(key, float("-inf")) < self._interval_s:
            return False
        self._last[key] = now
        return True


def client_logger() -> logging.Logger:
    """The logger every librdkafka client of this process writes to (`"logger": client_logger()`),
    rate-limited; set per client, because a logger that travels to a Spark task loses its filter."""
    logger = logging.getLogger("kafka-pubsub-bridge.librdkafka")
    if not logger.filters:
        logger.addFilter(_OncePerMinute())
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("librdkafka %(levelname)s %(message)s"))
        logger.addHandler(handler)
        logger.propagate = False
    return logger


def refused_for_good(error) -> bool:
    """Kafka will never take this one record: its size, or a record the topic cannot hold (a keyless
    record on a compacted topic). Other errors (Kafka down, no permission) are about the system, not
    the record, and must fail the task instead of skipping records."""
    from confluent_kafka import KafkaError

    return error.code() in (KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.INVALID_MSG_SIZE, KafkaError.INVALID_RECORD,
                            KafkaError.INVALID_MSG, KafkaError.RECORD_LIST_TOO_LARGE)


# How long a committer waits for its coordinator (Kafka away): longer than a broker restart takes.
COMMITTER_WAIT_MS = 10_000


def group_committer(client_config: dict, group: str):
    """A consumer of `group` that never subscribes: it only commits offsets with metadata, or reads them back (the
    always-on streams' leases, reports and slot ends are such commits)."""
    from confluent_kafka import Consumer

    # reconnect.backoff.ms: librdkafka (2.16) drops the bootstrap connection once it knows the brokers, taking the
    # first coordinator lookup with it, and waits half this backoff before it looks again: a new committer's first
    # commit or read took 62 ms with the default (100 ms), 20 ms with this one (each batch's lease, and each of its
    # tasks' lease and progress, make one).
    # session.timeout.ms: a commit (or a close after one) made while Kafka is away waits for the group's coordinator
    # this long (measured: 45 s with the default, 2.9 s with 2 s); one made just as Kafka goes away can still wait
    # minutes, which is why a run's lease stop does not wait for it (stream_lease.STOP_WAIT_S). The group is never
    # joined, so the broker never sees this timeout.
    return Consumer({**client_config, "group.id": group, "enable.auto.commit": False, "reconnect.backoff.ms": 20,
                     "session.timeout.ms": COMMITTER_WAIT_MS, "log_level": 3, "logger": client_logger()})


def source_producer_config(client_config: dict, outage_timeout_s: float) -> dict:
    """How the sources write Kafka: an idempotent producer acknowledged by every replica, records lingering 5 ms,
    keyed records placed as the Java client's default partitioner places them (murmur2). A record Kafka has not
    acknowledged within the bridge's outage timeout fails its task (librdkafka's default waits 5 minutes: once, after
    a 2 s broker restart, a source's producer waited all of them)."""
    return {**client_config, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
            "message.timeout.ms": int(outage_timeout_s * 1000),
            "partitioner": "murmur2_random", "log_level": 3, "logger": client_logger()}


_KEPT_CLIENTS: dict[tuple, object] = {}
_KEPT_CLIENTS_LOCK = threading.Lock()


@contextlib.contextmanager
def kept_client(config: dict, make: Callable[[dict], object] | None = None) -> Iterator:
    """A Kafka client for `config`, kept in this process for the next task after this one: Kafka acknowledged a new
    idempotent producer's first record about 0.5 s after it was made (measured on the local broker, warm), a cost
    every micro-batch's task of the Cloud and Lite sources and the Kafka sink paid; a new consumer's first offset
    lookup took a tenth of an exactly-once task's time. A client serves one user at a time (a second one at once
    gets its own); one whose user failed is not kept, so the next task starts clean. The user flushes a producer
    before leaving. `make` builds a new one (default: confluent-kafka's Producer)."""
    from confluent_kafka import Producer

    make = make or Producer
    key = (getattr(make, "__qualname__", repr(make)),
           *sorted((name, repr(value)) for name, value in config.items() if name != "logger"))
    with _KEPT_CLIENTS_LOCK:
        client = _KEPT_CLIENTS.pop(key, None)
    if client is None:
        client = make(config)
    yield client  # an error here leaves the client to be collected
    with _KEPT_CLIENTS_LOCK:
        _KEPT_CLIENTS.setdefault(key, client)
