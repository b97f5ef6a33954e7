"""Topic routing: a target named by a template in which `${topic}` stands for the Kafka topic a record came from, so
one bridge maps many source topics to as many targets (an explicit map beside it, `topicNameMapping`, is
config.common.TopicNameMappingKeys). Kafka Connect's config providers never match the placeholder (their references
carry a colon)."""

from __future__ import annotations

from typing import Annotated, Callable, Generic, TypeVar

from pydantic import AfterValidator

TOPIC_PLACEHOLDER = "${topic}"
T = TypeVar("T")


def is_routed(template: str) -> bool:
    return TOPIC_PLACEHOLDER in template


def route(template: str, topic: str) -> str:
    return template.replace(TOPIC_PLACEHOLDER, topic)


def _check_template(template: str) -> str:
    """Any other `$` is a typo of the placeholder (or a reference that was not resolved)."""
    if "$" in template.replace(TOPIC_PLACEHOLDER, ""):
        raise ValueError(f"the only placeholder is {TOPIC_PLACEHOLDER}")
    return template


# A target's name, routed by ${topic}: the type of every sink's target key.
TargetTemplate = Annotated[str, AfterValidator(_check_template)]


class PerTarget(Generic[T]):
    """One T per routed target (a publisher, a codec), made on first use; called per record with the record's
    Kafka topic, it costs a dict hit once the topic was seen. Kafka topics that route to one target share its T."""

    def __init__(self, target_of: Callable[[str], str], make: Callable[[str], T]):
        self._target_of = target_of
        self._make = make
        self.by_target: dict[str, T] = {}
        self._by_kafka_topic: dict[str, T] = {}

    def __call__(self, kafka_topic: str) -> T:
        found = self._by_kafka_topic.get(kafka_topic)
        if found is None:
            target = self._target_of(kafka_topic)
            if target not in self.by_target:
                self.by_target[target] = self._make(target)
            found = self._by_kafka_topic[kafka_topic] = self.by_target[target]
        return found
