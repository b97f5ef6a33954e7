"""Topic routing (PIP-18's topicNameMapping): a target named by a template in which `${topic}` stands for the
Kafka topic a record came from, so one bridge maps many source topics to as many targets. Kafka Connect's
config providers never match it (their references carry a colon)."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator

TOPIC_PLACEHOLDER = "${topic}"


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
