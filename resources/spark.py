
from dagster import ConfigurableResource
from pyspark.sql import SparkSession

from bridgectl import fetch
from bridgectl.paths import log4j2_config
from connectors.spark_session import get_spark_session


class SparkResource(ConfigurableResource):
    """The Spark engine the micro-batches run on. `master` is any Spark master URL."""

    master: str = "local[*]"

    def session(self) -> SparkSession:
        return get_spark_session(fetch.spark_kafka_jars(), master=self.master, log4j2_config=str(log4j2_config()))
