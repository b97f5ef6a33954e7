"""One resource per connector: it joins the shared resources to the connector's batch function."""


from dagster import ConfigurableResource, ResourceDependency

from connectors.cloud_pubsub_sink.batch import SinkBatchResult, run_sink_batch
from connectors.cloud_pubsub_sink.config import CloudPubSubSinkConfig
from connectors.cloud_pubsub_source.batch import SourceBatchResult, run_source_batch
from connectors.cloud_pubsub_source.config import CloudPubSubSourceConfig
from connectors.config.bridges_file import Bridge
from connectors.s3_block_gzip_sink.batch import ArchiveBatchResult, run_archive_batch
from connectors.s3_block_gzip_sink.config import S3BlockGzipSinkConfig
from connectors.kafka.admin import Offsets
from resources.kafka import KafkaResource
from resources.pubsub import PubSubResource
from resources.spark import SparkResource


class CloudPubSubSinkResource(ConfigurableResource):
    kafka: ResourceDependency[KafkaResource]
    pubsub: ResourceDependency[PubSubResource]
    spark: ResourceDependency[SparkResource]

    def run_batch(self, bridge: Bridge, recorded: Offsets) -> SinkBatchResult:
        config = bridge.config
        assert isinstance(config, CloudPubSubSinkConfig)
        return run_sink_batch(
            self.spark.session(), bridge.name, config, self.pubsub.connection_for(config), self.kafka.admin(),
            recorded, bridge.batch, bridge.consumer_group,
        )


class CloudPubSubSourceResource(ConfigurableResource):
    kafka: ResourceDependency[KafkaResource]
    pubsub: ResourceDependency[PubSubResource]
    spark: ResourceDependency[SparkResource]

    def run_batch(self, bridge: Bridge) -> SourceBatchResult:
        config = bridge.config
        assert isinstance(config, CloudPubSubSourceConfig)
        return run_source_batch(
            self.spark.session(), config, self.pubsub.connection_for(config), self.kafka.admin(), bridge.batch
        )


class S3BlockGzipSinkResource(ConfigurableResource):
    kafka: ResourceDependency[KafkaResource]
    spark: ResourceDependency[SparkResource]

    def run_batch(self, bridge: Bridge) -> ArchiveBatchResult:
        config = bridge.config
        assert isinstance(config, S3BlockGzipSinkConfig)
        return run_archive_batch(self.spark.session(), config, self.kafka.admin(), bridge.batch, bridge.consumer_group)
