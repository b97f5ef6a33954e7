"""Read the archive from a Kafka offset: find the file and member through the index objects, then
fetch one member at a time with a byte-range GET (never a whole file)."""

from __future__ import annotations

import zlib
from typing import Iterator

from connectors.s3_block_gzip_sink.layout import INDEX_NAME, Chunk, parse_index


def _index_keys(s3, bucket: str, prefix: str, topic: str, partition: int) -> list[tuple[int, str]]:
    """(first offset, index key) of every file of the topic-partition, in offset order."""
    found = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix.strip("/")):
        for obj in page.get("Contents", []):
            match = INDEX_NAME.search(obj["Key"].rsplit("/", 1)[-1])
            if match and match["topic"] == topic and int(match["partition"]) == partition:
                found.append((int(match["offset"]), obj["Key"]))
    return sorted(found)


def _member_lines(s3, bucket: str, data_key: str, chunk: Chunk) -> list[bytes]:
    byte_range = f"bytes={chunk.byte_offset}-{chunk.byte_offset + chunk.byte_length - 1}"
    body = s3.get_object(Bucket=bucket, Key=data_key, Range=byte_range)["Body"].read()
    return zlib.decompress(body, 31).split(b"\n")[:chunk.num_records]


def read_from_offset(s3, bucket: str, prefix: str, topic: str, partition: int, offset: int) -> Iterator[tuple[int, bytes]]:
    """(offset, record line) for every archived record of the partition at or after `offset`."""
    files = _index_keys(s3, bucket, prefix, topic, partition)
    start = max((i for i, (first, _) in enumerate(files) if first <= offset), default=0)
    for _, key in files[start:]:
        chunks = parse_index(s3.get_object(Bucket=bucket, Key=key)["Body"].read())
        data_key = key.removesuffix(".index.json") + ".gz"
        for chunk in chunks:
            if chunk.first_record_offset + chunk.num_records <= offset:
                continue  # wholly before the offset: not fetched
            for i, line in enumerate(_member_lines(s3, bucket, data_key, chunk)):
                if chunk.first_record_offset + i >= offset:
                    yield chunk.first_record_offset + i, line
