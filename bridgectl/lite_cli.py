"""`bridgectl lite migrate`: a Pub/Sub Lite topic to Kafka (every subscription's place a consumer group's offset)
or to Cloud Pub/Sub (every subscription a Pub/Sub subscription), with its retained messages, verifiably and again
until the cut-over."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import click
import javaproperties
from confluent_kafka import KafkaException
from google.api_core.exceptions import GoogleAPICallError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from bridgectl.bridges_cli import parse_sets
from bridgectl.relay import say
from connectors.cloud_pubsub.clients import PubSubConnection
from connectors.errors import BatchError
from connectors.kafka.admin import KafkaAdmin
from connectors.kafka.client_keys import kafka_client_keys
from connectors.pubsublite.clients import LiteConnection
from connectors.pubsublite_migration.kafka_side import KafkaSide
from connectors.pubsublite_migration import report
from connectors.pubsublite_migration.lite_side import LiteSide
from connectors.pubsublite_migration.migrate import Migration, MigrationPlan
from connectors.pubsublite_migration.pubsub_side import MessageRefused, PubSubSide
from connectors.pubsublite_migration.to_pubsub import PubSubMigration
from connectors.pubsublite_migration.names import DEFAULT_NAME_FORMAT

# The plan and the reports are the output; remarks go to stderr (`say`). Piped to a file, the tables keep their
# columns whole instead of rich's 80 characters.
_stdout = Console(width=None if sys.stdout.isatty() else 200)


@click.group()
def lite() -> None:
    """Leaving Pub/Sub Lite: copy a topic and its subscriptions' places to Kafka."""


@lite.command()
@click.option("--topic", required=True, help="the Lite topic, projects/P/locations/L/topics/T")
@click.option("--to", "target", type=click.Choice(["kafka", "pubsub"]), default="kafka", show_default=True,
              help="where the topic goes: a Kafka topic, or a Cloud Pub/Sub topic")
@click.option("--kafka-topic", help="--to kafka: the Kafka topic to copy to (created with the Lite topic's "
                                    "partitions and retention when missing)")
@click.option("--bootstrap-servers", default=lambda: os.environ.get("KAFKA_BOOTSTRAP_SERVERS"),
              show_default="$KAFKA_BOOTSTRAP_SERVERS", help="the Kafka cluster")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="a Kafka client key (security.protocol, sasl.mechanism, sasl.jaas.config, ssl.ca.location, ...)")
@click.option("--properties", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="a Kafka client .properties file with those keys")
@click.option("--group-format", default=DEFAULT_NAME_FORMAT, show_default=True,
              help="--to kafka: each subscription's Kafka group: ${subscription}, ${project} and ${location} are "
                   "filled in")
@click.option("--pubsub-topic", help="--to pubsub: the Pub/Sub topic to copy to, projects/P/topics/T (created when "
                                     "missing)")
@click.option("--subscription-format", default=DEFAULT_NAME_FORMAT, show_default=True,
              help="--to pubsub: each subscription's Pub/Sub subscription, filled in as --group-format")
@click.option("--pubsub-endpoint", default="pubsub.googleapis.com:443", show_default=True,
              help="host:port of Cloud Pub/Sub ($PUBSUB_EMULATOR_HOST wins when set)")
@click.option("--subscription", "subscriptions", multiple=True,
              help="a subscription to carry over (its short name or path; default: every one of the topic)")
@click.option("--lite-endpoint", default=lambda: os.environ.get("PUBSUBLITE_API_ENDPOINT"),
              show_default="$PUBSUBLITE_API_ENDPOINT or the location's regional endpoint",
              help="host:port of Pub/Sub Lite")
