"""Transforms that decide where a record goes: another topic (RegexRouter, TimestampRouter) or nowhere (Filter)."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from connectors.transforms.classes import TransformConfig, kafka_transform
from connectors.transforms.java_forms import (
    java_regex, java_replacement, simple_date_format, simple_date_resolution_ms,
)
from connectors.transforms.record import ConnectRecord, TransformError


def _compiles(pattern: str) -> str:
    try:
        java_regex(pattern)
    except re.error as exc:
        raise ValueError(f"not a valid regular expression: {exc}") from None
    return pattern


class RegexRouterKeys(TransformConfig):
    regex: str = Field(alias="regex", description="a regular expression the whole topic name must match")
    replacement: str = Field(alias="replacement",
                             description="the new topic name; $1 or ${name} stand for the regex's groups")
    _valid = field_validator("regex")(_compiles)

    @field_validator("replacement")
    @classmethod
    def _java_replacement(cls, replacement: str) -> str:
        java_replacement(replacement)
        return replacement


class RegexRouter:
    def __init__(self, keys: RegexRouterKeys):
        self.regex = java_regex(keys.regex)
        self.expand = java_replacement(keys.replacement)

    def rename(self, topic: str) -> str:
        match = self.regex.fullmatch(topic)
        return topic if match is None else self.expand(match)

    def apply(self, record: ConnectRecord) -> ConnectRecord:
        topic = self.rename(record.topic)
        return record if topic == record.topic else record.replace(topic=topic)


class TimestampRouterKeys(TransformConfig):
    topic_format: str = Field("${topic}-${timestamp}", alias="topic.format",
                              description="the new topic name; ${topic} and ${timestamp} are replaced")
    timestamp_format: str = Field("yyyyMMdd", alias="timestamp.format",
                                  description="how ${timestamp} is written: a java.text.SimpleDateFormat pattern, UTC")

    @field_validator("timestamp_format")
    @classmethod
    def _pattern(cls, pattern: str) -> str:
        simple_date_format(pattern)
        return pattern


class TimestampRouter:
    MISSING = "the record has no timestamp"

    def __init__(self, keys: TimestampRouterKeys):
        self.topic_format = keys.topic_format
        self.format = simple_date_format(keys.timestamp_format)
        # Timestamps floored to this format alike, so a batch formats each span once (columnar.py).
        self.resolution_ms = simple_date_resolution_ms(keys.timestamp_format)

    def topic_at(self, topic: str, timestamp_ms: int) -> str:
        return self.topic_format.replace("${topic}", topic).replace("${timestamp}", self.format(timestamp_ms))

    def apply(self, record: ConnectRecord) -> ConnectRecord:
        if record.timestamp is None:
            raise TransformError(self.MISSING)
        return record.replace(topic=self.topic_at(record.topic, record.timestamp))


class FilterKeys(TransformConfig):
    pass


class Filter:
    """Drops every record it is applied to: with a predicate, those the predicate picks."""

    def __init__(self, keys: FilterKeys):
        pass

    def apply(self, record: ConnectRecord) -> None:
        return None


CLASSES = (
    kafka_transform("RegexRouter", RegexRouterKeys, RegexRouter,
                   "renames the topic of records whose topic matches a regular expression", renames_topics=True),
    kafka_transform("TimestampRouter", TimestampRouterKeys, TimestampRouter,
                   "renames the topic by the record's timestamp (daily or hourly topics)", renames_topics=True),
    kafka_transform("Filter", FilterKeys, Filter,
                   "drops records (with a predicate: those it matches)"),
)
