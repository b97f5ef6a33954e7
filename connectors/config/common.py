"""Keys every connector shares: Kafka Connect framework keys, converters, GCP credentials, errors."""

from __future__ import annotations

import re
import typing
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, SecretStr, model_validator
from pydantic.fields import FieldInfo

from connectors.config.routing import is_routed, route
from connectors.kafka_connect.converter_classes import BYTE_ARRAY_CONVERTER, KNOWN_CONVERTERS, REGISTRY_CONVERTERS
from connectors.kafka_connect.converters import converter_for
from connectors.kafka_connect.registry.settings import KeyRegistryKeys, ValueRegistryKeys, registry_settings
from connectors.transforms.chain import TRANSFORMS, TransformChain, is_chain_key, load_chain

# Kafka Connect framework keys that a connector .properties file may carry and that are not the connector's own
# (tasks.max is read by the loader as an always-on stream's task count; there is no per-record retry loop to tune).
IGNORED_FRAMEWORK_KEYS = frozenset({
    "name", "connector.class", "tasks.max", "errors.retry.timeout", "errors.retry.delay.max.ms",
    "errors.log.enable", "errors.log.include.messages", "errors.deadletterqueue.topic.replication.factor",
    "header.converter",
})

# Kafka Connect's ConfigDef.Importance, given as `Field(..., json_schema_extra=HIGH_IMPORTANCE)` to the keys most
# bridges set: a connector's page lists those as its common keys, and the others (low, when a field says nothing) as
# its advanced keys.
HIGH_IMPORTANCE = {"importance": "high"}


def importance(field: FieldInfo) -> str:
    """A config field's importance: "high" for the keys most bridges set, else "low"."""
    extra = field.json_schema_extra
    return extra.get("importance", "low") if isinstance(extra, dict) else "low"


class ConnectorConfig(BaseModel):
    """Base of every connector's config: strict about unknown keys, immutable, keys by alias. Kafka Connect's
    `transforms.*` and `predicates.*` keys are read into one chain (connectors/transforms) for a connector whose config
    has `TransformKeys`, and refused in one line for the others."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=False, arbitrary_types_allowed=True)

    @model_validator(mode="before")
    @classmethod
    def _transform_chain(cls, keys: Any) -> Any:
        if not isinstance(keys, dict) or isinstance(keys.get(TRANSFORMS), TransformChain):
            return keys
        chain_keys = {k: v for k, v in keys.items() if is_chain_key(str(k))}
        if not chain_keys:
            return keys
        if TRANSFORMS not in cls.model_fields:
            raise ValueError("key 'transforms': this connector does not run Kafka Connect transforms (a plugin's "
                             "config takes them with TransformKeys; see Plugins)")
        others = {k: v for k, v in keys.items() if k not in chain_keys}
        chain = load_chain(chain_keys)
        return {**others, TRANSFORMS: chain} if chain else others

    @classmethod
    def known_keys(cls) -> list[str]:
        return [f.alias or name for name, f in cls.model_fields.items()]

    @classmethod
    def secret_keys(cls) -> frozenset[str]:
        """Keys typed SecretStr: their values never appear in an error, a log or a written file."""
        return frozenset(f.alias or name for name, f in cls.model_fields.items()
                         if SecretStr in (f.annotation, *typing.get_args(f.annotation)))


class TransformKeys(BaseModel):
    """Kafka Connect's single message transforms and predicates, run on each record where a Connect worker runs
    them."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    transforms: TransformChain | None = Field(
        None, alias="transforms", json_schema_extra=HIGH_IMPORTANCE,
        description="Kafka Connect's single message transforms, in order: a comma list of aliases, each with "
                    "`transforms.<alias>.type` and that class's keys (`predicates` likewise); see Transforms")

    def routed_target_key(self) -> str | None:
        """The key whose `${topic}` routes the connector's target, when it does."""
        return None

    def routed_by_transforms(self) -> bool:
        """A target routed by `${topic}` behind a topic-renaming transform: each record's target follows its topic
        after the chain, so the targets are known only from the records."""
        return self.routed_target_key() is not None and bool(self.transforms) and self.transforms.renames_topics

    def topics_after_transforms(self, topics: list[str]) -> list[str]:
        """The topics the records of `topics` have after the chain, where their topic alone decides it (lineage, and
        the targets a driver can check before a run): none for a topic whose records' time, headers or contents
        decide (TimestampRouter, a router under a predicate)."""
        if not self.transforms or not self.transforms.renames_topics:
            return sorted(set(topics))
        return sorted({t for t in map(self.transforms.topic_after, topics) if t is not None})


