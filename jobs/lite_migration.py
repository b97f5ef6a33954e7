"""`bridgectl lite migrate` as a Dagster job, launched from the UI's Launchpad with its config: its progress in the
run's log and as observations of the target topic's asset (Kafka or Cloud Pub/Sub), its plan and verification as
tables on the run. The run fails when the verification does not match (messages not copied yet, a group behind its
subscription, a Pub/Sub subscription missing messages)."""

import time
from typing import TYPE_CHECKING, Literal

from dagster import (
    AssetKey, AssetObservation, Config, Failure, MetadataValue, OpExecutionContext, TableColumn, TableRecord,
    TableSchema, in_process_executor, job, op,
)
from pydantic import Field, model_validator

from connectors import endpoints
from connectors.pubsublite_migration import report
from connectors.pubsublite_migration.names import DEFAULT_NAME_FORMAT
from resources.kafka import KafkaResource
from resources.pubsub import PubSubResource
from resources.pubsublite import PubSubLiteResource

if TYPE_CHECKING:
    from connectors.pubsublite_migration.migrate import Migration
    from connectors.pubsublite_migration.to_pubsub import PubSubMigration

LITE_MIGRATION_JOB = "lite_migration"
PROGRESS_EVERY_S = 5.0


class LiteMigrationConfig(Config):
    topic: str = Field(description="the Lite topic, projects/P/locations/L/topics/T")
    to: Literal["kafka", "pubsub"] = Field("kafka", description="where the topic goes: a Kafka topic, or a Cloud "
                                                                 "Pub/Sub topic")
    kafka_topic: str | None = Field(None, description="to kafka: the Kafka topic to copy to (created with the Lite "
                                                      "topic's partitions and retention when missing)")
    pubsub_topic: str | None = Field(None, description="to pubsub: the Pub/Sub topic to copy to, projects/P/topics/T "
                                                       "(created when missing)")
    subscriptions: list[str] = Field(default_factory=list, description="subscriptions to carry over, short names "
                                                                       "or paths (empty: every one of the topic)")
    group_format: str = Field(DEFAULT_NAME_FORMAT, description="each subscription's Kafka group: ${subscription}, "
                                                                "${project} and ${location} are filled in")
    subscription_format: str = Field(DEFAULT_NAME_FORMAT, description="to pubsub: each subscription's Pub/Sub "
                                                                      "subscription, filled in as group_format")
    pubsub_endpoint: str = Field("pubsub.googleapis.com:443", description="to pubsub: host:port of Cloud Pub/Sub "
                                                                          "(the pubsub resource's emulator wins)")
    verify_only: bool = Field(False, description="compare Lite and the target only, change nothing")

    @model_validator(mode="after")
    def _target_named(self) -> "LiteMigrationConfig":
        if self.to == "kafka" and not self.kafka_topic:
            raise ValueError("to: kafka needs kafka_topic")
        if self.to == "pubsub" and not self.pubsub_topic:
            raise ValueError("to: pubsub needs pubsub_topic (projects/P/topics/T)")
        return self


def _table(rows: list[dict[str, str]]) -> MetadataValue:
    columns = list(rows[0]) if rows else ["partition"]
    return MetadataValue.table(records=[TableRecord(row) for row in rows],
                               schema=TableSchema(columns=[TableColumn(name, "string") for name in columns]))


class _Progress:
    """Copied records per partition, logged and observed on the target topic's asset at most every few seconds."""

    def __init__(self, context: OpExecutionContext, asset: AssetKey, to_copy: dict[int, int]):
        self.context, self.to_copy, self.asset = context, to_copy, asset
        self.copied = dict.fromkeys(to_copy, 0)
        self.started = self.shown = time.monotonic()

    def __call__(self, partition: int, n: int) -> None:
        self.copied[partition] += n
        if time.monotonic() - self.shown >= PROGRESS_EVERY_S:
            self.show()

    def show(self) -> None:
        self.shown = time.monotonic()
        copied, total = sum(self.copied.values()), sum(self.to_copy.values())
        rate = copied / max(self.shown - self.started, 1e-9)
        self.context.log.info(f"copied {copied:,} of {total:,} messages ({rate:,.0f}/s)")
        self.context.log_event(AssetObservation(asset_key=self.asset, metadata={
            "lite_migration_copied": copied, "lite_migration_to_copy": total,
            "lite_migration_records_per_second": round(rate)}))


