"""S3BlockGzipSinkConnector: Kafka -> S3 archive in the Block-GZIP format, resumable from S3."""