class ColumnarTransformKeys(TransformKeys):
    """The transforms of a sink without converters (its writer sends Kafka's bytes as they are): only those that
    never look inside a key or value, with any predicate. A config whose target is routed by `${topic}` names its key
    in `routed_target_key`; unless it `follows_routers` (its writer routes by sink_writer.target_topics), a
    topic-renaming transform is refused there."""

    # A sink connector's target follows the topic a router gives the record, as Kafka Connect hands a sink task the
    # record after the transforms. Not the Kafka sink's: MirrorMaker 2 runs a router on the record it made, whose
    # topic is already the renamed one, which this chain (run on the source's records) cannot give.
    follows_routers: ClassVar[bool] = False
    # What the refusal of another transform names as what this connector runs.
    columnar_transforms_named: ClassVar[str] = "Filter, InsertHeader, DropHeaders, RegexRouter and TimestampRouter"
    # Set for a connector that takes no topic-renaming transform at all: why, after "renames topics, ".
    routers_refused: ClassVar[str | None] = None

    @model_validator(mode="after")
    def _columnar_transforms_only(self):
        if not self.transforms:
            return self
        for stage in self.transforms.stages:
            if not stage.runs_columnar:
                raise ValueError(f"transform '{stage.alias}' ({stage.class_name}): this connector runs only "
                                 f"{self.columnar_transforms_named}, with any predicate (it has no converters to give "
                                 "a transform a key or value to read)")
        if not self.transforms.renames_topics:
            return self
        router = next(stage for stage in self.transforms.stages if stage.transform.renames_topics)
        if self.routers_refused:
            raise ValueError(f"transform '{router.alias}' ({router.class_name}) renames topics, {self.routers_refused}")
        routed = self.routed_target_key()
        if routed and not self.follows_routers:
            raise ValueError(f"transform '{router.alias}' ({router.class_name}) renames topics, which is not supported "
                             f"with ${{topic}} in {routed}: "
                             f"rename topics with {routed} (MirrorMaker 2 runs a router on the record's renamed topic, "
                             "which this connector's transforms, run on the source's records, do not see)")
        return self


class TopicNameMappingKeys(BaseModel):
    """An explicit topic map beside the `${topic}` template of a sink's target key (`target_key`): a Kafka topic the
    map names stands in the template as its target, any other as itself."""

    target_key: ClassVar[str]  # the key whose ${topic} the map fills, as a user writes it

    topic_name_mapping: str | None = Field(
        None, alias="topicNameMapping",
        description="an explicit topic map: a comma list of kafka-topic:target pairs; a mapped topic's records go to "
                    "the target its name gives ${topic} in the target key, any other topic's to its own name")
    _topic_names: dict[str, str] = PrivateAttr(default_factory=dict)

    @model_validator(mode="after")
    def _read_topic_name_mapping(self):
        if self.topic_name_mapping is None:
            return self
        names: dict[str, str] = {}
        for pair in (part.strip() for part in self.topic_name_mapping.split(",")):
            source, colon, target = (side.strip() for side in pair.partition(":"))
            if not colon or not source or not target:
                raise ValueError(f"topicNameMapping: {pair!r} is not a kafka-topic:target pair")
            if source in names:
                raise ValueError(f"topicNameMapping: topic {source!r} is mapped twice")
            names[source] = target
        target_field = next(name for name, field in type(self).model_fields.items() if field.alias == self.target_key)
        if not is_routed(getattr(self, target_field)):
            raise ValueError(f"topicNameMapping needs ${{topic}} in {self.target_key}, where a mapped topic's target "
                             "goes (e.g. ${topic} alone)")
        self._topic_names = names
        return self

    def routed(self, template: str, kafka_topic: str) -> str:
        """The target `template` names for a record of `kafka_topic`, through the map."""
        return route(template, self._topic_names.get(kafka_topic, kafka_topic))


