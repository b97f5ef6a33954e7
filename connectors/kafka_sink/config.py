"""KafkaSinkConnector keys: the target cluster, how topics are named there, and where records go."""

from __future__ import annotations

import re
from typing import ClassVar, Literal

from pydantic import Field, SecretStr, model_validator

from connectors.config.common import (
    HIGH_IMPORTANCE, ColumnarTransformKeys, ConnectorConfig, ErrorHandlingKeys, ExactlyOnceKeys, KafkaTopicsKeys,
    TopicNameMappingKeys,
)
from connectors.config.routing import TOPIC_PLACEHOLDER, TargetTemplate, is_routed
from connectors.kafka.connection import KafkaConnection


class KafkaSinkConfig(ConnectorConfig, KafkaTopicsKeys, ErrorHandlingKeys, ExactlyOnceKeys, ColumnarTransformKeys,
                      TopicNameMappingKeys):
    target_key: ClassVar[str] = "topic.rename.format"
    target_bootstrap_servers: str = Field(
        alias="target.bootstrap.servers", json_schema_extra=HIGH_IMPORTANCE, min_length=1,
        description="the target cluster (the local stack's second cluster: KAFKA_TARGET_BOOTSTRAP_SERVERS)")
    target_security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT", alias="target.security.protocol", description="how the target is reached")
    target_sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = Field(
        None, alias="target.sasl.mechanism", description="the target's SASL mechanism (with a username and password)")
    target_sasl_username: str | None = Field(None, alias="target.sasl.username", description="the target's SASL user")
    target_sasl_password: SecretStr | None = Field(
        None, alias="target.sasl.password", description="its password (write it as a reference: ${env:...})")
    # MirrorMaker 2's IdentityReplicationPolicy is the default; "backup.${topic}" prefixes as its
    # DefaultReplicationPolicy does with an alias.
    topic_rename_format: TargetTemplate = Field(
        TOPIC_PLACEHOLDER, alias="topic.rename.format", json_schema_extra=HIGH_IMPORTANCE, min_length=1,
        description="the target topic's name; ${topic} is the source topic's (backup.${topic} prefixes); several "
                    "source topics need ${topic}")
    target_partition: Literal["same", "key"] = Field(
        "same", alias="target.partition",
        description="`same`: a record keeps its partition number (the target topic needs as many partitions: "
                    "added with target.topic.create, else the run fails before anything moves, naming both counts); "
                    "`key`: the target producer's partitioner (murmur2 of the key, as a Java producer)")
    target_topic_create: bool = Field(
        True, alias="target.topic.create", json_schema_extra=HIGH_IMPORTANCE,
        description="a missing target topic is created with its source's partition count and max.message.bytes, and "
                    "with target.partition=same one with fewer partitions than its source gets more, as MirrorMaker "
                    "2 does (else the run fails)")
    target_topic_replication_factor: int = Field(-1, alias="target.topic.replication.factor", ge=-1,
                                                 description="for created topics; -1: the broker's default")
    # Checkpoints only with target.partition=same: the key partitioner moves records, so no offset of a partition
    # maps to one of the target's.
    source_cluster_alias: str = Field(
        "source", alias="source.cluster.alias", json_schema_extra=HIGH_IMPORTANCE, pattern=r"^[A-Za-z0-9_.-]+$",
        description="names the checkpoints topic, <alias>.checkpoints.internal (compacted, created when missing)")
    emit_checkpoints_enabled: bool = Field(
        True, alias="emit.checkpoints.enabled",
        description="after each batch, MirrorMaker 2's consumer-group checkpoints on the target "
                    "(with target.partition=same)")
    emit_checkpoints_interval_seconds: float = Field(
        60, alias="emit.checkpoints.interval.seconds", gt=0,
        description="in continuous mode, how often the checkpoints are written (MirrorMaker 2's key and default); "
                    "a batch writes them after each batch")
    sync_group_offsets_enabled: bool = Field(
        False, alias="sync.group.offsets.enabled",
        description="also commit the translated offsets to the same group on the target, when that group has no "
                    "active member there, and only forward (MirrorMaker 2's key)")
    groups: str = Field(".*", alias="groups",
                        description="which source groups are checkpointed: comma-separated regexes (MirrorMaker 2's)")
    groups_exclude: str = Field("console-consumer-.*, connect-.*, __.*", alias="groups.exclude",
                                description="source groups never checkpointed: comma-separated regexes")

    @model_validator(mode="after")
    def _routing_is_one_to_one(self):
        if not is_routed(self.topic_rename_format) and (self.topics_regex or len(self.topic_list()) > 1):
            raise ValueError(f"several source topics need {TOPIC_PLACEHOLDER} in topic.rename.format, or they "
                             "would all land in one target topic")
        if self.sync_group_offsets_enabled and (self.target_partition != "same" or not self.emit_checkpoints_enabled):
            raise ValueError("sync.group.offsets.enabled needs emit.checkpoints.enabled=true and target.partition=same")
        for key, spec in (("groups", self.groups), ("groups.exclude", self.groups_exclude)):
            for part in spec.split(","):
                try:
                    re.compile(part.strip())
                except re.error as exc:
                    raise ValueError(f"{key}: {part.strip()!r} is not a regular expression: {exc}") from None
        if self.target_sasl_mechanism and not (self.target_sasl_username and self.target_sasl_password):
            raise ValueError("target.sasl.mechanism needs target.sasl.username and target.sasl.password")
        return self

    def routed_target_key(self) -> str | None:
        return "topic.rename.format" if is_routed(self.topic_rename_format) else None

    def target_topic(self, source_topic: str) -> str:
        return self.routed(self.topic_rename_format, source_topic)

    @property
    def checkpoints(self) -> bool:
        return self.emit_checkpoints_enabled and self.target_partition == "same"

    def target_connection(self) -> KafkaConnection:
        password = self.target_sasl_password.get_secret_value() if self.target_sasl_password else None
        return KafkaConnection(self.target_bootstrap_servers, self.target_security_protocol,
                               self.target_sasl_mechanism, self.target_sasl_username, password)
