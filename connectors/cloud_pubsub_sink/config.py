"""CloudPubSubSinkConnector keys, defaults and ranges as the reference connector defines them."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from connectors.config.common import (
    ConnectorConfig, ConverterKeys, ErrorHandlingKeys, GcpCredentialsKeys, KafkaTopicsKeys,
)
from connectors.config.routing import TargetTemplate, route

DEFAULT_ENDPOINT = "pubsub.googleapis.com:443"
MAX_REQUEST_BYTES = 9_500_000  # the reference's cap, under Pub/Sub's 10 MB publish request limit


class CloudPubSubSinkConfig(ConnectorConfig, KafkaTopicsKeys, ConverterKeys, ErrorHandlingKeys, GcpCredentialsKeys):
    cps_project: str = Field(alias="cps.project", min_length=1)
    # ${topic} routes each Kafka topic to its own Pub/Sub topic (e.g. kafka-${topic}); the reference has one.
    cps_topic: TargetTemplate = Field(alias="cps.topic", min_length=1)
    cps_endpoint: str = Field(DEFAULT_ENDPOINT, alias="cps.endpoint")
    # A key of the reference's newer releases: a plaintext channel to PUBSUB_EMULATOR_HOST instead of cps.endpoint.
    cps_use_emulator: bool = Field(False, alias="cps.useEmulator")
    max_buffer_size: int = Field(100, alias="maxBufferSize", ge=1, le=1000)
    max_buffer_bytes: int = Field(MAX_REQUEST_BYTES, alias="maxBufferBytes", ge=1, le=MAX_REQUEST_BYTES)
    max_outstanding_request_bytes: int | None = Field(None, alias="maxOutstandingRequestBytes", ge=1)
    max_outstanding_messages: int | None = Field(None, alias="maxOutstandingMessages", ge=1)
    max_delay_threshold_ms: int | None = Field(None, alias="maxDelayThresholdMs", ge=1)
    delay_threshold_ms: int | None = Field(None, alias="delayThresholdMs", ge=1)
    max_request_timeout_ms: int = Field(10_000, alias="maxRequestTimeoutMs", ge=10_000)
    max_total_timeout_ms: int = Field(60_000, alias="maxTotalTimeoutMs", ge=10_000)
    max_shutdown_timeout_ms: int = Field(60_000, alias="maxShutdownTimeoutMs", ge=10_000)
    metadata_publish: bool = Field(False, alias="metadata.publish")
    headers_publish: bool = Field(False, alias="headers.publish")
    ordering_key_source: Literal["none", "key", "partition"] = Field("none", alias="orderingKeySource")
    message_body_name: str = Field("cps_message_body", alias="messageBodyName", min_length=1)
    # Beyond the reference: "json" publishes the whole value as JSON text (JsonConverter's payload form)
    # instead of struct fields as attributes; "topic-schema" encodes it by the Pub/Sub topic's own schema.
    message_format: Literal["attributes", "json", "topic-schema"] = Field("attributes", alias="messageFormat")
    enable_compression: bool = Field(False, alias="enableCompression")
    compression_bytes_threshold: int = Field(240, alias="compressionBytesThreshold", ge=0)

    def topic_path(self, kafka_topic: str) -> str:
        return f"projects/{self.cps_project}/topics/{route(self.cps_topic, kafka_topic)}"

    @model_validator(mode="after")
    def _delay_aliases_agree(self):
        both = self.max_delay_threshold_ms, self.delay_threshold_ms
        if None not in both and both[0] != both[1]:
            raise ValueError("maxDelayThresholdMs and delayThresholdMs are the same setting; set one")
        return self

    @property
    def reads_kafka_headers(self) -> bool:
        # Headers become attributes only with headers.publish; a dead letter carries its record's headers.
        return self.headers_publish or bool(self.errors_deadletterqueue_topic_name)

    @property
    def delay_ms(self) -> int:
        """The linger: the README's maxDelayThresholdMs or the code's delayThresholdMs, default 100."""
        return self.max_delay_threshold_ms or self.delay_threshold_ms or 100

    @property
    def flow_control_enabled(self) -> bool:
        """Blocking flow control is on only when a limit is set, as in the reference."""
        return self.max_outstanding_request_bytes is not None or self.max_outstanding_messages is not None