class GcpCredentialsKeys(BaseModel):
    gcp_credentials_file_path: str | None = Field(
        None, alias="gcp.credentials.file.path", json_schema_extra=HIGH_IMPORTANCE,
        description="a service account key file; used when gcp.credentials.json is not set (then application "
                    "default credentials)")
    gcp_credentials_json: SecretStr | None = Field(
        None, alias="gcp.credentials.json", json_schema_extra=HIGH_IMPORTANCE,
        description="a service account key as JSON, first in the reference's order; write it as ${env:NAME} so "
                    "the secret stays out of files")


ConverterClass = Literal[
    "org.apache.kafka.connect.storage.StringConverter",
    "org.apache.kafka.connect.converters.ByteArrayConverter",
    "org.apache.kafka.connect.json.JsonConverter",
    "io.confluent.connect.avro.AvroConverter",
    "io.confluent.connect.protobuf.ProtobufConverter",
    "io.confluent.connect.json.JsonSchemaConverter",
]
assert set(ConverterClass.__args__) == set(KNOWN_CONVERTERS)


class ConverterKeys(KeyRegistryKeys, ValueRegistryKeys):
    """Kafka Connect's converter keys, with Confluent's registry keys under each prefix. Without a worker
    config to inherit from, bytes pass through."""

    key_converter: ConverterClass = Field(
        BYTE_ARRAY_CONVERTER, alias="key.converter", json_schema_extra=HIGH_IMPORTANCE,
        description="how a Kafka key is read (sinks) or written (sources): bytes as they are, UTF-8 text, JSON, or "
                    "a Schema Registry format (Avro, Protobuf, JSON Schema)")
    value_converter: ConverterClass = Field(
        BYTE_ARRAY_CONVERTER, alias="value.converter", json_schema_extra=HIGH_IMPORTANCE,
        description="how a Kafka value is read (sinks) or written (sources), as key.converter")
    key_converter_schemas_enable: bool = Field(
        True, alias="key.converter.schemas.enable",
        description="JsonConverter: keys are {\"schema\": ..., \"payload\": ...} envelopes (false: bare JSON)")
    value_converter_schemas_enable: bool = Field(
        True, alias="value.converter.schemas.enable", json_schema_extra=HIGH_IMPORTANCE,
        description="JsonConverter: values are {\"schema\": ..., \"payload\": ...} envelopes (false: bare JSON)")

    @model_validator(mode="after")
    def _registry_converters_name_a_registry(self):
        for role in ("key", "value"):
            uses_registry = getattr(self, f"{role}_converter") in REGISTRY_CONVERTERS
            settings = registry_settings(self, role)
            if uses_registry and settings is None:
                raise ValueError(f"{role}.converter={getattr(self, f'{role}_converter')} needs "
                                 f"{role}.converter.schema.registry.url")
            if settings and settings.credentials_source == "USER_INFO" and settings.user_info is None:
                raise ValueError(f"{role}.converter.basic.auth.credentials.source=USER_INFO needs "
                                 f"{role}.converter.basic.auth.user.info")
            for url in (settings.urls if settings else ()):
                if not url.startswith(("http://", "https://")):
                    raise ValueError(f"{role}.converter.schema.registry.url: {url.split('@')[-1]!r} is not an "
                                     f"http:// or https:// URL")
        return self

    def key_converter_instance(self):
        return converter_for(self.key_converter, self.key_converter_schemas_enable, registry_settings(self, "key"))

    def value_converter_instance(self):
        return converter_for(self.value_converter, self.value_converter_schemas_enable,
                             registry_settings(self, "value"))


