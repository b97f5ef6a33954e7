"""`bridgectl`: the local stack, the demo, and the one-command local product."""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bridgectl.bridge_offsets_cli import offsets
from bridgectl.bridges_cli import bridges
from local_stack.child_signals import hear_sigint
from local_stack.fetch import MissingToolError
from bridgectl.lite_cli import lite
from local_stack.stack import CLUSTER_SERVICES, SERVICES, LocalStack, default_dagster_url
from local_stack.paths import PROJECT_ROOT
from bridgectl.relay import OutputRelay, say
from connectors.bridges_file import BridgeConfigError, load_bridges

DAGSTER_STOP_GRACE_S = 45
# `dagster dev` warns on every start that `dg dev` supersedes it; `dg` would need a [tool.dg] block, which
# makes a bare `dagster dev` ignore workspace.yaml. The warning is filtered by its text, not its class:
# a class filter in PYTHONWARNINGS would import dagster at the start of every Python process.
DAGSTER_DEV_SUPERSEDED = "ignore:Function `dev_command` is superseded"


def _fail(message: str) -> None:
    say(f"[red]error:[/red] {escape(message)}")  # a message may hold brackets ("[topic:]partition"): not markup
    sys.exit(1)


class _Commands(click.Group):
    """Every command's known failures (a missing tool, a port in the way, a bad bridges file) end in one line."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except (click.exceptions.Exit, click.ClickException):  # --help, usage errors: click's own
            raise
        except (MissingToolError, RuntimeError, BridgeConfigError) as exc:
            _fail(str(exc))


@click.group(cls=_Commands)
def main() -> None:
    """Kafka <-> Pub/Sub bridges as Dagster assets: local stack and demo."""


bridges.add_command(offsets)  # here, not in bridges_cli: the offsets module uses bridges_cli's helpers
main.add_command(bridges)
main.add_command(lite)


@main.group()
def local() -> None:
    """The local servers: Kafka (KRaft), pstest (Pub/Sub), our Lite server, moto (S3) and Spark Connect."""


@local.command()
@click.option("--cluster", is_flag=True,
              help="also a Spark standalone cluster (master, two workers) and a Spark Connect server on it "
                   "behind TLS and a token")
def up(cluster: bool) -> None:
    """Start the servers in the background (idempotent) and wait until each is ready."""
    stack = LocalStack()
    stack.up(log=say)
    if cluster:
        stack.up(log=say, only=CLUSTER_SERVICES)
    say('Point a shell at it with: eval "$(bridgectl local env' + (' --cluster' if cluster else '') + ')"')


@local.command()
def down() -> None:
    """Stop exactly the servers `up` started; their data stays for the next `up`."""
    LocalStack().down(log=say)


@local.command()
def status() -> None:
    """What runs where."""
    stack = LocalStack()
    table = Table("service", "address", "pid", "state")
    for s in stack.status():
        table.add_row(s.name, s.address, str(s.pid or "-"), "[green]running[/green]" if s.running else "stopped")
    Console().print(table)
    Console().print(f"state and logs: {stack.home}")


@local.command()
@click.option("--cluster", is_flag=True, help="runs go to the local cluster's Spark Connect server (TLS, token)")
def env(cluster: bool) -> None:
    """Print `export` lines for the stack: eval "$(bridgectl local env)"."""
    stack = LocalStack()
    for name, value in (stack.cluster_env() if cluster else stack.env()).items():
        click.echo(f"export {name}={shlex.quote(value)}")


@main.command("demo-setup")
def demo_setup() -> None:
    """Create the demo topics, subscriptions and bucket on the running local stack (idempotent)."""
    from local_stack.demo import create_demo_resources

    stack = LocalStack()
    if not all(s.running for s in stack.status()):
        _fail("the local stack is not running: bridgectl local up")
    os.environ.update(stack.env())
    created = create_demo_resources(os.environ["KAFKA_BOOTSTRAP_SERVERS"])
    for item in created:
        say(f"created {item}")
    if not created:
        say("the demo resources exist already")


@main.command()
@click.option("--port", default=3000, show_default=True, help="Dagster UI port")
@click.option("--rate", default=20, show_default=True, help="demo records per second per topic")
def dev(port: int, rate: int) -> None:
    """Run the product locally: servers, demo topics and traffic, then `dagster dev` (Ctrl-C stops all)."""
    from local_stack.demo import TrafficGenerator, create_demo_resources

    stack = LocalStack()
    ui_url = f"http://127.0.0.1:{port}"
    env_vars = {**stack.env(), "DAGSTER_URL": ui_url}
    os.environ.update(env_vars)  # the bridges file may name the stack's endpoints (${env:SCHEMA_REGISTRY_URL})
    load_bridges()  # a bad bridges file is told before anything starts
    was_running = {s.name for s in stack.status() if s.running}
    stack.up(log=say)
    os.makedirs(env_vars["DAGSTER_HOME"], exist_ok=True)
    for item in create_demo_resources(env_vars["KAFKA_BOOTSTRAP_SERVERS"]):
        say(f"created {item}")
    traffic = TrafficGenerator(env_vars["KAFKA_BOOTSTRAP_SERVERS"], rate, env_vars["SCHEMA_REGISTRY_URL"])
    traffic.start()
    log_path = stack.home / "dagster-dev.log"
    say(f"demo traffic: {rate} records/s to each demo topic")
    say(f"[bold]Dagster UI: {ui_url}[/bold]  (Ctrl-C to stop; dagster dev's full log: {log_path})")

    dagster = shutil.which("dagster", path=os.path.dirname(sys.executable)) or "dagster"
    # dagster dev runs in its own process group, so a terminal's Ctrl-C reaches only us; we hand
    # it exactly one SIGINT (a second one during its shutdown leaves it hanging) and, once it is
    # done, end whatever is left in its group, so no server or run worker outlives us.
    proc = subprocess.Popen(
        # warning: the daemons' heartbeat lines (sensor ticks, queue checks) stay out of the terminal; the
        # runs' own lines (records moved, lag left, failures) come from the run workers and stay in it.
        [dagster, "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port), "--log-level", "warning"],
        cwd=PROJECT_ROOT, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        env={**os.environ, "PYTHONWARNINGS": DAGSTER_DEV_SUPERSEDED},
        preexec_fn=hear_sigint,
    )
    relay = OutputRelay(proc.stdout, log_path)
    relay.start()
    stop_requested_at: float | None = None
    metrics: subprocess.Popen | None = None
    metrics_end_told = False

    def stop(*_):
        nonlocal stop_requested_at
        if stop_requested_at is None:
            stop_requested_at = time.monotonic()
            say("stopping ...")
            proc.send_signal(signal.SIGINT)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        while (code := proc.poll()) is None:
            if metrics is None and stop_requested_at is None and _answers(f"{ui_url}/server_info"):
                # Only now: dagster dev has set up its instance's storage, which the endpoint would race to create.
                metrics = _start_metrics(stack, env_vars["PROMETHEUS_URL"])
                stack.record_ui_url(ui_url)  # `bridgectl local env` and `bridgectl bridges` find it there
            if metrics is not None and not metrics_end_told and metrics.poll() is not None:
                metrics_end_told = True
                say(_metrics_ended(stack, metrics.returncode))
            # dagster dev can hang in its shutdown (seen with runs in flight); give it a while, then end it.
            if stop_requested_at is not None and time.monotonic() - stop_requested_at > DAGSTER_STOP_GRACE_S:
                say(f"dagster dev did not stop within {DAGSTER_STOP_GRACE_S}s; ending its processes")
                break
            time.sleep(0.5)
    finally:
        stack.record_ui_url(None)
        _end_process_group(proc.pid)
        if metrics is not None:
            _end_process_group(metrics.pid, grace_s=5)
    relay.join(timeout=5)
    traffic.stop()
    say(f"demo traffic stopped after {traffic.produced} records")
    # The servers this command started stop with it, whatever else was running before (those stay, said).
    stack.down(log=say, only=tuple(name for name in SERVICES if name not in was_running))
    if was_running:
        say(f"left running, as they were before: {', '.join(sorted(was_running))} (bridgectl local down stops them)")
    sys.exit(0 if stop_requested_at is not None else code)


@main.command()
@click.option("--url", default=lambda: default_dagster_url(), help="the Dagster UI (default: as `bridgectl bridges`)")
@click.option("--out", default=".local/screenshots", show_default=True, type=click.Path(path_type=Path))
@click.option("--bridge", default="demo_orders_to_pubsub", show_default=True, help="whose asset and checks to show")
def screenshots(url: str, out: Path, bridge: str) -> None:
    """PNG screenshots of a running UI in headless Chromium: lineage, a bridge's checks and page, runs, sensors."""
    from bridgectl.screenshots import take

    for path in take(url, out, bridge):
        say(f"wrote {path}")


