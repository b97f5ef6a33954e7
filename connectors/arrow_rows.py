"""Summary rows that Spark tasks return through mapInArrow, declared once as a Spark DDL string.

mapInArrow takes the DDL; the task must yield Arrow batches of exactly that schema. Deriving the
Arrow schema from the DDL keeps the two from drifting apart.
"""

from __future__ import annotations

import pyarrow as pa

_ARROW_TYPES = {"string": pa.string(), "int": pa.int32(), "long": pa.int64()}


def arrow_schema(ddl: str) -> pa.Schema:
    fields = [column.split() for column in ddl.split(",")]
    return pa.schema([(name, _ARROW_TYPES[type_name]) for name, type_name in fields])


def rows_batch(rows: list[dict], ddl: str) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(rows, schema=arrow_schema(ddl))