class ErrorHandlingKeys(BaseModel):
    """Kafka Connect's error-handling keys (KIP-298)."""

    errors_tolerance: Literal["none", "all"] = Field(
        "none", alias="errors.tolerance", json_schema_extra=HIGH_IMPORTANCE,
        description="`all`: a record that cannot be converted or delivered for good is skipped (or dead-lettered) "
                    "and counted; `none`: the run fails naming it and records nothing")
    errors_deadletterqueue_topic_name: str | None = Field(
        None, alias="errors.deadletterqueue.topic.name", json_schema_extra=HIGH_IMPORTANCE,
        description="with errors.tolerance=all: the Kafka topic (on the source cluster) bad records go to, as "
                    "they were read")
    errors_deadletterqueue_context_headers_enable: bool = Field(
        False, alias="errors.deadletterqueue.context.headers.enable",
        description="add Kafka Connect's __connect.errors.* headers (topic, partition, offset, stage, exception) "
                    "to each dead-lettered record"
    )

    @model_validator(mode="after")
    def _dlq_needs_tolerance(self):
        if self.errors_deadletterqueue_topic_name and self.errors_tolerance != "all":
            raise ValueError(
                "errors.deadletterqueue.topic.name needs errors.tolerance=all "
                "(with 'none' the first bad record stops the batch)"
            )
        return self


class ExactlyOnceKeys(BaseModel):
    """KIP-618's keys of a source connector that writes Kafka, with their Kafka Connect names."""

    exactly_once_support: Literal["requested", "required"] = Field(
        "requested", alias="exactly.once.support", json_schema_extra=HIGH_IMPORTANCE,
        description="`required`: records and the bridge's position go to Kafka in one transaction, so a consumer "
                    "with isolation.level=read_committed sees every source record exactly once, through kills, "
                    "restarts and runs at once. `requested` (the default) is at least once")
    transaction_boundary: Literal["poll", "interval"] = Field(
        "poll", alias="transaction.boundary",
        description="with exactly.once.support=required: `poll`, one transaction per task's slice of a batch; "
                    "`interval`, one every transaction.boundary.interval.ms within it")
    transaction_boundary_interval_ms: int = Field(
        60_000, alias="transaction.boundary.interval.ms", ge=1,
        description="with transaction.boundary=interval: how long a transaction stays open at most (Kafka "
                    "Connect's default offset.flush.interval.ms)")
    offsets_storage_topic: str | None = Field(
        None, alias="offsets.storage.topic",
        description="with exactly.once.support=required: the compacted topic holding the bridge's positions, "
                    "written in the records' transactions (default bridge-offsets.<bridge name>)")

    @property
    def exactly_once(self) -> bool:
        return self.exactly_once_support == "required"

    def positions_topic_name(self, bridge_name: str) -> str:
        return self.offsets_storage_topic or f"bridge-offsets.{bridge_name}"


class KafkaTopicsKeys(BaseModel):
    """Source topics of a sink connector: `topics` (comma list) or `topics.regex`, exactly one."""

    topics: str | None = Field(
        None, alias="topics", json_schema_extra=HIGH_IMPORTANCE,
        description="Kafka topics to read, a comma list")
    topics_regex: str | None = Field(None, alias="topics.regex", json_schema_extra=HIGH_IMPORTANCE,
                                     description="a regular expression; every topic whose whole name matches")
    isolation_level: Literal["read_uncommitted", "read_committed"] = Field(
        "read_uncommitted", alias="consumer.override.isolation.level",
        description="Kafka Connect's per-connector consumer override (KIP-458). The default, Java's, reads the "
                    "records of aborted transactions too; read_committed skips them and reads only up to the last "
                    "stable offset (an open transaction holds the batch there)")

    @model_validator(mode="after")
    def _one_topic_selector(self):
        if bool(self.topics) == bool(self.topics_regex):
            raise ValueError("set exactly one of 'topics' and 'topics.regex'")
        if self.topics_regex:
            try:
                re.compile(self.topics_regex)
            except re.error as exc:
                raise ValueError(f"topics.regex is not a valid regular expression: {exc}") from exc
        return self

    def topic_list(self) -> list[str]:
        return [t.strip() for t in (self.topics or "").split(",") if t.strip()]

    @property
    def reads_kafka_headers(self) -> bool:
        """Whether delivery uses the records' headers. When it does not, the Kafka reader does not build them
        (a list of tuples per record, turned into an Arrow list of structs)."""
        return True
