"""The column-wise PubsubMessage encoder: protobuf decodes what it writes into the messages upb would build,
over the lengths where varints change width; requests split by the batching keys as the publisher would."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from google.pubsub_v1.types import PublishRequest, PubsubMessage

from connectors.cloud_pubsub.wire import encode_messages, field_bytes, varints

TOPIC = "projects/p/topics/t"


def _decoded(encoded, start: int, stop: int) -> list:
    body = field_bytes(1, TOPIC.encode()) + bytes(encoded.chunk(start, stop))
    request = PublishRequest.pb().FromString(body)
    assert request.topic == TOPIC
    return list(request.messages)


@pytest.mark.parametrize("value", [0, 1, 127, 128, 16_383, 16_384, 2**21 - 1, 2**21, 2**28, 2**35 - 1])
def test_varints_are_protobufs(value):
    array, width = varints(np.array([value]))
    encoded = array[0].as_py()
    assert width[0] == len(encoded)
    assert sum((b & 0x7F) << (7 * i) for i, b in enumerate(encoded)) == value
    assert all(b & 0x80 for b in encoded[:-1]) and not encoded[-1] & 0x80
    if 0 < value < 300_000:  # upb writes the data field's length with the same varint
        assert PubsubMessage.pb()(data=b"x" * value).SerializeToString()[1:1 + width[0]] == encoded


def test_messages_with_and_without_the_attribute_decode_as_upb_builds_them():
    sizes = [0, 1, 127, 128, 300, 16_384, 70_000]
    data = pa.array([b"d" * n for n in sizes] + [None], pa.binary())
    keys = pa.array([None, b"", b"k", "ключ".encode(), b"k" * 127, b"k" * 128, b"k" * 1024, b"last"], pa.binary())
    encoded = encode_messages(data, "key", keys)
    expected = [PubsubMessage.pb()(data=d or b"", attributes={} if k is None else {"key": k.decode()})
                for d, k in zip(data.to_pylist(), keys.to_pylist())]
    assert _decoded(encoded, 0, len(expected)) == expected
    assert _decoded(encoded, 2, 5) == expected[2:5]
    assert list(encoded.sizes) == [len(d or b"") + (0 if k is None else 3 + len(k))
                                   for d, k in zip(data.to_pylist(), keys.to_pylist())]


def test_data_only():
    encoded = encode_messages(pa.array([b"a", b"bc"], pa.binary()))
    assert _decoded(encoded, 0, 2) == [PubsubMessage.pb()(data=b"a"), PubsubMessage.pb()(data=b"bc")]


@pytest.mark.parametrize("length", [0, 1, 127, 128, 16_383, 16_384, 300_000])
def test_a_field_is_what_upb_writes_and_its_length_is_varints(length):
    data = b"t" * length
    if length:  # protobuf leaves an empty string out
        assert field_bytes(1, data) == PublishRequest.pb()(topic=data.decode()).SerializeToString()
    assert field_bytes(1, data)[1:-length or None] == varints(np.array([length]))[0][0].as_py()
