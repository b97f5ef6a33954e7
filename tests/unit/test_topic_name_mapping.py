"""topicNameMapping: an explicit topic map beside a sink's ${topic} template."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from connectors.cloud_pubsub_sink.config import CloudPubSubSinkConfig
from connectors.kafka_sink.config import KafkaSinkConfig
from connectors.pulsar_sink.config import PulsarSinkConfig

CLOUD = {"topics": "orders,clicks,audit", "cps.project": "p"}


def test_a_mapped_topic_goes_to_its_target_and_the_others_to_their_own_name():
    config = CloudPubSubSinkConfig.model_validate(
        {**CLOUD, "cps.topic": "cps-${topic}", "topicNameMapping": "orders:orders-v2, clicks : web-clicks"})
    assert config.topic_path("orders") == "projects/p/topics/cps-orders-v2"
    assert config.topic_path("clicks") == "projects/p/topics/cps-web-clicks"
    assert config.topic_path("audit") == "projects/p/topics/cps-audit"


def test_the_kafka_and_pulsar_sinks_map_the_same_way():
    kafka = KafkaSinkConfig.model_validate({"topics": "a,b", "target.bootstrap.servers": "t:9092",
                                           "topic.rename.format": "dr.${topic}", "topicNameMapping": "a:x"})
    assert (kafka.target_topic("a"), kafka.target_topic("b")) == ("dr.x", "dr.b")
    pulsar = PulsarSinkConfig.model_validate({"topics": "a", "pulsar.service.url": "pulsar://h:6650",
                                             "topicNameMapping": "a:persisted-a"})
    assert pulsar.topic_for("a") == "persistent://public/default/persisted-a"


def test_the_lineage_draws_the_mapped_targets():
    from connectors.bridge import BatchSettings, SensorSettings
    from connectors.cloud_pubsub_sink.plugin import CONNECTOR
    from connectors.plugin import Bridge

    config = CloudPubSubSinkConfig.model_validate({**CLOUD, "cps.topic": "${topic}", "topicNameMapping": "orders:o2"})
    bridge = Bridge("b", CONNECTOR, config, BatchSettings(), SensorSettings())
    assert sorted(e.key for e in CONNECTOR.writes(bridge)) == sorted(
        ("pubsub", "p", "topics", t) for t in ("o2", "clicks", "audit"))


@pytest.mark.parametrize("mapping, message", [
    ("orders", "topicNameMapping: 'orders' is not a kafka-topic:target pair"),
    ("orders:a,orders:b", "topicNameMapping: topic 'orders' is mapped twice"),
    ("orders:", "topicNameMapping: 'orders:' is not a kafka-topic:target pair"),
])
def test_a_bad_pair_is_refused_in_one_line_naming_it(mapping, message):
    with pytest.raises(ValidationError, match=message):
        CloudPubSubSinkConfig.model_validate({**CLOUD, "cps.topic": "${topic}", "topicNameMapping": mapping})


def test_a_map_without_topic_in_the_target_key_is_refused_naming_the_key():
    with pytest.raises(ValidationError, match=r"topicNameMapping needs \$\{topic\} in cps.topic"):
        CloudPubSubSinkConfig.model_validate({**CLOUD, "cps.topic": "one", "topicNameMapping": "orders:o2"})
