import threading

from dagster import ConfigurableResource
from pydantic import Field

from connectors.kafka.admin import KafkaAdmin
from connectors.kafka.connection import KafkaConnection


class KafkaResource(ConfigurableResource):
    """The Kafka cluster every bridge reads from or writes to."""

    bootstrap_servers: str = Field(description="host:port list, e.g. from KAFKA_BOOTSTRAP_SERVERS")
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = Field(None, description="pass with EnvVar so it stays out of the UI")
    ssl_ca_location: str | None = Field(None, description="PEM file of the CA certificates that sign the brokers' "
                                                          "(SSL, SASL_SSL; default: the system's)")
    ssl_certificate_location: str | None = Field(None, description="PEM file of the client's certificate, for "
                                                                   "brokers that ask for one (mutual TLS)")
    ssl_key_location: str | None = Field(None, description="PEM file of the client certificate's private key")
    ssl_key_password: str | None = Field(None, description="that key's password, if it has one; pass with EnvVar")

    def connection(self) -> KafkaConnection:
        return KafkaConnection(
            self.bootstrap_servers, self.security_protocol, self.sasl_mechanism, self.sasl_username, self.sasl_password,
            self.ssl_ca_location, self.ssl_certificate_location, self.ssl_key_location, self.ssl_key_password,
        )

    def admin(self) -> KafkaAdmin:
        """The process's admin of this cluster, made on first use and shared by every bridge: one per call (a
        librdkafka client: four threads and a background thread) would stay alive with each always-on stream, two a
        bridge."""
        connection = self.connection()
        with _admins_lock:
            if connection not in _admins:
                _admins[connection] = KafkaAdmin(connection)
            return _admins[connection]


_admins: dict[KafkaConnection, KafkaAdmin] = {}
_admins_lock = threading.Lock()
