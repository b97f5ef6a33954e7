
from dagster import ConfigurableResource
from pydantic import Field
from pyspark.sql import SparkSession

from bridgectl import fetch
from bridgectl.paths import log4j2_config
from connectors.spark_session import get_spark_session


class SparkResource(ConfigurableResource):
    """The Spark engine the micro-batches run on: a Spark Connect endpoint when `remote` is set
    (warm: nothing starts per run), else a classic session on `master` started by the run."""

    master: str = Field("local[*]", description="Spark master URL for a classic session (BRIDGE_SPARK_MASTER)")
    remote: str | None = Field(None, description="Spark Connect URL, sc://host:port (BRIDGE_SPARK_REMOTE)")

    def session(self) -> SparkSession:
        if self.remote:
            return get_spark_session([], remote=self.remote)
        return get_spark_session(fetch.spark_kafka_jars(), master=self.master, log4j2_config=str(log4j2_config()))
