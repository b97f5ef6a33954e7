"""PubSubLiteSourceConnector keys and defaults as the reference connector defines them."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from connectors.config.common import (
    HIGH_IMPORTANCE, 
    ConnectorConfig, ConverterKeys, ExactlyOnceKeys, GcpCredentialsKeys, TransformKeys,
)
from connectors.pubsublite.clients import subscription_path
from connectors.pubsublite_sink.config import check_location

JAVA_LONG_MAX = 2**63 - 1


class PubSubLiteSourceConfig(ConnectorConfig, ConverterKeys, GcpCredentialsKeys, ExactlyOnceKeys, TransformKeys):
    pubsublite_project: str = Field(alias="pubsublite.project", json_schema_extra=HIGH_IMPORTANCE, min_length=1,
                                    description="the Lite subscription's project")
    pubsublite_location: str = Field(alias="pubsublite.location", json_schema_extra=HIGH_IMPORTANCE, min_length=1,
                                     description="its location: a zone such as us-central1-a, or a region")
    pubsublite_subscription: str = Field(
        alias="pubsublite.subscription", json_schema_extra=HIGH_IMPORTANCE, min_length=1,
        description="the Lite subscription read")
    kafka_topic: str = Field(
        alias="kafka.topic", json_schema_extra=HIGH_IMPORTANCE, min_length=1,
        description="the Kafka topic the records go to")
    partition_flow_control_messages: int = Field(
        JAVA_LONG_MAX, alias="pubsublite.partition_flow_control.messages", ge=1, le=JAVA_LONG_MAX,
        description="messages granted to the server per Lite partition stream: read but not yet handed to Kafka")
    partition_flow_control_bytes: int = Field(
        20_000_000, alias="pubsublite.partition_flow_control.bytes", ge=1, le=JAVA_LONG_MAX,
        description="bytes granted per Lite partition stream")
    errors_tolerance: Literal["none", "all"] = Field(
        "none", alias="errors.tolerance", json_schema_extra=HIGH_IMPORTANCE,
        description="Kafka Connect's framework key: with `all`, a message Kafka refuses for good (too large for "
                    "the topic, say; KIP-779) is skipped, counted in messages_dropped and logged with its Lite "
                    "partition and offset; with `none` the run fails naming them and commits nothing")

    _location = field_validator("pubsublite_location")(check_location)

    def subscription_path(self):
        return subscription_path(self.pubsublite_project, self.pubsublite_location, self.pubsublite_subscription)
