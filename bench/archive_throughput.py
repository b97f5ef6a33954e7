"""S3 Block-GZIP archive throughput: MB/s and peak memory of one micro-batch of 1 KiB records.

Own local stack (Kafka + moto S3) on free ports, warm Spark session.
Usage: python -m bench.archive_throughput [--records 100000] [--sizes 1024]
"""

from __future__ import annotations

import os
import uuid

from bench.common import ResultTable, run_benchmark, warm_spark
from bench.process_memory import PeakMemory
from bench.sink_throughput import produce


def main() -> None:
    run_benchmark(run, records=100_000, sizes="1024")


def run(args, server_pids: frozenset[int]) -> None:
    import boto3

    from connectors.config.bridges_file import BatchSettings
    from connectors.kafka.admin import KafkaAdmin
    from connectors.kafka.connection import KafkaConnection
    from connectors.s3_block_gzip_sink.batch import run_archive_batch
    from connectors.s3_block_gzip_sink.config import S3BlockGzipSinkConfig

    spark, spark_start_s = warm_spark()
    bootstrap = os.environ["KAFKA_BOOTSTRAP_SERVERS"]
    admin = KafkaAdmin(KafkaConnection(bootstrap))
    s3 = boto3.client("s3")
    table = ResultTable()
    for size in [int(s) for s in args.sizes.split(",")]:
        for label, keys in {"seed defaults (64 MiB blocks)": {}, "1 MiB blocks": {"compressed_block_size": 1 << 20}}.items():
            name = f"bench-{size}-{uuid.uuid4().hex[:6]}"
            admin.create_topic(name, args.partitions)
            s3.create_bucket(Bucket=name)
            produce(bootstrap, name, args.records, size)
            config = S3BlockGzipSinkConfig.model_validate(
                {"topics": name, "s3.bucket": name, "s3.path_style": True, **keys})
            with PeakMemory(exclude=server_pids) as memory:
                result = run_archive_batch(spark, config, admin, BatchSettings(max_records=args.records,
                                                                               initial_offsets="earliest"), "bench")
            assert result.totals["records"] == args.records, result.totals
            table.add(size, label, args.records, result.duration_s, memory.peak)
    table.print(spark_start_s, f"Kafka {args.partitions} partitions; S3: moto server; "
                               f"records are random hex text (compresses ~2:1)")


if __name__ == "__main__":
    main()
