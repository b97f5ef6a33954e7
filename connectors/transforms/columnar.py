"""A chain of transforms that never look inside a key or value, run on a whole Arrow batch of Kafka rows at once:
Filter, InsertHeader, DropHeaders, RegexRouter and TimestampRouter, with any predicate. Under the String and
ByteArray converters a record's Connect key and value are its own bytes, so these transforms give what they give record by record
(tests/unit/test_transforms_columnar.py holds both paths to the same messages) at a fraction of the cost: a
ConnectRecord per row costs more than the whole columnar conversion. Written with numpy and Arrow compute because no
library applies Connect's transforms to Arrow columns."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from connectors.transforms.chain import Stage, TransformChain, TransformFailed
from connectors.transforms.headers import DropHeaders, InsertHeader
from connectors.transforms.predicates import HasHeaderKey, RecordIsTombstone, TopicNameMatches
from connectors.transforms.record import header_bytes
from connectors.transforms.routing import Filter, RegexRouter, TimestampRouter


@dataclass(frozen=True)
class Transformed:
    batch: pa.RecordBatch  # the same rows, with the topics and headers the chain gave them
    dropped: np.ndarray | None  # rows a Filter dropped (None: none)
    topics_changed: bool  # a router renamed some row's topic
    # Rows a transform failed on, with its error (errors.tolerance decides; the later transforms skip them).
    failed: dict[int, TransformFailed] | None = None


class ColumnarChain:
    def __init__(self, steps: list[tuple[Stage, object, object]]):
        self.steps = steps

    @classmethod
    def of(cls, chain: TransformChain) -> ColumnarChain | None:
        """The chain run column-wise, or None when a transform in it needs the records one by one."""
        return cls(chain.running().steps) if chain.runs_columnar else None

    def apply(self, batch: pa.RecordBatch) -> Transformed:
        rows = batch.num_rows
        dropped = np.zeros(rows, dtype=bool)
        topics = batch.column("topic")
        headers = batch.column("headers") if "headers" in batch.schema.names else None
        topics_changed = False
        failed: dict[int, TransformFailed] = {}
        out = dropped.copy()  # dropped or failed: the later transforms skip them
        for stage, transform, predicate in self.steps:
            applies = ~out
            if predicate is not None:
                picked = self._test(predicate, batch, topics, headers)
                applies &= picked != stage.negate
            if not applies.any():
                continue
            if isinstance(transform, Filter):
                dropped |= applies
                out |= applies
            elif isinstance(transform, RegexRouter):
                renamed = _renamed(topics, transform)
                if renamed is not None:
                    topics = pc.if_else(pa.array(applies), renamed, topics)
                    topics_changed = True
            elif isinstance(transform, TimestampRouter):
                timestamps = _timestamps(batch)
                missing = applies & timestamps.mask
                for row in np.flatnonzero(missing):
                    failed[int(row)] = stage.failed(TimestampRouter.MISSING)
                out |= missing
                applies &= ~missing
                if applies.any():
                    topics, unwritable = _by_time(topics, timestamps, applies, transform)
                    for row, exc in unwritable.items():
                        failed[row] = stage.failed(exc)
                        out[row] = True
                    topics_changed = True
            elif headers is not None and isinstance(transform, InsertHeader):
                headers = _with_header(headers, applies, transform.header.key, header_bytes(transform.header))
            elif headers is not None and isinstance(transform, DropHeaders):
                headers = _without_headers(headers, applies, transform.names)
        if topics_changed:
            batch = batch.set_column(batch.schema.get_field_index("topic"), "topic", topics)
        if headers is not None:
            batch = batch.set_column(batch.schema.get_field_index("headers"), "headers", headers)
        return Transformed(batch, dropped if dropped.any() else None, topics_changed, failed or None)

    @staticmethod
    def _test(predicate, batch: pa.RecordBatch, topics: pa.Array, headers: pa.Array | None) -> np.ndarray:
        if isinstance(predicate, RecordIsTombstone):
            return pc.is_null(batch.column("value")).to_numpy(zero_copy_only=False)
        if isinstance(predicate, TopicNameMatches):
            matching = [t for t in pc.unique(topics).to_pylist() if predicate.test_topic(t)]
            return pc.is_in(topics, pa.array(matching, pa.string())).to_numpy(zero_copy_only=False)
        if isinstance(predicate, HasHeaderKey):
            found = np.zeros(len(topics), dtype=bool)
            if headers is not None and len(headers.values):
                keys = pc.list_flatten(headers).field("key")
                parents = pc.list_parent_indices(headers).to_numpy()
                found[parents[pc.equal(keys, predicate.name).to_numpy(zero_copy_only=False)]] = True
            return found
        raise TypeError(f"no columnar test for {type(predicate).__name__}")


def _renamed(topics: pa.Array, router: RegexRouter) -> pa.Array | None:
    """Every row's topic as the router names it (unchanged where the regex does not match the whole name); None when
    no topic of the batch changes."""
    distinct = pc.unique(topics)
    names = [router.rename(t) for t in distinct.to_pylist()]
    if names == distinct.to_pylist():
        return None
    return pa.array(names, pa.string()).take(pc.index_in(topics, distinct))


def _timestamps(batch: pa.RecordBatch) -> np.ma.MaskedArray:
    """Each row's timestamp (ms), masked where the record has none (no timestamp type, or a null), as a Connect
    record's timestamp is null there."""
    values = batch.column("timestamp_ms")
    missing = pc.or_(pc.is_null(values), pc.less(batch.column("timestampType"), 0)).to_numpy(zero_copy_only=False)
    return np.ma.MaskedArray(pc.fill_null(values, 0).to_numpy(zero_copy_only=False), mask=missing)