@main.group()
def s3() -> None:
    """The S3 Block-GZIP archive."""


@s3.command("read")
@click.option("--bucket", required=True)
@click.option("--prefix", default="", show_default=True)
@click.option("--topic", required=True)
@click.option("--partition", type=int, required=True)
@click.option("--offset", type=int, default=0, show_default=True, help="first Kafka offset to print")
@click.option("--limit", type=int, default=None, help="stop after this many records")
@click.option("--endpoint", default=None, help="S3 endpoint (default: AWS_ENDPOINT_URL or AWS)")
def s3_read(bucket: str, prefix: str, topic: str, partition: int, offset: int, limit: int | None,
            endpoint: str | None) -> None:
    """Print archived records of a topic-partition from an offset on, as `offset<TAB>record`."""
    import itertools

    import boto3

    from connectors.s3_block_gzip_sink.reader import read_from_offset

    client = boto3.client("s3", endpoint_url=endpoint)
    records = read_from_offset(client, bucket, prefix, topic, partition, offset)
    for record_offset, line in itertools.islice(records, limit):
        sys.stdout.buffer.write(f"{record_offset}\t".encode() + line + b"\n")


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1):
            return True
    except OSError:
        return False


def _start_metrics(stack: LocalStack, prometheus_url: str) -> subprocess.Popen:
    """The bridges' metrics endpoint, read from the same instance as the UI; the stack's Prometheus scrapes it."""
    port = stack.ports()["metrics"]
    with open(_metrics_log(stack), "ab") as log:
        process = subprocess.Popen([sys.executable, "-m", "bridge_metrics", "--port", str(port)], cwd=PROJECT_ROOT,
                                   start_new_session=True, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
    say(f"metrics: http://127.0.0.1:{port}/metrics, scraped by Prometheus at {prometheus_url} "
        f"(alerts: {prometheus_url}/classic/alerts, graphs: {prometheus_url}/classic/graph)")
    return process


def _metrics_log(stack: LocalStack) -> Path:
    return stack.home / "logs" / "bridge-metrics.log"


def _metrics_ended(stack: LocalStack, code: int) -> str:
    """One line for a metrics endpoint that ended while the UI runs (its port taken, say): its last log line."""
    log = _metrics_log(stack)
    lines = log.read_text(errors="replace").strip().splitlines() if log.exists() else []
    last = lines[-1].strip() if lines else "no output"
    return f"the metrics endpoint ended (exit {code}): {last} (its log: {log}); the UI goes on without it"


def _end_process_group(pgid: int, grace_s: float = 20) -> None:
    """Stop what is left of a process group: SIGTERM, then SIGKILL after a grace period."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.5)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


if __name__ == "__main__":
    main()