@click.option("--dry-run", is_flag=True, help="print the plan and change nothing")
@click.option("--verify", "verify_only", is_flag=True, help="compare Lite and the target only; exit 0 when all match")
def migrate(topic: str, target: str, kafka_topic: str | None, bootstrap_servers: str | None, sets: tuple[str, ...],
            properties: Path | None, group_format: str, pubsub_topic: str | None, subscription_format: str,
            pubsub_endpoint: str, subscriptions: tuple[str, ...], lite_endpoint: str | None, dry_run: bool,
            verify_only: bool) -> None:
    """Copy a Lite topic to Kafka (each subscription's place a consumer group's offset) or to Cloud Pub/Sub (each
    subscription a Pub/Sub subscription given what it had not acknowledged); then verify."""
    lite_side = LiteSide(LiteConnection(api_endpoint=lite_endpoint,
                                        ca_file=os.environ.get("GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"),
                                        credentials_json=os.environ.get("GCP_CREDENTIALS_JSON") or None), topic)
    chosen = list(subscriptions) or None
    try:
        if target == "pubsub":
            if not pubsub_topic:
                raise click.UsageError("--to pubsub needs --pubsub-topic projects/P/topics/T")
            connection = PubSubConnection(endpoint=pubsub_endpoint, emulator_host=os.environ.get("PUBSUB_EMULATOR_HOST"),
                                          credentials_json=os.environ.get("GCP_CREDENTIALS_JSON") or None)
            try:
                pubsub = PubSubSide(connection, pubsub_topic)
            except ValueError as exc:
                raise click.UsageError(str(exc)) from None
            matched = _migrate_to_pubsub(PubSubMigration(lite_side, pubsub), chosen, subscription_format, dry_run,
                                         verify_only)
        else:
            if not kafka_topic:
                raise click.UsageError("--to kafka needs --kafka-topic NAME")
            kafka = KafkaSide(KafkaAdmin(_kafka_client(bootstrap_servers, sets, properties).connection()), kafka_topic)
            matched = _migrate(Migration(lite_side, kafka), chosen, group_format, dry_run, verify_only)
    except MessageRefused as exc:
        raise click.ClickException(f"{exc}; what was copied before it stays, and nothing after it in that "
                                   "partition was copied") from None
    except (KafkaException, GoogleAPICallError, BatchError) as exc:
        # One line; what the target acknowledged stays, and the next run goes on from there.
        raise click.ClickException(f"{type(exc).__name__}: {exc}; run it again to go on") from None
    if not matched:
        raise SystemExit(1)


def _kafka_client(bootstrap_servers: str | None, sets: tuple[str, ...], properties: Path | None):
    keys = javaproperties.loads(properties.read_text()) if properties else {}
    keys.update(parse_sets(sets))
    if bootstrap_servers and "bootstrap.servers" not in keys:
        keys["bootstrap.servers"] = bootstrap_servers
    if "bootstrap.servers" not in keys:
        raise click.UsageError("no Kafka cluster: --bootstrap-servers, bootstrap.servers or $KAFKA_BOOTSTRAP_SERVERS")
    try:
        return kafka_client_keys(keys)
    except ValueError as exc:
        raise click.UsageError(f"Kafka client keys: {exc}") from None


def _migrate(migration: Migration, subscriptions: list[str] | None, group_format: str, dry_run: bool,
             verify_only: bool) -> bool:
    with migration:
        try:
            plan = migration.plan(subscriptions, group_format)
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
        if dry_run:
            _print_plan(plan)
            return True
        if not verify_only:
            _copy_and_move_groups(migration, plan)
            for move in plan.groups:
                say(f"group {move.group} (Lite {move.subscription.rsplit('/', 1)[-1]}): {move.outcome}")
        return _print_verification(migration, plan)


