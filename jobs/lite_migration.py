"""`bridgectl lite migrate` as a Dagster job, launched from the UI's Launchpad with its config: its progress in the
run's log and as observations of the Kafka topic's asset, its plan and verification as tables on the run. The run
fails when the verification does not match (messages not copied yet, a group behind its subscription)."""

import time

from dagster import (
    AssetKey, AssetObservation, Config, Failure, MetadataValue, OpExecutionContext, TableColumn, TableRecord,
    TableSchema, in_process_executor, job, op,
)
from pydantic import Field

from connectors import endpoints
from connectors.pubsublite_migration import report
from connectors.pubsublite_migration.kafka_side import KafkaSide
from connectors.pubsublite_migration.lite_side import LiteSide
from connectors.pubsublite_migration.migrate import DEFAULT_GROUP_FORMAT, Migration
from resources.kafka import KafkaResource
from resources.pubsublite import PubSubLiteResource

LITE_MIGRATION_JOB = "lite_migration"
PROGRESS_EVERY_S = 5.0


class LiteMigrationConfig(Config):
    topic: str = Field(description="the Lite topic, projects/P/locations/L/topics/T")
    kafka_topic: str = Field(description="the Kafka topic to copy to (created with the Lite topic's partitions and "
                                         "retention when missing)")
    subscriptions: list[str] = Field(default_factory=list, description="subscriptions to carry over, short names "
                                                                       "or paths (empty: every one of the topic)")
    group_format: str = Field(DEFAULT_GROUP_FORMAT, description="each subscription's Kafka group: ${subscription}, "
                                                                "${project} and ${location} are filled in")
    verify_only: bool = Field(False, description="compare Lite and Kafka only, change nothing")


def _table(rows: list[dict[str, str]]) -> MetadataValue:
    columns = list(rows[0]) if rows else ["partition"]
    return MetadataValue.table(records=[TableRecord(row) for row in rows],
                               schema=TableSchema(columns=[TableColumn(name, "string") for name in columns]))


class _Progress:
    """Copied records per partition, logged and observed on the Kafka topic's asset at most every few seconds."""

    def __init__(self, context: OpExecutionContext, kafka_topic: str, to_copy: dict[int, int]):
        self.context, self.to_copy = context, to_copy
        self.asset = AssetKey(endpoints.kafka_topic(kafka_topic).key)
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


@op(description="Copy a Lite topic to Kafka, move its subscriptions' places to consumer groups, and verify")
def migrate_lite_topic(context: OpExecutionContext, config: LiteMigrationConfig, kafka: KafkaResource,
                       pubsublite: PubSubLiteResource) -> None:
    with Migration(LiteSide(pubsublite.connection(), config.topic),
                   KafkaSide(kafka.admin(), config.kafka_topic)) as migration:
        plan = migration.plan(config.subscriptions or None, config.group_format)
        metadata = {"plan": _table(report.plan_rows(plan)), "groups_before": _table(report.plan_group_rows(plan))}
        if not config.verify_only:
            progress = _Progress(context, config.kafka_topic, {c.partition: c.to_copy for c in plan.copies})
            migration.copy_and_move_groups(plan, progress)
            progress.show()
            for move in plan.groups:
                context.log.info(f"group {move.group}: {move.outcome}")
            metadata["copied"] = sum(c.copied for c in plan.copies)
        checks, group_checks = migration.verify(plan)
    metadata["verification"] = _table(report.partition_rows(checks))
    metadata["group_verification"] = _table(report.group_rows(group_checks))
    if not (all(c.ok for c in checks) and all(g.ok for g in group_checks)):
        raise Failure(description=f"Lite topic {config.topic} and Kafka topic {config.kafka_topic} do not all match "
                                  "(messages not copied yet, or groups behind their subscriptions): run it again",
                      metadata=metadata)
    context.add_output_metadata(metadata)


@job(name=LITE_MIGRATION_JOB, executor_def=in_process_executor,
     description="Leaving Pub/Sub Lite: a topic and its subscriptions' places to Kafka (bridgectl lite migrate)")
def lite_migration_job() -> None:
    migrate_lite_topic()
