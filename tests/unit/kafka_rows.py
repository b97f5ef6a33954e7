"""A batch of Spark's Kafka rows with awkward keys, values, headers and timestamps, for the columnar tests."""

import itertools

import pyarrow as pa

KEYS = [None, b"", b"user-1", "ключ".encode(), b"\xff\xfe", b"k" * 1025, "é".encode() * 300, b"\x80" * 800]
VALUES = [None, b"", b"hello", b"\xc3\x28", b"v" * 2000]
HEADERS = [[], [{"key": "h", "value": b"x"}], [{"key": "bin", "value": b"\xff"}, {"key": "n", "value": None}],
           [{"key": "goog-bad", "value": b"y"}, {"key": "key", "value": b"dup"}]]


def awkward_kafka_rows() -> pa.RecordBatch:
    rows = list(itertools.product(KEYS, VALUES, HEADERS))
    n = len(rows)
    return pa.RecordBatch.from_pydict({
        "topic": ["t"] * n, "partition": [i % 3 for i in range(n)], "offset": list(range(100, 100 + n)),
        "key": [r[0] for r in rows], "value": [r[1] for r in rows],
        "timestamp_ms": [None if i % 7 == 0 else 1_700_000_000_000 + i for i in range(n)],
        "timestampType": [-1 if i % 11 == 0 else 0 for i in range(n)],
        "headers": [r[2] for r in rows],
    }, schema=pa.schema([
        ("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()), ("key", pa.binary()),
        ("value", pa.binary()), ("timestamp_ms", pa.int64()), ("timestampType", pa.int32()),
        ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
    ]))
