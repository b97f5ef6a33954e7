"""PubSubLiteSinkConnector keys and defaults as the reference connector defines them."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import Field, field_validator

from connectors.config.common import (
    HIGH_IMPORTANCE, ConnectorConfig, ConverterKeys, ErrorHandlingKeys, GcpCredentialsKeys, KafkaTopicsKeys,
    TopicNameMappingKeys, TransformKeys,
)
from connectors.config.routing import TargetTemplate, is_routed
from connectors.pubsublite.clients import parse_location, topic_path


def check_location(value: str) -> str:
    try:
        parse_location(value)
    except Exception:
        raise ValueError(f"{value!r} is not a Pub/Sub Lite location (a region like 'us-central1' "
                         "or a zone like 'us-central1-a')") from None
    return value


class PubSubLiteSinkConfig(ConnectorConfig, KafkaTopicsKeys, ConverterKeys, ErrorHandlingKeys, GcpCredentialsKeys,
                           TransformKeys, TopicNameMappingKeys):
    target_key: ClassVar[str] = "pubsublite.topic"
    pubsublite_project: str = Field(
        alias="pubsublite.project", json_schema_extra=HIGH_IMPORTANCE, min_length=1,
        description="the Lite topic's project")
    pubsublite_location: str = Field(alias="pubsublite.location", json_schema_extra=HIGH_IMPORTANCE, min_length=1,
                                     description="its location: a zone such as us-central1-a, or a region")
    # ${topic} routes each Kafka topic to its own Lite topic (e.g. kafka-${topic}); the reference has one.
    pubsublite_topic: TargetTemplate = Field(
        alias="pubsublite.topic", json_schema_extra=HIGH_IMPORTANCE, min_length=1,
        description="the Lite topic; ${topic} in it routes each Kafka topic to its own (beyond the reference; each "
                    "one's partition count is read once per batch)")
    pubsublite_ordering_mode: Literal["DEFAULT", "KAFKA"] = Field(
        "DEFAULT", alias="pubsublite.ordering.mode",
        description="`DEFAULT`: the client library's routing (SHA-256 of the key, round robin for empty keys); "
                    "`KAFKA`: a record goes to the Lite partition numbered as its Kafka partition (a Kafka topic "
                    "with more partitions than the Lite topic fails the run before anything moves)")

    _location = field_validator("pubsublite_location")(check_location)

    def routed_target_key(self) -> str | None:
        return "pubsublite.topic" if is_routed(self.pubsublite_topic) else None

    def topic_path(self, kafka_topic: str = ""):
        """The Lite topic a record of `kafka_topic` goes to (the template itself when it is not routed)."""
        name = self.routed(self.pubsublite_topic, kafka_topic) if kafka_topic else self.pubsublite_topic
        return topic_path(self.pubsublite_project, self.pubsublite_location, name)
