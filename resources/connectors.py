"""One resource per connector: it joins the shared resources to the connector's batch function."""


from dagster import ConfigurableResource, ResourceDependency

from connectors.cloud_pubsub_sink.batch import run_sink_batch
from connectors.cloud_pubsub_sink.config import CloudPubSubSinkConfig
from connectors.cloud_pubsub_source.batch import SourceBatchResult, run_source_batch
from connectors.cloud_pubsub_source.config import CloudPubSubSourceConfig
from connectors.config.bridges_file import Bridge
from connectors.s3_block_gzip_sink.batch import ArchiveBatchResult, run_archive_batch
from connectors.s3_block_gzip_sink.config import S3BlockGzipSinkConfig
from connectors.kafka.admin import Offsets
from connectors.kafka.sink_batch import SinkBatchResult
from connectors.pubsublite_sink.batch import run_lite_sink_batch
from connectors.pubsublite_sink.config import PubSubLiteSinkConfig
from connectors.pubsublite_source.batch import LiteCursors, LiteSourceBatchResult, run_lite_source_batch
from connectors.pubsublite_source.config import PubSubLiteSourceConfig
from resources.kafka import KafkaResource
from resources.pubsub import PubSubResource
from resources.pubsublite import PubSubLiteResource
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


class PubSubLiteSinkResource(ConfigurableResource):
    kafka: ResourceDependency[KafkaResource]
    pubsublite: ResourceDependency[PubSubLiteResource]
    spark: ResourceDependency[SparkResource]

    def run_batch(self, bridge: Bridge, recorded: Offsets) -> SinkBatchResult:
        config = bridge.config
        assert isinstance(config, PubSubLiteSinkConfig)
        return run_lite_sink_batch(
            self.spark.session(), bridge.name, config, self.pubsublite.connection_for(config), self.kafka.admin(),
            recorded, bridge.batch, bridge.consumer_group,
        )


class PubSubLiteSourceResource(ConfigurableResource):
    kafka: ResourceDependency[KafkaResource]
    pubsublite: ResourceDependency[PubSubLiteResource]
    spark: ResourceDependency[SparkResource]

    def run_batch(self, bridge: Bridge, recorded: LiteCursors) -> LiteSourceBatchResult:
        config = bridge.config
        assert isinstance(config, PubSubLiteSourceConfig)
        return run_lite_source_batch(
            self.spark.session(), config, self.pubsublite.connection_for(config), self.kafka.admin(),
            recorded, bridge.batch,
        )
