"""What the e2e tests of `bridgectl lite migrate` share: running it, finding rows of its tables, and setting up Lite
subscriptions at chosen cursors."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from google.cloud.pubsublite import Subscription
from google.cloud.pubsublite.types import SubscriptionPath

from tests.e2e.lite_helpers import lite_connection

BRIDGECTL = os.path.join(os.path.dirname(sys.executable), "bridgectl")


def migrate(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([BRIDGECTL, "lite", "migrate", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "200"})


def table_row(*cells) -> re.Pattern:
    """A row of one of the command's tables, whatever the column widths."""
    return re.compile(r"│\s*" + r"\s*│\s*".join(re.escape(str(c)) for c in cells) + r"\s*│")


def heads(topic, partitions: int) -> dict[int, int]:
    stats = lite_connection().topic_stats_service(topic.location.region)
    return {p: stats.compute_head_cursor(request={"topic": str(topic), "partition": p}).head_cursor.offset
            for p in range(partitions)}


def add_subscription(topic, name: str, cursors: dict[int, int]) -> SubscriptionPath:
    path = SubscriptionPath(topic.project, topic.location, name)
    admin = lite_connection().admin(topic.location.region)
    admin.create_subscription(Subscription(name=str(path), topic=str(topic), delivery_config=Subscription.DeliveryConfig(
        delivery_requirement=Subscription.DeliveryConfig.DeliveryRequirement.DELIVER_IMMEDIATELY)))
    service = lite_connection().cursor_service(topic.location.region)
    for partition, offset in cursors.items():
        service.commit_cursor(request={"subscription": str(path), "partition": partition, "cursor": {"offset": offset}})
    return path