def _migrate_to_pubsub(migration: PubSubMigration, subscriptions: list[str] | None, subscription_format: str,
                       dry_run: bool, verify_only: bool) -> bool:
    try:
        plan = migration.plan(subscriptions, subscription_format)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if dry_run:
        exists = "exists" if plan.pubsub_topic_exists else "created"
        _stdout.print(f"Lite topic {plan.topic.path} -> Pub/Sub topic {plan.pubsub_topic} ({exists}); the copy's "
                      f"position is Lite subscription {plan.position.rsplit('/', 1)[-1]}")
        _stdout.print(_table("messages", report.plan_rows(plan)))
        _stdout.print(_table("subscriptions", report.pubsub_plan_subscription_rows(plan)))
        _stdout.print("Each Pub/Sub subscription is created before the copy and gets every copied message its Lite "
                      "subscription had not acknowledged when it was copied.")
        return True
    if not verify_only:
        with _progress_bars(plan.copies) as advance:
            migration.copy_and_subscribe(plan, advance)
        copied = sum(c.copied for c in plan.copies)
        say(f"published {copied:,} messages to Pub/Sub topic {plan.pubsub_topic}" if copied
            else f"nothing new to publish to Pub/Sub topic {plan.pubsub_topic}")
        for move in plan.subscriptions:
            say(f"Pub/Sub subscription {move.pubsub_subscription.rsplit('/', 1)[-1]} "
                f"(Lite {move.subscription.rsplit('/', 1)[-1]}): {move.outcome}")
    checks, subscription_checks = migration.verify(plan)
    _stdout.print(_table("verification: messages", report.pubsub_partition_rows(checks)))
    _stdout.print(_table("verification: subscriptions", report.subscription_rows(subscription_checks)))
    again = sum(s.delivered_again for s in subscription_checks)
    if again:
        say(f"[yellow]{again:,} copied messages were acknowledged on Lite after they were copied: their Pub/Sub "
            "subscriptions will deliver them again (stop the Lite consumers before the last run)[/yellow]")
    ok = all(c.ok for c in checks) and all(s.ok for s in subscription_checks)
    if ok:
        say(f"[green]Pub/Sub topic {plan.pubsub_topic} holds every message Lite topic {plan.topic.path} holds, and "
            "every subscription gets what its Lite subscription has not acknowledged[/green]")
    else:
        say("[red]not all match[/red]: messages not copied yet come with another run of the migration")
    return ok


@contextlib.contextmanager
def _progress_bars(copies):
    """Per partition: copied of to copy, records/s and time left; yields progress(partition, n)."""
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[rate]}"), TimeRemainingColumn())
    to_copy = sum(c.to_copy for c in copies)
    with Progress(*columns, console=Console(stderr=True), transient=False, disable=to_copy == 0) as progress:
        tasks = {c.partition: progress.add_task(f"partition {c.partition}", total=c.to_copy, rate="") for c in copies}

        def advance(partition: int, n: int) -> None:
            task = progress.tasks[tasks[partition]]
            progress.update(tasks[partition], advance=n,
                            rate=f"{task.speed:,.0f} records/s" if task.speed else "")

        yield advance


def _copy_and_move_groups(migration: Migration, plan: MigrationPlan) -> None:
    with _progress_bars(plan.copies) as advance:
        migration.copy_and_move_groups(plan, advance)
    copied = sum(c.copied for c in plan.copies)
    say(f"copied {copied:,} messages to Kafka topic {plan.kafka_topic}" if copied
        else f"nothing new to copy to Kafka topic {plan.kafka_topic}")


def _print_plan(plan: MigrationPlan) -> None:
    kafka = (f"exists, {plan.kafka_partitions} partitions" if plan.kafka_partitions
             else f"created with {plan.topic.partitions} partitions")
    _stdout.print(f"Lite topic {plan.topic.path} -> Kafka topic {plan.kafka_topic} ({kafka}); "
                  f"read through {plan.through.rsplit('/', 1)[-1]}")
    _stdout.print(_table("messages", report.plan_rows(plan)))
    _stdout.print(_table("groups", report.plan_group_rows(plan)))
    for move in plan.groups:
        if move.members:
            say(f"[yellow]group {move.group} has {move.members} consumers: it will not be touched[/yellow]")
    _stdout.print("Each group gets the Kafka offset of the first copied message at or after its Lite cursor, once "
                  "the copy is done.")


def _print_verification(migration: Migration, plan: MigrationPlan) -> bool:
    checks, group_checks = migration.verify(plan)
    _stdout.print(_table("verification: messages", report.partition_rows(checks)))
    _stdout.print(_table("verification: groups", report.group_rows(group_checks)))
    ok = all(c.ok for c in checks) and all(g.ok for g in group_checks)
    if ok:
        say(f"[green]Kafka topic {plan.kafka_topic} holds every message Lite topic {plan.topic.path} holds, and "
            f"every group is at its subscription's place[/green]")
    else:
        say("[red]not all match[/red]: messages not copied yet or groups behind their subscriptions come right "
            "with another run of the migration")
    return ok


def _table(title: str, rows: list[dict[str, str]]) -> Table:
    table = Table(*(rows[0] if rows else ()), title=title)
    for row in rows:
        table.add_row(*(_marked(value) if name == "matches" else value for name, value in row.items()))
    return table


def _marked(matches: str) -> str:
    return "[green]ok[/green]" if matches == "yes" else "[red]differs[/red]"
