"""`bridgectl lite migrate`: a Pub/Sub Lite topic to Kafka, with its retained messages and every subscription's
place as a Kafka consumer group's offset, verifiably and again until the cut-over."""

from __future__ import annotations

import os
from pathlib import Path

import click
import javaproperties
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from bridgectl.bridges_cli import _parse_sets
from bridgectl.relay import say
from connectors.kafka.admin import KafkaAdmin
from connectors.kafka.client_keys import kafka_client_keys
from connectors.pubsublite.clients import LiteConnection
from connectors.pubsublite_migration.kafka_side import KafkaSide
from connectors.pubsublite_migration.lite_side import LiteSide
from connectors.pubsublite_migration.migrate import DEFAULT_GROUP_FORMAT, Migration, MigrationPlan

_stdout = Console()  # the plan and the reports are the output; remarks go to stderr (`say`)


@click.group()
def lite() -> None:
    """Leaving Pub/Sub Lite: copy a topic and its subscriptions' places to Kafka."""


@lite.command()
@click.option("--topic", required=True, help="the Lite topic, projects/P/locations/L/topics/T")
@click.option("--kafka-topic", required=True, help="the Kafka topic to copy to (created with the Lite topic's "
                                                   "partitions and retention when missing)")
@click.option("--bootstrap-servers", default=lambda: os.environ.get("KAFKA_BOOTSTRAP_SERVERS"),
              show_default="$KAFKA_BOOTSTRAP_SERVERS", help="the Kafka cluster")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
              help="a Kafka client key (security.protocol, sasl.mechanism, sasl.jaas.config, ssl.ca.location, ...)")
@click.option("--properties", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="a Kafka client .properties file with those keys")
@click.option("--subscription", "subscriptions", multiple=True,
              help="a subscription to carry over (its short name or path; default: every one of the topic)")
@click.option("--group-format", default=DEFAULT_GROUP_FORMAT, show_default=True,
              help="each subscription's Kafka group: ${subscription}, ${project} and ${location} are filled in")
@click.option("--lite-endpoint", default=lambda: os.environ.get("PUBSUBLITE_API_ENDPOINT"),
              show_default="$PUBSUBLITE_API_ENDPOINT or the location's regional endpoint",
              help="host:port of Pub/Sub Lite")
@click.option("--dry-run", is_flag=True, help="print the plan and change nothing")
@click.option("--verify", "verify_only", is_flag=True, help="compare Lite and Kafka only; exit 0 when all match")
def migrate(topic: str, kafka_topic: str, bootstrap_servers: str | None, sets: tuple[str, ...],
            properties: Path | None, subscriptions: tuple[str, ...], group_format: str, lite_endpoint: str | None,
            dry_run: bool, verify_only: bool) -> None:
    """Copy a Lite topic to Kafka and commit each subscription's place to a consumer group; then verify."""
    keys = javaproperties.loads(properties.read_text()) if properties else {}
    keys.update(_parse_sets(sets))
    if bootstrap_servers and "bootstrap.servers" not in keys:
        keys["bootstrap.servers"] = bootstrap_servers
    if "bootstrap.servers" not in keys:
        raise click.UsageError("no Kafka cluster: --bootstrap-servers, bootstrap.servers or $KAFKA_BOOTSTRAP_SERVERS")
    try:
        client = kafka_client_keys(keys)
    except ValueError as exc:
        raise click.UsageError(f"Kafka client keys: {exc}") from None
    connection = LiteConnection(api_endpoint=lite_endpoint, ca_file=os.environ.get("GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"),
                                credentials_json=os.environ.get("GCP_CREDENTIALS_JSON") or None)
    migration = Migration(LiteSide(connection, topic), KafkaSide(KafkaAdmin(client.connection()), kafka_topic))
    try:
        plan = migration.plan(list(subscriptions) or None, group_format)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if dry_run:
        _print_plan(plan)
        return
    if not verify_only:
        _copy(migration, plan)
        migration.move_groups(plan)
        for move in plan.groups:
            say(f"group {move.group} (Lite {move.subscription.rsplit('/', 1)[-1]}): {move.outcome}")
    if not _print_verification(migration, plan):
        raise SystemExit(1)


