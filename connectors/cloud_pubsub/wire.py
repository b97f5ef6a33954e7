"""Pub/Sub messages of a whole Arrow batch in protobuf's wire format, built column by column.

Why by hand: upb builds a message in about 3 us of Python calls per message (a hand-written encoder of one
message at a time was only 25 % faster), and at the seed's defaults that per-message work was most of a sink
task's CPU; protobuf has no columnar encoder. This one encodes what the common case publishes, the data (field 1
of PubsubMessage) and at most one attribute (field 2, a map entry), with Arrow's compute functions, and frames
each message as field 2 of a PublishRequest: the bytes of rows [i, j) are one slice of one buffer, and a request
is its topic field followed by that slice. tests/unit/test_pubsub_wire.py decodes the output with protobuf.
"""

from __future__ import annotations

from dataclasses import dataclass
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_VARINT_BYTES = 5  # enough for lengths under 2**35; Pub/Sub requests are at most 10 MB


def _scalar(data: bytes) -> pa.Scalar:
    return pa.scalar(data, pa.large_binary())


_DATA_TAG, _MESSAGE_TAG, _EMPTY = _scalar(b"\x0a"), _scalar(b"\x12"), _scalar(b"")


def varints(values: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    """Each non-negative value as a protobuf varint: a binary array, and the byte width of each."""
    v = values.astype(np.uint64)
    width = np.ones(len(v), np.int64)
    for shift in range(7, 7 * _VARINT_BYTES, 7):
        width += v >= (1 << shift)
    out = np.zeros((len(v), _VARINT_BYTES), np.uint8)
    for i in range(_VARINT_BYTES):
        out[:, i] = ((v >> np.uint64(7 * i)) & np.uint64(0x7F)) | np.where(width > i + 1, 0x80, 0).astype(np.uint64)
    offsets = np.zeros(len(v) + 1, np.int64)
    np.cumsum(width, out=offsets[1:])
    data = out[np.arange(_VARINT_BYTES) < width[:, None]]
    array = pa.Array.from_buffers(pa.large_binary(), len(v), [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    return array, width


def field_bytes(field: int, data: bytes) -> bytes:
    """One length-delimited field (for the request's topic). Its one varint is made here: varints() costs about
    85 us of numpy calls for any length, and a publisher (one per always-on round) makes this once."""
    length, head = len(data), bytearray([field << 3 | 2])
    while length >= 0x80:
        head.append(length & 0x7F | 0x80)
        length >>= 7
    head.append(length)
    return bytes(head) + data


@dataclass(frozen=True)
class EncodedMessages:
    """PublishRequest.messages entries, one per row, back to back in one buffer."""

    buffer: pa.Buffer  # each row's field-2 entry of a PublishRequest, back to back
    offsets: np.ndarray  # where row i's entry starts in `buffer`; one more than there are rows
    sizes: np.ndarray  # what the batching keys count per message: data plus attribute keys and values, in bytes

    def __len__(self) -> int:
        return len(self.sizes)

    def chunk(self, start: int, stop: int) -> memoryview:
        """The entries of rows [start, stop) as one slice of the buffer (no copy)."""
        return memoryview(self.buffer)[self.offsets[start]:self.offsets[stop]]


def encode_messages(data: pa.Array, attribute_name: str | None = None,
                    attribute_values: pa.Array | None = None) -> EncodedMessages:
    """PubsubMessage entries with `data` (bytes; null as empty) and, where `attribute_values` (UTF-8 bytes) is not
    null, the attribute `attribute_name` set to it."""
    data = pc.fill_null(data.cast(pa.large_binary()), b"")
    data_length = pc.binary_length(data).to_numpy(zero_copy_only=False).astype(np.int64)
    data_length_varint, data_length_width = varints(data_length)
    message_length = 1 + data_length_width + data_length
    sizes = data_length.copy()
    parts = [_DATA_TAG, data_length_varint, data]
    if attribute_name is not None and attribute_values is not None:
        name = attribute_name.encode()
        assert len(name) < 128, "the entry's head below has a one-byte length"
        values = attribute_values.cast(pa.large_binary())
        present = values.is_valid().to_numpy(zero_copy_only=False)
        values = pc.fill_null(values, b"")
        value_length = pc.binary_length(values).to_numpy(zero_copy_only=False).astype(np.int64)
        value_varint, value_width = varints(value_length)
        entry_length = 2 + len(name) + 1 + value_width + value_length  # key field, then value field
        entry_varint, entry_width = varints(entry_length)
        head = _scalar(b"\x0a" + bytes([len(name)]) + name + b"\x12")
        entry = pc.binary_join_element_wise(_MESSAGE_TAG, entry_varint, head, value_varint, values, _EMPTY)
        parts.append(pc.if_else(pa.array(present), entry, _EMPTY))
        message_length += np.where(present, 1 + entry_width + entry_length, 0)
        sizes += np.where(present, len(name) + value_length, 0)
    message_length_varint, _ = varints(message_length)
    framed = pc.binary_join_element_wise(_MESSAGE_TAG, message_length_varint, *parts, _EMPTY)
    offsets = np.frombuffer(framed.buffers()[1], np.int64)[framed.offset:framed.offset + len(framed) + 1]
    return EncodedMessages(framed.buffers()[2], offsets, sizes)
