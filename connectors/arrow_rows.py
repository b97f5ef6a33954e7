"""Summary rows that Spark tasks return through mapInArrow, declared once as a Spark DDL string.

mapInArrow takes the DDL; the task must yield Arrow batches of exactly that schema. Deriving the
Arrow schema from the DDL keeps the two from drifting apart.
"""

from __future__ import annotations

import functools

import pyarrow as pa

_ARROW_TYPES = {"string": pa.string(), "int": pa.int32(), "long": pa.int64()}


@functools.lru_cache(maxsize=None)  # a few DDLs, parsed once: an always-on round's summary is built ~10 times a second
def arrow_schema(ddl: str) -> pa.Schema:
    fields = [column.split() for column in ddl.split(",")]
    return pa.schema([(name, _ARROW_TYPES[type_name]) for name, type_name in fields])


@functools.lru_cache(maxsize=None)
def _row_type(ddl: str) -> pa.StructType:
    return pa.struct(list(arrow_schema(ddl)))


def rows_batch(rows: list[dict], ddl: str) -> pa.RecordBatch:
    # Through one struct array: about 4x faster than RecordBatch.from_pylist for the one or two rows of an always-on
    # round's summary (measured 46 us against 200 us for the sinks' 26 columns).
    return pa.RecordBatch.from_struct_array(pa.array(rows, _row_type(ddl)))
