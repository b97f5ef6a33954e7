
from dagster import ConfigurableResource
from pydantic import Field

from connectors.pubsublite.clients import LiteConnection


class PubSubLiteResource(ConfigurableResource):
    """Pub/Sub Lite access shared by the bridges. A bridge's own gcp.credentials.* keys win over these;
    with neither, application default credentials are used (anonymous for an endpoint on loopback)."""

    api_endpoint: str | None = Field(None, description="host:port instead of the regional endpoint "
                                                       "(PUBSUBLITE_API_ENDPOINT)")
    ca_file: str | None = Field(None, description="PEM roots to trust for that endpoint "
                                                  "(GRPC_DEFAULT_SSL_ROOTS_FILE_PATH)")
    credentials_json: str | None = Field(None, description="service account JSON; pass with EnvVar")
    credentials_file: str | None = None

    def connection_for(self, config) -> LiteConnection:
        """The connection for a bridge whose config has the gcp.credentials.* keys."""
        secret = config.gcp_credentials_json.get_secret_value() if config.gcp_credentials_json else None
        return LiteConnection(
            api_endpoint=self.api_endpoint,
            ca_file=self.ca_file,
            credentials_json=secret or self.credentials_json,
            credentials_file=config.gcp_credentials_file_path or self.credentials_file,
        )

    def connection(self) -> LiteConnection:
        """The connection with this resource's own credentials (for work that is not a bridge's)."""
        return LiteConnection(api_endpoint=self.api_endpoint, ca_file=self.ca_file,
                              credentials_json=self.credentials_json, credentials_file=self.credentials_file)