def _copy(migration: Migration, plan: MigrationPlan) -> None:
    if plan.to_copy == 0:
        say(f"nothing new to copy to Kafka topic {plan.kafka_topic}")
        migration.copy(plan)  # creates the topic when missing
        return
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[rate]}"), TimeRemainingColumn())
    with Progress(*columns, console=Console(stderr=True), transient=False) as progress:
        tasks = {c.partition: progress.add_task(f"partition {c.partition}", total=c.to_copy, rate="")
                 for c in plan.copies}

        def advance(partition: int, n: int) -> None:
            task = progress.tasks[tasks[partition]]
            progress.update(tasks[partition], advance=n,
                            rate=f"{task.speed:,.0f} records/s" if task.speed else "")

        migration.copy(plan, advance)
    copied = sum(c.copied for c in plan.copies)
    say(f"copied {copied:,} messages to Kafka topic {plan.kafka_topic}")


def _print_plan(plan: MigrationPlan) -> None:
    kafka = (f"exists, {plan.kafka_partitions} partitions" if plan.kafka_partitions
             else f"created with {plan.topic.partitions} partitions")
    _stdout.print(f"Lite topic {plan.topic.path} -> Kafka topic {plan.kafka_topic} ({kafka}); "
                  f"read through {plan.through.rsplit('/', 1)[-1]}")
    table = Table("partition", "copy from Lite offset", "Lite head", "to copy", title="messages")
    for c in plan.copies:
        table.add_row(str(c.partition), f"{c.start:,}", f"{c.end:,}", f"{c.to_copy:,}")
    _stdout.print(table)
    table = Table("subscription", "group", "partition", "Lite cursor", "group's offset now", title="groups")
    for move in plan.groups:
        for p, cursor in sorted(move.cursors.items()):
            now = move.committed_before.get(p)
            table.add_row(move.subscription.rsplit("/", 1)[-1], move.group, str(p), f"{cursor:,}",
                          "none" if now is None else f"{now:,}")
        if move.members:
            table.add_row("", f"[yellow]{move.members} consumers in the group: it will not be touched[/yellow]",
                          "", "", "")
    _stdout.print(table)
    _stdout.print("Each group gets the Kafka offset of the first copied message at or after its Lite cursor, once "
                  "the copy is done.")


def _print_verification(migration: Migration, plan: MigrationPlan) -> bool:
    checks, group_checks = migration.verify(plan)
    table = Table("partition", "Kafka records", "Lite records", "Lite offsets", "Kafka hash", "Lite hash",
                  "only on Kafka", "not copied", "", title="verification: messages")
    for c in checks:
        offsets = "-" if c.first_lite_offset is None else f"{c.first_lite_offset:,}..{c.last_lite_offset:,}"
        table.add_row(str(c.partition), f"{c.kafka_records:,}", f"{c.lite_records:,}", offsets, c.kafka_hash,
                      c.lite_hash, f"{c.kafka_only:,}", f"{c.not_copied:,}", _mark(c.ok))
    _stdout.print(table)
    table = Table("subscription", "group", "partition", "Lite cursor", "expected offset", "group's offset",
                  "behind", "", title="verification: groups")
    for g in group_checks:
        table.add_row(g.subscription.rsplit("/", 1)[-1], g.group, str(g.partition), f"{g.lite_cursor:,}",
                      f"{g.expected_offset:,}", "none" if g.group_offset is None else f"{g.group_offset:,}",
                      f"{g.behind:,}", _mark(g.ok))
    _stdout.print(table)
    ok = all(c.ok for c in checks) and all(g.ok for g in group_checks)
    if ok:
        say(f"[green]Kafka topic {plan.kafka_topic} holds every message Lite topic {plan.topic.path} holds, and "
            f"every group is at its subscription's place[/green]")
    else:
        say("[red]not all match[/red]: messages not copied yet or groups behind their subscriptions come right "
            "with another run of the migration")
    return ok


def _mark(ok: bool) -> str:
    return "[green]ok[/green]" if ok else "[red]differs[/red]"
