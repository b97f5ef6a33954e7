"""Kafka's predicates: whether a transform applies to a record (`transforms.<alias>.predicate`, `negate`)."""

from __future__ import annotations

from pydantic import Field, field_validator

from connectors.transforms.classes import TransformConfig, kafka_predicate
from connectors.transforms.java_forms import java_regex
from connectors.transforms.record import ConnectRecord
from connectors.transforms.routing import _compiles


class HasHeaderKeyKeys(TransformConfig):
    name: str = Field(alias="name", min_length=1, description="the header name to look for")


class HasHeaderKey:
    def __init__(self, keys: HasHeaderKeyKeys):
        self.name = keys.name

    def test(self, record: ConnectRecord) -> bool:
        return any(header.key == self.name for header in record.headers)


class RecordIsTombstoneKeys(TransformConfig):
    pass


class RecordIsTombstone:
    def __init__(self, keys: RecordIsTombstoneKeys):
        pass

    def test(self, record: ConnectRecord) -> bool:
        return record.value is None


class TopicNameMatchesKeys(TransformConfig):
    pattern: str = Field(alias="pattern", min_length=1,
                         description="a regular expression the whole topic name must match")
    _valid = field_validator("pattern")(_compiles)


class TopicNameMatches:
    def __init__(self, keys: TopicNameMatchesKeys):
        self.pattern = java_regex(keys.pattern)

    def test_topic(self, topic: str | None) -> bool:
        return topic is not None and self.pattern.fullmatch(topic) is not None

    def test(self, record: ConnectRecord) -> bool:
        return self.test_topic(record.topic)


CLASSES = (
    kafka_predicate("HasHeaderKey", HasHeaderKeyKeys, HasHeaderKey,
                   "true for a record with at least one header of the given name", reads_headers=True),
    kafka_predicate("RecordIsTombstone", RecordIsTombstoneKeys, RecordIsTombstone,
                   "true for a tombstone (a record whose value is null)"),
    kafka_predicate("TopicNameMatches", TopicNameMatchesKeys, TopicNameMatches,
                   "true for a record whose topic name matches a regular expression"),
)
