"""Topic routing (PIP-18's topicNameMapping): a target named by a template in which `${topic}` stands for the
Kafka topic a record came from, so one bridge maps many source topics to as many targets. Kafka Connect's
config providers never match it (their references carry a colon)."""

from __future__ import annotations

TOPIC_PLACEHOLDER = "${topic}"


def is_routed(template: str) -> bool:
    return TOPIC_PLACEHOLDER in template


def route(template: str, topic: str) -> str:
    return template.replace(TOPIC_PLACEHOLDER, topic)


def check_template(template: str, key: str) -> None:
    """Any other `$` is a typo of the placeholder (or a reference that was not resolved)."""
    if "$" in template.replace(TOPIC_PLACEHOLDER, ""):
        raise ValueError(f"{key}: the only placeholder is {TOPIC_PLACEHOLDER}")
