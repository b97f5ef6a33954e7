"""Resources wired from the environment: `eval "$(bridgectl local env)"` sets it for the local stack."""


import os
from typing import Any

from dagster import EnvVar

from resources.kafka import KafkaResource
from resources.lease import BridgeLeaseResource
from resources.pubsub import PubSubResource
from resources.pubsublite import PubSubLiteResource
from resources.spark import SparkResource


def _optional_env(name: str) -> EnvVar | None:
    # EnvVar keeps the value out of the UI, but fails when unset; optional settings stay None then.
    return EnvVar(name) if os.environ.get(name) else None


def default_resources() -> dict[str, Any]:
    kafka = KafkaResource(
        bootstrap_servers=EnvVar("KAFKA_BOOTSTRAP_SERVERS"),
        security_protocol=os.environ.get("KAFKA_SECURITY_PROTOCOL", "PLAINTEXT"),
        sasl_mechanism=os.environ.get("KAFKA_SASL_MECHANISM"),
        sasl_username=_optional_env("KAFKA_SASL_USERNAME"),
        sasl_password=_optional_env("KAFKA_SASL_PASSWORD"),
        ssl_ca_location=os.environ.get("KAFKA_SSL_CA_LOCATION"),
        ssl_certificate_location=os.environ.get("KAFKA_SSL_CERTIFICATE_LOCATION"),
        ssl_key_location=os.environ.get("KAFKA_SSL_KEY_LOCATION"),
        ssl_key_password=_optional_env("KAFKA_SSL_KEY_PASSWORD"),
    )
    pubsub = PubSubResource(
        emulator_host=_optional_env("PUBSUB_EMULATOR_HOST"),
        credentials_json=_optional_env("GCP_CREDENTIALS_JSON"),
    )
    pubsublite = PubSubLiteResource(
        api_endpoint=os.environ.get("PUBSUBLITE_API_ENDPOINT"),
        ca_file=os.environ.get("GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"),
        credentials_json=_optional_env("GCP_CREDENTIALS_JSON"),
    )
    spark = SparkResource(master=os.environ.get("BRIDGE_SPARK_MASTER", "local[*]"),
                          remote=os.environ.get("BRIDGE_SPARK_REMOTE") or None,
                          remote_token=_optional_env("BRIDGE_SPARK_REMOTE_TOKEN"))
    return {
        "bridge_lease": BridgeLeaseResource(
            stale_after_seconds=float(os.environ.get("BRIDGE_LEASE_STALE_AFTER_SECONDS", "30"))),
        "kafka": kafka,
        "pubsub": pubsub,
        "pubsublite": pubsublite,
        "spark": spark,
    }
