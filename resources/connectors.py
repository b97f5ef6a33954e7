"""One resource per connector: it joins the shared resources to the connector's batch function.

Each batch function is imported when a run calls it, not when the code location loads: a run then
imports the runtime of its own connector only (Spark, gRPC and client libraries of the others cost
tenths of a second each), and the daemon and webserver load the code location without any of them.
"""

from typing import TYPE_CHECKING  # no `from __future__ import annotations`: Dagster reads the field types

from dagster import ConfigurableResource, ResourceDependency

from connectors.cloud_pubsub_sink.config import CloudPubSubSinkConfig
from connectors.cloud_pubsub_source.config import CloudPubSubSourceConfig
from connectors.config.bridges_file import Bridge
from connectors.pubsublite_sink.config import PubSubLiteSinkConfig
from connectors.pubsublite_source.config import PubSubLiteSourceConfig
from connectors.s3_block_gzip_sink.config import S3BlockGzipSinkConfig
from resources.kafka import KafkaResource
from resources.pubsub import PubSubResource
from resources.pubsublite import PubSubLiteResource
from resources.spark import SparkResource

if TYPE_CHECKING:
    from connectors.cloud_pubsub_source.batch import SourceBatchResult
    from connectors.kafka.admin import Offsets
    from connectors.kafka.sink_batch import SinkBatchResult
    from connectors.pubsublite_source.batch import LiteCursors, LiteSourceBatchResult
    from connectors.s3_block_gzip_sink.batch import ArchiveBatchResult


class CloudPubSubSinkResource(ConfigurableResource):
    kafka: ResourceDependency[KafkaResource]
    pubsub: ResourceDependency[PubSubResource]
    spark: ResourceDependency[SparkResource]

    def run_batch(self, bridge: Bridge, recorded: "Offsets") -> "SinkBatchResult":
        from connectors.cloud_pubsub_sink.batch import run_sink_batch

        config = bridge.config
        assert isinstance(config, CloudPubSubSinkConfig)
        with self.spark.batch_session(bridge.name) as spark:
            return run_sink_batch(spark, bridge.name, config, self.pubsub.connection_for(config), self.kafka.admin(),
                                  recorded, bridge.batch, bridge.consumer_group)


class CloudPubSubSourceResource(ConfigurableResource):
    kafka: ResourceDependency[KafkaResource]
    pubsub: ResourceDependency[PubSubResource]
    spark: ResourceDependency[SparkResource]

    def run_batch(self, bridge: Bridge) -> "SourceBatchResult":
        from connectors.cloud_pubsub_source.batch import run_source_batch

        config = bridge.config
        assert isinstance(config, CloudPubSubSourceConfig)
        with self.spark.batch_session(bridge.name) as spark:
            return run_source_batch(spark, config, self.pubsub.connection_for(config), self.kafka.admin(), bridge.batch)


class S3BlockGzipSinkResource(ConfigurableResource):
    kafka: ResourceDependency[KafkaResource]
    spark: ResourceDependency[SparkResource]

    def run_batch(self, bridge: Bridge, recorded: "Offsets") -> "ArchiveBatchResult":
        from connectors.s3_block_gzip_sink.batch import run_archive_batch

        config = bridge.config
        assert isinstance(config, S3BlockGzipSinkConfig)
        with self.spark.batch_session(bridge.name) as spark:
            return run_archive_batch(spark, config, self.kafka.admin(), bridge.batch, bridge.consumer_group,
                                     bridge.name, recorded)


class PubSubLiteSinkResource(ConfigurableResource):
    kafka: ResourceDependency[KafkaResource]
    pubsublite: ResourceDependency[PubSubLiteResource]
    spark: ResourceDependency[SparkResource]

    def run_batch(self, bridge: Bridge, recorded: "Offsets") -> "SinkBatchResult":
        from connectors.pubsublite_sink.batch import run_lite_sink_batch

        config = bridge.config
        assert isinstance(config, PubSubLiteSinkConfig)
        with self.spark.batch_session(bridge.name) as spark:
            return run_lite_sink_batch(spark, bridge.name, config, self.pubsublite.connection_for(config),
                                       self.kafka.admin(), recorded, bridge.batch, bridge.consumer_group)


class PubSubLiteSourceResource(ConfigurableResource):
    kafka: ResourceDependency[KafkaResource]
    pubsublite: ResourceDependency[PubSubLiteResource]
    spark: ResourceDependency[SparkResource]

    def run_batch(self, bridge: Bridge, recorded: "LiteCursors") -> "LiteSourceBatchResult":
        from connectors.pubsublite_source.batch import run_lite_source_batch

        config = bridge.config
        assert isinstance(config, PubSubLiteSourceConfig)
        with self.spark.batch_session(bridge.name) as spark:
            return run_lite_source_batch(spark, config, self.pubsublite.connection_for(config), self.kafka.admin(),
                                         recorded, bridge.batch)
