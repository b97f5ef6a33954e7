
import os

from dagster import ConfigurableResource
from pydantic import Field

from connectors.cloud_pubsub.clients import PubSubConnection


class PubSubResource(ConfigurableResource):
    """Cloud Pub/Sub access shared by the bridges. A bridge's own gcp.credentials.* and cps.endpoint
    keys win over these; with neither, application default credentials are used."""

    emulator_host: str | None = Field(None, description="host:port of an emulator (PUBSUB_EMULATOR_HOST)")
    credentials_json: str | None = Field(None, description="service account JSON; pass with EnvVar")
    credentials_file: str | None = None

    def connection(self, endpoint: str, credentials_json: str | None = None,
                   credentials_file: str | None = None, use_emulator: bool = False) -> PubSubConnection:
        emulator_host = self.emulator_host
        if use_emulator and not emulator_host:
            emulator_host = os.environ.get("PUBSUB_EMULATOR_HOST")
            if not emulator_host:
                raise ValueError("cps.useEmulator is true but no emulator is named: set PUBSUB_EMULATOR_HOST")
        return PubSubConnection(
            endpoint=endpoint,
            emulator_host=emulator_host,
            credentials_json=credentials_json or self.credentials_json,
            credentials_file=credentials_file or self.credentials_file,
        )

    def connection_for(self, config) -> PubSubConnection:
        """The connection for a bridge whose config has cps.endpoint and the gcp.credentials.* keys."""
        secret = config.gcp_credentials_json.get_secret_value() if config.gcp_credentials_json else None
        return self.connection(config.cps_endpoint, secret, config.gcp_credentials_file_path, config.cps_use_emulator)
