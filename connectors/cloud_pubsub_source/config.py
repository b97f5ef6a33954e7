"""CloudPubSubSourceConnector keys, defaults and ranges as the reference connector defines them."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from connectors.config.common import ConnectorConfig, ConverterClass, ConverterKeys, GcpCredentialsKeys
from connectors.kafka_connect.converter_classes import BYTE_ARRAY_CONVERTER, STRING_CONVERTER

DEFAULT_ENDPOINT = "pubsub.googleapis.com:443"
ORDERING_KEY = "orderingKey"  # kafka.key.attribute value that means "use the ordering key"


class CloudPubSubSourceConfig(ConnectorConfig, ConverterKeys, GcpCredentialsKeys):
    cps_subscription: str = Field(alias="cps.subscription", min_length=1)
    cps_project: str = Field(alias="cps.project", min_length=1)
    cps_endpoint: str = Field(DEFAULT_ENDPOINT, alias="cps.endpoint")
    # A key of the reference's newer releases: a plaintext channel to PUBSUB_EMULATOR_HOST instead of cps.endpoint.
    cps_use_emulator: bool = Field(False, alias="cps.useEmulator")
    kafka_topic: str = Field(alias="kafka.topic", min_length=1)
    cps_max_batch_size: int = Field(100, alias="cps.maxBatchSize", ge=1, le=1000)
    cps_make_ordering_key_attribute: bool = Field(False, alias="cps.makeOrderingKeyAttribute")
    kafka_key_attribute: str | None = Field(None, alias="kafka.key.attribute")
    kafka_timestamp_attribute: str | None = Field(None, alias="kafka.timestamp.attribute")
    kafka_partition_count: int = Field(1, alias="kafka.partition.count", ge=1)
    kafka_partition_scheme: Literal["round_robin", "hash_key", "hash_value", "kafka_partitioner", "ordering_key"] = (
        Field("round_robin", alias="kafka.partition.scheme")
    )
    kafka_record_headers: bool = Field(False, alias="kafka.record.headers")
    # Beyond the reference: "topic-schema" decodes each message by its topic's Pub/Sub schema (Avro or
    # Protobuf) into a Connect STRUCT, which the value converter (Avro, JSON, ...) then writes; the
    # attributes become record headers.
    message_format: Literal["bytes", "topic-schema"] = Field("bytes", alias="messageFormat")
    streaming_pull_enabled: bool = Field(False, alias="cps.streamingPull.enabled")
    streaming_pull_flow_control_messages: int = Field(1000, alias="cps.streamingPull.flowControlMessages", ge=1)
    streaming_pull_flow_control_bytes: int = Field(100 * 1024 * 1024, alias="cps.streamingPull.flowControlBytes", ge=1)
    streaming_pull_parallel_streams: int = Field(1, alias="cps.streamingPull.parallelStreams", ge=1)
    streaming_pull_max_ack_extension_ms: int = Field(0, alias="cps.streamingPull.maxAckExtensionMs", ge=0)
    streaming_pull_max_ms_per_ack_extension: int = Field(0, alias="cps.streamingPull.maxMsPerAckExtension", ge=0)
    # A source writes Connect values out: keys are strings (the key attribute), values bytes or a
    # struct, so the key defaults to StringConverter here.
    # Kafka Connect's errors.tolerance for sources: `all` skips (and acks) a message the converters
    # cannot write; `none` fails the run, and the message is redelivered to the next one.
    errors_tolerance: Literal["none", "all"] = Field("none", alias="errors.tolerance")
    key_converter: ConverterClass = Field(STRING_CONVERTER, alias="key.converter")
    value_converter: ConverterClass = Field(BYTE_ARRAY_CONVERTER, alias="value.converter")
