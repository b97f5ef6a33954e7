"""The metrics endpoint: reads the instance's new events every few seconds and serves the metrics over HTTP
(OpenMetrics or Prometheus text, as the scraper asks)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from dagster import DagsterInstance
from prometheus_client import disable_created_metrics, start_http_server

from bridge_metrics.event_reader import BridgeMetrics, EventReader
from connectors.bridges_file import BridgeConfigError, bridges_file_path, load_bridges
from connectors.plugin import Bridge

log = logging.getLogger(__name__)


class BridgesFile:
    """The bridges file, read again when it changes (a bridge added shows up without a restart); a file that
    no longer loads keeps the bridges it had, and says why once."""

    def __init__(self, path: Path | None = None):
        self.path = path or bridges_file_path()
        self._mtime: float | None = None
        self._bridges: list[Bridge] = []

    def bridges(self) -> list[Bridge]:
        mtime = self.path.stat().st_mtime if self.path.exists() else None
        if mtime != self._mtime:
            self._mtime = mtime
            try:
                self._bridges = load_bridges(self.path)
            except BridgeConfigError as exc:
                log.error("bridges file not read again, the metrics keep its last bridges: %s", exc)
        return self._bridges


def serve(port: int, host: str = "127.0.0.1", bridges_file: Path | None = None, interval_s: float = 5.0,
          partition_lag: bool = False, instance: DagsterInstance | None = None,
          stop: threading.Event | None = None) -> None:
    """Reads the history first (counters are totals over every run), then serves on `host:port` and reads
    what is new every `interval_s` until `stop` is set. Start it on an instance Dagster has already set up: on an
    empty DAGSTER_HOME it would create the storage's tables, racing a Dagster process doing the same."""
    disable_created_metrics()  # a `_created` series per label set only doubles what a scrape carries
    instance = instance or DagsterInstance.get()
    stop = stop or threading.Event()
    metrics, source = BridgeMetrics(), BridgesFile(bridges_file)
    reader = EventReader(instance, metrics, partition_lag=partition_lag)

    def read() -> None:
        try:
            reader.read(source.bridges())
        except Exception as exc:  # noqa: BLE001 - a storage hiccup: the endpoint keeps serving, the next read retries
            log.warning("reading the Dagster instance failed, trying again in %g s: %r", interval_s, exc)

    read()  # the history first: the first scrape already sees the totals
    server, _ = start_http_server(port, addr=host, registry=metrics.registry)
    log.info("bridge metrics on http://%s:%d/metrics", host, port)
    try:
        while not stop.wait(interval_s):
            read()
    finally:
        server.shutdown()
