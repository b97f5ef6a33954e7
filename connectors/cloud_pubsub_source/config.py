"""CloudPubSubSourceConnector keys, defaults and ranges as the reference connector defines them."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from connectors.config.common import (
    HIGH_IMPORTANCE, 
    ConnectorConfig, ConverterClass, ConverterKeys, ExactlyOnceKeys, GcpCredentialsKeys, TransformKeys,
)
from connectors.kafka_connect.converter_classes import BYTE_ARRAY_CONVERTER, STRING_CONVERTER

DEFAULT_ENDPOINT = "pubsub.googleapis.com:443"
ORDERING_KEY = "orderingKey"  # kafka.key.attribute value that means "use the ordering key"


class CloudPubSubSourceConfig(ConnectorConfig, ConverterKeys, GcpCredentialsKeys, ExactlyOnceKeys, TransformKeys):
    cps_subscription: str = Field(
        alias="cps.subscription", json_schema_extra=HIGH_IMPORTANCE, min_length=1,
        description="the subscription pulled")
    cps_project: str = Field(
        alias="cps.project", json_schema_extra=HIGH_IMPORTANCE, min_length=1,
        description="the subscription's project")
    cps_endpoint: str = Field(DEFAULT_ENDPOINT, alias="cps.endpoint", description="host:port of Cloud Pub/Sub")
    # A key of the reference's newer releases: a plaintext channel to PUBSUB_EMULATOR_HOST instead of cps.endpoint.
    cps_use_emulator: bool = Field(False, alias="cps.useEmulator",
                                   description="talk to the emulator at PUBSUB_EMULATOR_HOST instead of cps.endpoint")
    kafka_topic: str = Field(
        alias="kafka.topic", json_schema_extra=HIGH_IMPORTANCE, min_length=1,
        description="the Kafka topic the records go to")
    cps_max_batch_size: int = Field(100, alias="cps.maxBatchSize", ge=1, le=1000,
                                    description="messages asked for per unary pull")
    cps_make_ordering_key_attribute: bool = Field(
        False, alias="cps.makeOrderingKeyAttribute",
        description="add the ordering key to the value's struct (or the headers) as `orderingKey`")
    kafka_key_attribute: str | None = Field(
        None, alias="kafka.key.attribute", json_schema_extra=HIGH_IMPORTANCE,
        description="the attribute whose value is the record's key (`orderingKey`: the ordering key); none: a null "
                    "key")
    kafka_timestamp_attribute: str | None = Field(
        None, alias="kafka.timestamp.attribute",
        description="the attribute holding the record's timestamp in epoch milliseconds; none: the publish time")
    kafka_partition_count: int = Field(1, alias="kafka.partition.count", json_schema_extra=HIGH_IMPORTANCE, ge=1,
                                       description="partitions the scheme spreads records over")
    kafka_partition_scheme: Literal["round_robin", "hash_key", "hash_value", "kafka_partitioner", "ordering_key"] = (
        Field("round_robin", alias="kafka.partition.scheme", json_schema_extra=HIGH_IMPORTANCE,
              description="how a record's partition is chosen: round robin per task, a hash of the key, of the data "
                          "or of the ordering key, or the producer's murmur2 (kafka_partitioner)")
    )
    kafka_record_headers: bool = Field(
        False, alias="kafka.record.headers", json_schema_extra=HIGH_IMPORTANCE,
        description="the value stays bytes and every attribute becomes a record header")
    # Beyond the reference: "topic-schema" decodes each message by its topic's Pub/Sub schema (Avro or
    # Protobuf) into a Connect STRUCT, which the value converter (Avro, JSON, ...) then writes; the
    # attributes become record headers.
    message_format: Literal["bytes", "topic-schema"] = Field(
        "bytes", alias="messageFormat",
        description="beyond the reference: `topic-schema` decodes each message by its topic's Pub/Sub schema (Avro "
                    "or Protobuf) into a Connect STRUCT for the value converter; the attributes become headers")
    streaming_pull_enabled: bool = Field(False, alias="cps.streamingPull.enabled",
                                         description="pull over a streaming pull instead of unary pulls")
    streaming_pull_flow_control_messages: int = Field(
        1000, alias="cps.streamingPull.flowControlMessages", ge=1,
        description="streaming pull: messages outstanding at most")
    streaming_pull_flow_control_bytes: int = Field(
        100 * 1024 * 1024, alias="cps.streamingPull.flowControlBytes", ge=1,
        description="streaming pull: bytes outstanding at most")
    streaming_pull_parallel_streams: int = Field(
        1, alias="cps.streamingPull.parallelStreams", ge=1,
        description="streaming pull: streams (one Spark task each)")
    streaming_pull_max_ack_extension_ms: int = Field(
        0, alias="cps.streamingPull.maxAckExtensionMs", ge=0,
        description="streaming pull: how long the client extends a message's lease at most (0: an hour)")
    streaming_pull_max_ms_per_ack_extension: int = Field(
        0, alias="cps.streamingPull.maxMsPerAckExtension", ge=0,
        description="streaming pull: the longest single lease extension (0: the client's default)")
    # A source writes Connect values out: keys are strings (the key attribute), values bytes or a
    # struct, so the key defaults to StringConverter here.
    errors_tolerance: Literal["none", "all"] = Field(
        "none", alias="errors.tolerance", json_schema_extra=HIGH_IMPORTANCE,
        description="`all` skips (and acks) a message the converters cannot write or Kafka refuses for good, "
                    "counted in messages_dropped; `none` fails the run, and the message is redelivered to the next")
    key_converter: ConverterClass = Field(
        STRING_CONVERTER, alias="key.converter",
        description="how the Kafka key (the message's key attribute) is written: UTF-8 text by default, as the "
                    "reference's StringConverter key")
    value_converter: ConverterClass = Field(
        BYTE_ARRAY_CONVERTER, alias="value.converter",
        description="how the Kafka value is written: the message data's bytes by default; a struct of data and "
                    "attributes through a converter with schemas")

    @model_validator(mode="after")
    def _exactly_once_pulls_unary(self):
        # The streaming pull's client library acks and leases on its own: a message's ack cannot wait for its
        # transaction's commit.
        if self.exactly_once and self.streaming_pull_enabled:
            raise ValueError("exactly.once.support=required works with unary pulls only: set "
                             "cps.streamingPull.enabled=false")
        return self