@op(description="Copy a Lite topic to Kafka or Cloud Pub/Sub, carry its subscriptions' places, and verify")
def migrate_lite_topic(context: OpExecutionContext, config: LiteMigrationConfig, kafka: KafkaResource,
                       pubsub: PubSubResource, pubsublite: PubSubLiteResource) -> None:
    # Imported here: the copy's machinery brings Arrow, which a code server (it only builds the definitions) would
    # otherwise hold for nothing.
    from connectors.pubsublite_migration.kafka_side import KafkaSide
    from connectors.pubsublite_migration.lite_side import LiteSide
    from connectors.pubsublite_migration.migrate import Migration
    from connectors.pubsublite_migration.pubsub_side import PubSubSide
    from connectors.pubsublite_migration.to_pubsub import PubSubMigration

    lite = LiteSide(pubsublite.connection(), config.topic)
    if config.to == "pubsub":
        side = PubSubSide(pubsub.connection(config.pubsub_endpoint),
                          config.pubsub_topic)
        metadata, ok = _to_pubsub(context, config, PubSubMigration(lite, side),
                                  AssetKey(endpoints.pubsub_topic(side.project, side.topic_id).key))
    else:
        metadata, ok = _to_kafka(context, config, Migration(lite, KafkaSide(kafka.admin(), config.kafka_topic)),
                                 AssetKey(endpoints.kafka_topic(config.kafka_topic).key))
    if not ok:
        target = config.kafka_topic if config.to == "kafka" else config.pubsub_topic
        raise Failure(description=f"Lite topic {config.topic} and {target} do not all match (messages not copied "
                                  "yet, groups behind their subscriptions, or subscriptions missing messages): run it "
                                  "again", metadata=metadata)
    context.add_output_metadata(metadata)


def _to_kafka(context: OpExecutionContext, config: LiteMigrationConfig, migration: "Migration",
              asset: AssetKey) -> tuple[dict, bool]:
    with migration:
        plan = migration.plan(config.subscriptions or None, config.group_format)
        metadata = {"plan": _table(report.plan_rows(plan)), "groups_before": _table(report.plan_group_rows(plan))}
        if not config.verify_only:
            progress = _Progress(context, asset, {c.partition: c.to_copy for c in plan.copies})
            migration.copy_and_move_groups(plan, progress)
            progress.show()
            for move in plan.groups:
                context.log.info(f"group {move.group}: {move.outcome}")
            metadata["copied"] = sum(c.copied for c in plan.copies)
        checks, group_checks = migration.verify(plan)
    metadata["verification"] = _table(report.partition_rows(checks))
    metadata["group_verification"] = _table(report.group_rows(group_checks))
    return metadata, all(c.ok for c in checks) and all(g.ok for g in group_checks)


def _to_pubsub(context: OpExecutionContext, config: LiteMigrationConfig, migration: "PubSubMigration",
               asset: AssetKey) -> tuple[dict, bool]:
    plan = migration.plan(config.subscriptions or None, config.subscription_format)
    metadata = {"plan": _table(report.plan_rows(plan)),
                "subscriptions_before": _table(report.pubsub_plan_subscription_rows(plan))}
    if not config.verify_only:
        progress = _Progress(context, asset, {c.partition: c.to_copy for c in plan.copies})
        migration.copy_and_subscribe(plan, progress)
        progress.show()
        for move in plan.subscriptions:
            context.log.info(f"Pub/Sub subscription {move.pubsub_subscription}: {move.outcome}")
        metadata["copied"] = sum(c.copied for c in plan.copies)
    checks, subscription_checks = migration.verify(plan)
    metadata["verification"] = _table(report.pubsub_partition_rows(checks))
    metadata["subscription_verification"] = _table(report.subscription_rows(subscription_checks))
    return metadata, all(c.ok for c in checks) and all(s.ok for s in subscription_checks)


@job(name=LITE_MIGRATION_JOB, executor_def=in_process_executor,
     description="Leaving Pub/Sub Lite: a topic and its subscriptions' places to Kafka or Cloud Pub/Sub "
                 "(bridgectl lite migrate)")
def lite_migration_job() -> None:
    migrate_lite_topic()
