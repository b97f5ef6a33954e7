"""Kafka client keys as a Kafka client's `.properties` file writes them (`security.protocol`, `sasl.jaas.config`,
...), checked and turned into a KafkaConnection: for commands that take a cluster from the user directly rather
than from the Kafka resource (`bridgectl lite migrate`)."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from connectors.kafka.connection import KafkaConnection

# username="..." password="..." inside a PlainLoginModule or ScramLoginModule line of sasl.jaas.config.
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')
_JAAS_MODULES = ("PlainLoginModule", "ScramLoginModule")


class KafkaClientKeys(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    bootstrap_servers: str = Field(alias="bootstrap.servers", min_length=1,
                                   description="host:port list of the brokers")
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = Field(
        "PLAINTEXT", alias="security.protocol", description="how the client talks to the brokers")
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] | None = Field(
        None, alias="sasl.mechanism", description="SASL mechanism (SASL_PLAINTEXT, SASL_SSL)")
    sasl_username: str | None = Field(None, alias="sasl.username", description="SASL user (librdkafka's key)")
    sasl_password: str | None = Field(None, alias="sasl.password", description="SASL password (secret)",
                                      json_schema_extra={"secret": True})
    sasl_jaas_config: str | None = Field(
        None, alias="sasl.jaas.config", json_schema_extra={"secret": True},
        description="a Java client's PlainLoginModule or ScramLoginModule line; its username and password are used")
    ssl_ca_location: str | None = Field(None, alias="ssl.ca.location",
                                        description="PEM file of the CA certificates that sign the brokers'")
    ssl_certificate_location: str | None = Field(None, alias="ssl.certificate.location",
                                                 description="PEM file of the client's certificate (mutual TLS)")
    ssl_key_location: str | None = Field(None, alias="ssl.key.location",
                                         description="PEM file of the client certificate's private key")
    ssl_key_password: str | None = Field(None, alias="ssl.key.password", json_schema_extra={"secret": True},
                                         description="that key's password (secret)")

    def __repr__(self) -> str:  # never print the secrets
        return f"KafkaClientKeys(bootstrap_servers={self.bootstrap_servers!r})"

    __str__ = __repr__

    @model_validator(mode="after")
    def _credentials_from_jaas(self) -> "KafkaClientKeys":
        if self.sasl_jaas_config is None:
            return self
        if not any(module in self.sasl_jaas_config for module in _JAAS_MODULES):
            raise ValueError("sasl.jaas.config: only PlainLoginModule and ScramLoginModule lines are understood")
        options = dict(_JAAS_OPTION.findall(self.sasl_jaas_config))
        if "username" not in options or "password" not in options:
            raise ValueError('sasl.jaas.config: needs username="..." and password="..."')
        self.sasl_username = self.sasl_username or options["username"]
        self.sasl_password = self.sasl_password or options["password"]
        return self

    def connection(self) -> KafkaConnection:
        return KafkaConnection(
            self.bootstrap_servers, self.security_protocol, self.sasl_mechanism, self.sasl_username,
            self.sasl_password, self.ssl_ca_location, self.ssl_certificate_location, self.ssl_key_location,
            self.ssl_key_password)


def kafka_client_keys(keys: dict[str, str]) -> KafkaClientKeys:
    """The keys checked all at once; raises ValueError naming every bad key (never a secret's value)."""
    try:
        return KafkaClientKeys.model_validate(keys)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            where = ".".join(str(part) for part in error["loc"]) or "the Kafka client keys"
            problems.append(f"{where}: {'unknown key' if error['type'] == 'extra_forbidden' else error['msg']}")
        raise ValueError("; ".join(problems)) from None
