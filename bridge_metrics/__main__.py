"""`python -m bridge_metrics`: the metrics endpoint of the bridges in BRIDGES_FILE, from the Dagster instance in
DAGSTER_HOME."""

import logging
from pathlib import Path

import click

from bridge_metrics.server import serve


@click.command()
@click.option("--port", type=click.IntRange(1, 65535), default=9464, show_default=True)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--bridges-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Default: BRIDGES_FILE, else bridges.yaml.")
@click.option("--interval", type=click.FloatRange(0.5, 300), default=5.0, show_default=True,
              help="Seconds between reads of the Dagster instance.")
@click.option("--partition-lag", is_flag=True,
              help="Also bridge_partition_lag_records, a series per Kafka partition of each Kafka sink.")
def main(port: int, host: str, bridges_file: Path | None, interval: float, partition_lag: bool) -> None:
    """Serve the bridges' metrics for Prometheus on /metrics."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(message)s")
    logging.getLogger("bridge_metrics").setLevel(logging.INFO)
    serve(port, host, bridges_file, interval, partition_lag)


main()