def _by_time(topics: pa.Array, timestamps: np.ma.MaskedArray, applies: np.ndarray,
             router: TimestampRouter) -> tuple[pa.Array, dict[int, Exception]]:
    """Each applying row's topic as the router names it from its topic and timestamp (the others keep theirs), and
    the rows whose time it cannot write (a year past 9999) with the error: the name is made once per topic and span
    of the format's resolution, not once per record."""
    codes = pc.dictionary_encode(topics)
    names = codes.dictionary.to_pylist()
    spans = np.floor_divide(timestamps.data, router.resolution_ms)  # floored: the same text within a span
    if len(spans) and int(np.abs(spans).max()) > (2 ** 62) // len(names):  # keys would overflow int64: per row
        distinct_keys = list(spans.astype(object) * len(names) + codes.indices.to_numpy(zero_copy_only=False))
        which = np.arange(len(spans))
    else:
        # One int64 per (span, topic), told apart by Arrow's hashing (a sort of row pairs cost five times the chain).
        keys = spans * len(names) + codes.indices.to_numpy(zero_copy_only=False)
        distinct = pc.dictionary_encode(pa.array(keys, pa.int64()))
        distinct_keys, which = distinct.dictionary.to_pylist(), distinct.indices.to_numpy(zero_copy_only=False)
    made: list[str | None] = []
    errors: dict[int, Exception] = {}
    for index, key in enumerate(distinct_keys):
        span, code = divmod(int(key), len(names))
        try:
            made.append(router.topic_at(names[code], span * router.resolution_ms))
        except (OverflowError, ValueError) as exc:
            made.append(None)
            errors[index] = exc
    routed = pa.array(made, pa.string()).take(pa.array(which))
    failed = {int(row): errors[int(which[row])] for row in np.flatnonzero(applies) if int(which[row]) in errors}
    if failed:
        applies = applies.copy()
        applies[list(failed)] = False
    return pc.if_else(pa.array(applies), routed, topics), failed


def _offsets(headers: pa.ListArray) -> np.ndarray:
    return headers.offsets.to_numpy() - headers.offsets[0].as_py()


def _with_header(headers: pa.ListArray, applies: np.ndarray, key: str, value: bytes | None) -> pa.ListArray:
    """Each applying row's headers with (key, value) added at the end."""
    offsets, values = _offsets(headers), pc.list_flatten(headers)
    added = applies.astype(np.int64)
    new_offsets = offsets + np.concatenate(([0], np.cumsum(added)))
    positions = np.arange(len(values)) + np.repeat(new_offsets[:-1] - offsets[:-1], np.diff(offsets))
    take = np.full(new_offsets[-1], len(values), dtype=np.int64)  # the added header, at its rows' ends
    take[positions] = np.arange(len(values))
    extra = pa.array([{"key": key, "value": value}], values.type)
    return pa.ListArray.from_arrays(pa.array(new_offsets, pa.int32()),
                                    pa.concat_arrays([values, extra]).take(pa.array(take)),
                                    type=headers.type)


def _without_headers(headers: pa.ListArray, applies: np.ndarray, names: frozenset[str]) -> pa.ListArray:
    """Each applying row's headers without those of the given names."""
    offsets, values = _offsets(headers), pc.list_flatten(headers)
    parents = np.repeat(np.arange(len(headers)), np.diff(offsets))
    named = pc.is_in(values.field("key"), pa.array(sorted(names), pa.string())).to_numpy(zero_copy_only=False)
    keep = ~(named & applies[parents])
    counts = np.bincount(parents[keep], minlength=len(headers))
    new_offsets = np.concatenate(([0], np.cumsum(counts)))
    return pa.ListArray.from_arrays(pa.array(new_offsets, pa.int32()), values.filter(pa.array(keep)),
                                    type=headers.type)
