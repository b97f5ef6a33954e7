"""CloudPubSubSinkConnector keys, defaults and ranges as the reference connector defines them."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, model_validator

from connectors.config.common import (
    HIGH_IMPORTANCE, ConnectorConfig, ConverterKeys, ErrorHandlingKeys, GcpCredentialsKeys, KafkaTopicsKeys,
    TopicNameMappingKeys, TransformKeys,
)
from connectors.config.routing import TargetTemplate

DEFAULT_ENDPOINT = "pubsub.googleapis.com:443"
MAX_REQUEST_BYTES = 9_500_000  # the reference's cap, under Pub/Sub's 10 MB publish request limit


class CloudPubSubSinkConfig(ConnectorConfig, KafkaTopicsKeys, ConverterKeys, ErrorHandlingKeys, GcpCredentialsKeys,
                            TransformKeys, TopicNameMappingKeys):
    target_key: ClassVar[str] = "cps.topic"
    cps_project: str = Field(
        alias="cps.project", json_schema_extra=HIGH_IMPORTANCE, min_length=1,
        description="the Pub/Sub topic's project")
    # The reference publishes every Kafka topic to its one topic.
    cps_topic: TargetTemplate = Field(
        alias="cps.topic", json_schema_extra=HIGH_IMPORTANCE, min_length=1,
        description="the Pub/Sub topic id; ${topic} in it routes each Kafka topic to its own (kafka-${topic}; "
                    "beyond the reference)")
    cps_endpoint: str = Field(DEFAULT_ENDPOINT, alias="cps.endpoint", description="the Pub/Sub endpoint (TLS)")
    # A key of the reference's newer releases.
    cps_use_emulator: bool = Field(
        False, alias="cps.useEmulator",
        description="a plaintext channel to PUBSUB_EMULATOR_HOST instead of cps.endpoint")
    max_buffer_size: int = Field(100, alias="maxBufferSize", ge=1, le=1000,
                                 description="messages per publish request at most")
    max_buffer_bytes: int = Field(MAX_REQUEST_BYTES, alias="maxBufferBytes", ge=1, le=MAX_REQUEST_BYTES,
                                  description="bytes per publish request at most (9.5 MB, under Pub/Sub's 10 MB)")
    max_outstanding_request_bytes: int | None = Field(
        None, alias="maxOutstandingRequestBytes", ge=1,
        description="bytes sealed into requests and not acknowledged yet, per task, before it waits: at most 64 MiB, "
                    "the default")
    max_outstanding_messages: int | None = Field(
        None, alias="maxOutstandingMessages", ge=1,
        description="messages sealed and not acknowledged yet, per task, before it waits: at most 10,000, the default")
    max_delay_threshold_ms: int | None = Field(
        None, alias="maxDelayThresholdMs", ge=1,
        description="how long a request waits to fill up before it is sent (default 100)")
    delay_threshold_ms: int | None = Field(
        None, alias="delayThresholdMs", ge=1,
        description="the reference code's name for maxDelayThresholdMs (set one, or both the same)")
    max_request_timeout_ms: int = Field(10_000, alias="maxRequestTimeoutMs", ge=10_000,
                                        description="how long one publish attempt may take")
    max_total_timeout_ms: int = Field(
        60_000, alias="maxTotalTimeoutMs", ge=10_000,
        description="how long a request is retried (exponential backoff) on transient errors before the run fails")
    max_shutdown_timeout_ms: int = Field(
        60_000, alias="maxShutdownTimeoutMs", ge=10_000,
        description="at the end of a task, how long what is still in flight may take to be acknowledged before the "
                    "task fails (and records nothing)")
    metadata_publish: bool = Field(
        False, alias="metadata.publish", json_schema_extra=HIGH_IMPORTANCE,
        description="the Kafka topic, partition, offset and timestamp as attributes (kafka.topic, ...)")
    headers_publish: bool = Field(
        False, alias="headers.publish", json_schema_extra=HIGH_IMPORTANCE,
        description="Kafka headers as attributes, within the 100-attribute limit (a header that does not fit is "
                    "dropped and counted in headers_dropped)")
    ordering_key_source: Literal["none", "key", "partition"] = Field(
        "none", alias="orderingKeySource", json_schema_extra=HIGH_IMPORTANCE,
        description="`key`: the record's key is the ordering key; `partition`: the partition number is; `none`: no "
                    "ordering key")
    message_body_name: str = Field(
        "cps_message_body", alias="messageBodyName", min_length=1,
        description="with a struct or map value, the field whose value is the message data (the others become "
                    "attributes)")
    message_format: Literal["attributes", "json", "topic-schema"] = Field(
        "attributes", alias="messageFormat", json_schema_extra=HIGH_IMPORTANCE,
        description="beyond the reference: `json` publishes the whole value as JSON text (JsonConverter's payload "
                    "form) instead of struct fields as attributes; `topic-schema` encodes it by the Pub/Sub topic's "
                    "own schema")
    enable_compression: bool = Field(False, alias="enableCompression",
                                     description="gzip publish requests of at least compressionBytesThreshold bytes")
    compression_bytes_threshold: int = Field(240, alias="compressionBytesThreshold", ge=0,
                                             description="with enableCompression: the smallest request compressed")

    def topic_path(self, kafka_topic: str) -> str:
        return f"projects/{self.cps_project}/topics/{self.routed(self.cps_topic, kafka_topic)}"

    @model_validator(mode="after")
    def _delay_aliases_agree(self):
        both = self.max_delay_threshold_ms, self.delay_threshold_ms
        if None not in both and both[0] != both[1]:
            raise ValueError("maxDelayThresholdMs and delayThresholdMs are the same setting; set one")
        return self

    @property
    def reads_kafka_headers(self) -> bool:
        # Headers become attributes only with headers.publish; a dead letter carries its record's headers; a transform
        # or predicate may read them (a header only added or dropped is seen by nothing else).
        return (self.headers_publish or bool(self.errors_deadletterqueue_topic_name)
                or bool(self.transforms and self.transforms.reads_headers))

    @property
    def delay_ms(self) -> int:
        """The linger: the README's maxDelayThresholdMs or the code's delayThresholdMs, default 100."""
        return self.max_delay_threshold_ms or self.delay_threshold_ms or 100

    @property
    def flow_control_enabled(self) -> bool:
        """Blocking flow control is on only when a limit is set, as in the reference."""
        return self.max_outstanding_request_bytes is not None or self.max_outstanding_messages is not None
