"""A local Lite server store with one topic, for the unit tests of the server's parts."""

from google.cloud.pubsublite_v1 import types

from local_stack.lite_server.store import LiteStore

PARENT = "projects/p/locations/us-central1-a"


def store_with_topic(path, partitions: int) -> LiteStore:
    """A store at `path` holding the topic `t` of `partitions` partitions (retention 1 GB a partition)."""
    store = LiteStore(path / "lite.sqlite")
    topic = types.Topic.pb()()
    topic.partition_config.count = partitions
    topic.retention_config.per_partition_bytes = 10**9
    store.create_topic(PARENT, "t", topic)
    return store
