"""Object names of the Block-GZIP archive, the index document, and the per-partition cursor.

<prefix>/<yyyy-mm-dd>/<topic>-<partition %05d>-<first offset %012d>.gz       concatenated gzip members
<prefix>/<yyyy-mm-dd>/<topic>-<partition %05d>-<first offset %012d>.index.json
<prefix>/cursors/<topic>-<partition %05d>.json   {"index": <key of the last index>, "next_offset": N}

The date is the UTC day of the file's first record timestamp, so a re-run writes the same names.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Chunk:
    byte_length_uncompressed: int
    num_records: int
    byte_length: int
    byte_offset: int
    first_record_offset: int


def _join(prefix: str, *parts: str) -> str:
    return "/".join(p for p in (prefix, *parts) if p)


def file_stem(topic: str, partition: int, first_offset: int) -> str:
    return f"{topic}-{partition:05d}-{first_offset:012d}"


def data_key(prefix: str, topic: str, partition: int, first_offset: int, first_timestamp_ms: int) -> str:
    day = dt.datetime.fromtimestamp(max(first_timestamp_ms, 0) / 1000, tz=dt.timezone.utc).strftime("%Y-%m-%d")
    return _join(prefix, day, file_stem(topic, partition, first_offset) + ".gz")


def index_key(data_object_key: str) -> str:
    return data_object_key.removesuffix(".gz") + ".index.json"


def cursor_key(prefix: str, topic: str, partition: int) -> str:
    return _join(prefix, "cursors", f"{topic}-{partition:05d}.json")


def index_document(chunks: list[Chunk]) -> bytes:
    return json.dumps({"chunks": [asdict(c) for c in chunks]}).encode()


def parse_index(body: bytes) -> list[Chunk]:
    return [Chunk(**c) for c in json.loads(body)["chunks"]]


INDEX_NAME = re.compile(r"(?P<topic>.+)-(?P<partition>\d{5})-(?P<offset>\d{12})\.index\.json$")
