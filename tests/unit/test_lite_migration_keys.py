"""The pure parts of `bridgectl lite migrate`: Kafka client keys as a .properties file writes them, and the group
name each subscription gets."""

from __future__ import annotations

import pytest

from connectors.kafka.client_keys import kafka_client_keys
from connectors.pubsublite_migration.lite_side import LiteTopic
from connectors.pubsublite_migration.migrate import kafka_topic_config
from connectors.pubsublite_migration.names import chosen_subscriptions, target_name

SUBSCRIPTION = "projects/acme/locations/us-central1-a/subscriptions/orders-reader"


def test_a_java_clients_jaas_line_gives_the_sasl_credentials():
    keys = kafka_client_keys({
        "bootstrap.servers": "broker:9092", "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                            'username="bridge" password="s3cret";'})
    config = keys.connection().librdkafka_config()
    assert (config["sasl.username"], config["sasl.password"], config["security.protocol"]) == \
        ("bridge", "s3cret", "SASL_SSL")
    assert "s3cret" not in repr(keys) and "s3cret" not in str(keys)


def test_every_bad_key_is_named_at_once_without_a_secret():
    with pytest.raises(ValueError) as raised:
        kafka_client_keys({"bootstrap.servers": "b:1", "security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI",
                           "sasl.password": "hunter2", "ssl.truststore.location": "/x.jks"})
    message = str(raised.value)
    assert "sasl.mechanism" in message and "ssl.truststore.location: unknown key" in message
    assert "hunter2" not in message


def test_a_jaas_line_of_another_login_module_is_refused():
    with pytest.raises(ValueError, match="only PlainLoginModule and ScramLoginModule"):
        kafka_client_keys({"bootstrap.servers": "b:1",
                           "sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required;"})


def test_target_names_from_the_format():
    assert target_name("${subscription}", SUBSCRIPTION, "--group-format") == "orders-reader"
    assert target_name("lite-${project}-${subscription}", SUBSCRIPTION, "--group-format") == "lite-acme-orders-reader"
    with pytest.raises(ValueError, match="--subscription-format"):
        target_name("${topic}", SUBSCRIPTION, "--subscription-format")


def test_every_subscription_is_carried_by_default_but_the_migrations_own():
    location = "projects/acme/locations/us-central1-a"
    own = f"{location}/subscriptions/bridgectl-migrate-orders-to-orders"
    topic = LiteTopic(f"{location}/topics/orders", 3, None, 1, (SUBSCRIPTION, own))
    assert chosen_subscriptions(topic, None) == [SUBSCRIPTION]
    assert chosen_subscriptions(topic, ["orders-reader"]) == [SUBSCRIPTION]
    with pytest.raises(ValueError, match="not subscriptions of Lite topic"):
        chosen_subscriptions(topic, ["nope"])


def test_the_kafka_topic_keeps_what_lite_keeps():
    by_size = LiteTopic("t", 3, None, 30 * 1024**3, ())
    assert kafka_topic_config(by_size) == {"retention.ms": "-1", "retention.bytes": str(30 * 1024**3)}
    by_time = LiteTopic("t", 3, 7 * 86_400_000, 30 * 1024**3, ())
    assert kafka_topic_config(by_time)["retention.ms"] == str(7 * 86_400_000)
