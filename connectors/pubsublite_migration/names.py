"""Names a migration derives: which Lite subscriptions it carries, the name each gets on the target (a Kafka group
or a Pub/Sub subscription), and the Lite subscription that holds a copy to Pub/Sub's position."""

from __future__ import annotations

import string
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the Lite client library costs a code location's load a fifth of a second; only a migration needs it
    from connectors.pubsublite_migration.lite_side import LiteTopic

DEFAULT_NAME_FORMAT = "${subscription}"
# The Lite subscriptions migrations to Pub/Sub create for their position: never carried over themselves.
POSITION_PREFIX = "bridgectl-migrate-"


def target_name(name_format: str, subscription: str, option: str) -> str:
    """`name_format` with ${subscription} (the subscription's short name) and ${project}, ${location} filled."""
    parts = subscription.split("/")  # projects/P/locations/L/subscriptions/S
    try:
        return string.Template(name_format).substitute(subscription=parts[5], project=parts[1], location=parts[3])
    except (KeyError, ValueError) as exc:
        raise ValueError(f"{option} {name_format!r}: only ${{subscription}}, ${{project}} and ${{location}} "
                         f"can be used ({exc})") from None


def chosen_subscriptions(topic: LiteTopic, asked: list[str] | None) -> list[str]:
    """Full paths of the subscriptions asked for (short names or paths), by default every one of the topic but
    the migrations' own."""
    if not asked:
        return [s for s in topic.subscriptions if not s.rsplit("/", 1)[-1].startswith(POSITION_PREFIX)]
    location = topic.path.rsplit("/topics/", 1)[0]
    paths = [s if s.startswith("projects/") else f"{location}/subscriptions/{s}" for s in asked]
    unknown = [s for s in paths if s not in topic.subscriptions]
    if unknown:
        raise ValueError(f"not subscriptions of Lite topic {topic.path}: {', '.join(unknown)}")
    return paths


def position_subscription(lite_topic: str, pubsub_topic_id: str) -> str:
    """The Lite subscription whose cursors say how far a copy of `lite_topic` to a Pub/Sub topic got."""
    location, topic_id = lite_topic.rsplit("/topics/", 1)
    return f"{location}/subscriptions/{POSITION_PREFIX}{topic_id}-to-{pubsub_topic_id}"
