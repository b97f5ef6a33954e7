"""Executor side of the archive sink: one Spark task per Kafka partition range.

Records are written into a local Block-GZIP file; every `flush.size` records (and at the end of
the range) the file is uploaded, then its index, then the partition's cursor. A crash at any point
leaves the cursor at the last complete file, and the re-run writes the same names again. The
driver moves each cursor to the end of its range once every task is done (trailing gaps).
"""

from __future__ import annotations

import logging
import os
import tempfile
from typing import Callable, Iterator

import pyarrow as pa

from connectors.kafka.dead_letter import DeadLetterQueue
from connectors.kafka.record import KafkaRecord
from connectors.s3_block_gzip_sink.block_gzip import BlockGzipWriter
from connectors.s3_block_gzip_sink.config import S3BlockGzipSinkConfig
from connectors.s3_block_gzip_sink.layout import data_key, index_document, index_key
from connectors.s3_block_gzip_sink.lines import LineError, record_line
from connectors.s3_block_gzip_sink.store import Cursor, s3_client, s3_outages_named, write_cursor
from connectors.transforms.columnar import ColumnarChain

log = logging.getLogger(__name__)

# skipped: records whose value could not become a line, skipped (or dead-lettered) under errors.tolerance=all;
# filtered: records a Filter transform dropped.
SUMMARY_SCHEMA = ("topic string, partition int, records long, files long, bytes_uncompressed long, "
                  "bytes_written long, skipped long, filtered long, last_index string")


class _OpenFile:
    def __init__(self, config: S3BlockGzipSinkConfig, topic: str, partition: int, first_offset: int, first_ts: int):
        self.key = data_key(config.key_prefix(), topic, partition, first_offset, first_ts)
        fd, self.path = tempfile.mkstemp(suffix=".gz", dir=config.local_buffer_dir)
        self.handle = os.fdopen(fd, "wb")
        self.writer = BlockGzipWriter(self.handle, config.compressed_block_size)


def archive_arrow_batches(cfg: S3BlockGzipSinkConfig, outage_timeout_s: float, kafka_client_config: dict[str, str],
                          bridge_name: str, batches: Iterator[pa.RecordBatch],
                          keep_going: Callable[[], bool] | None = None) -> Iterator[list[dict]]:
    # `keep_going` is not asked: an archive task's writes are one S3 request each, with nothing queued behind them.
    s3 = s3_client(cfg, outage_timeout_s)
    dead_letters: DeadLetterQueue | None = None  # opened on the first dead letter only
    converter = cfg.value_converter_instance()
    # Filter, InsertHeader and DropHeaders with any predicate (the config refuses routers); the archive keeps values
    # and timestamps, so only a Filter changes what it writes.
    chain = ColumnarChain.of(cfg.transforms) if cfg.transforms else None
    stats: dict[tuple[str, int], dict[str, int]] = {}
    current: dict[tuple[str, int], _OpenFile] = {}
    last_read: dict[tuple[str, int], int] = {}  # a partition's last offset read, written or skipped

    def finish(tp: tuple[str, int], next_offset: int) -> None:
        f = current.pop(tp)
        if dead_letters is not None:  # the cursor may pass a dead-lettered record only once Kafka has it
            for refused in dead_letters.flush():
                log.warning("skipping %s: the dead-letter topic refused it too (errors.tolerance=all)", refused)
        chunks = f.writer.close()
        f.handle.close()
        try:
            with s3_outages_named(s3, f"archiving topic {tp[0]} partition {tp[1]} to s3://{cfg.s3_bucket}/{f.key}"):
                if chunks:
                    s3.upload_file(f.path, cfg.s3_bucket, f.key)  # data first ...
                    s3.put_object(Bucket=cfg.s3_bucket, Key=index_key(f.key), Body=index_document(chunks),
                                  ContentType="application/json")  # ... then the index that points into it ...
                write_cursor(s3, cfg, tp[0], tp[1], Cursor(index_key(f.key), next_offset))  # ... then the cursor
        finally:
            os.unlink(f.path)
        s = stats[tp]
        s["last_index"] = index_key(f.key)
        s["files"] += 1 if chunks else 0
        s["bytes_uncompressed"] += f.writer.bytes_uncompressed
        s["bytes_written"] += f.writer.bytes_written

    # A dead letter is the whole record; otherwise the key and headers are not turned into Python objects.
    wanted = ["topic", "partition", "offset", "value", "timestamp_ms"] + (["key", "headers"] if cfg.reads_kafka_headers
                                                                          else [])
    try:
        for batch in batches:
            dropped = chain.apply(batch).dropped if chain is not None else None
            cols = batch.select(wanted).to_pydict()
            for i in range(batch.num_rows):
                tp = (cols["topic"][i], cols["partition"][i])
                offset = last_read[tp] = cols["offset"][i]  # the cursor passes a filtered record too
                s = stats.setdefault(tp, {"records": 0, "files": 0, "bytes_uncompressed": 0, "bytes_written": 0,
                                          "skipped": 0, "filtered": 0, "last_index": None})
                s["records"] += 1
                if dropped is not None and dropped[i]:
                    s["filtered"] += 1
                    continue
                try:
                    line = record_line(converter, cols["value"][i])
                except LineError as exc:
                    if cfg.errors_tolerance == "none":
                        raise LineError(f"topic {tp[0]} partition {tp[1]} offset {offset}: {exc}") from exc
                    s["skipped"] += 1
                    record = KafkaRecord(  # key and headers are read only when a dead-letter topic is set
                        tp[0], tp[1], offset, cols["key"][i] if "key" in cols else None, cols["value"][i],
                        cols["timestamp_ms"][i],
                        headers=[(h["key"], h["value"]) for h in (cols["headers"][i] or [])] if "headers" in cols else [])
                    if cfg.errors_deadletterqueue_topic_name:
                        if dead_letters is None:
                            dead_letters = DeadLetterQueue(cfg.errors_deadletterqueue_topic_name, kafka_client_config,
                                                           bridge_name, cfg.errors_deadletterqueue_context_headers_enable)
                        dead_letters.send(record, "VALUE_CONVERTER", exc)
                    else:
                        log.warning("skipping %s: %s (errors.tolerance=all, no dead-letter topic)", record.where, exc)
                    continue
                f = current.get(tp)
                if f is None:
                    f = current[tp] = _OpenFile(cfg, tp[0], tp[1], offset, cols["timestamp_ms"][i] or 0)
                f.writer.write(offset, line)
                if f.writer.records >= cfg.flush_size:
                    finish(tp, offset + 1)
        for tp in list(current):  # the cursor past what was skipped behind the file's last record too
            finish(tp, last_read[tp] + 1)
    finally:
        for f in current.values():  # a failure: drop local files, upload nothing more
            f.handle.close()
            os.unlink(f.path)

    yield [{"topic": t, "partition": p, **s} for (t, p), s in stats.items()]
