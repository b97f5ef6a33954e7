import gzip
import io
import zlib

import pytest

from connectors.kafka_connect.converters import converter_for
from connectors.s3_block_gzip_sink.block_gzip import BlockGzipWriter
from connectors.s3_block_gzip_sink.layout import cursor_key, data_key, index_document, index_key, parse_index
from connectors.s3_block_gzip_sink.lines import LineError, record_line


def write(records, block_size):
    out = io.BytesIO()
    writer = BlockGzipWriter(out, block_size)
    for offset, line in records:
        writer.write(offset, line)
    chunks = writer.close()
    return out.getvalue(), chunks


def test_members_roll_at_the_block_size_and_each_decompresses_alone():
    data, chunks = write([(o, b"x" * 9) for o in range(10)], block_size=30)  # 10 bytes a line with newline
    assert [(c.first_record_offset, c.num_records, c.byte_length_uncompressed) for c in chunks] == \
        [(0, 3, 30), (3, 3, 30), (6, 3, 30), (9, 1, 10)]
    assert gzip.decompress(data) == b"xxxxxxxxx\n" * 10  # the whole file is one gzip stream
    for c in chunks:
        member = data[c.byte_offset:c.byte_offset + c.byte_length]
        assert zlib.decompress(member, 31) == b"xxxxxxxxx\n" * c.num_records
    assert chunks[-1].byte_offset + chunks[-1].byte_length == len(data)


def test_offset_gaps_start_a_new_member_so_offsets_stay_exact():
    data, chunks = write([(5, b"a"), (6, b"b"), (9, b"c"), (10, b"d")], block_size=1 << 20)
    assert [(c.first_record_offset, c.num_records) for c in chunks] == [(5, 2), (9, 2)]


def test_no_records_no_member_and_newlines_added_once():
    assert write([], 100) == (b"", [])
    data, _ = write([(0, b"line\n"), (1, b"next")], 100)
    assert gzip.decompress(data) == b"line\nnext\n"


def test_names_are_deterministic_and_dated_by_the_first_record():
    key = data_key("arch", "orders", 3, 120, 1_709_600_000_000)  # 2024-03-05 UTC
    assert key == "arch/2024-03-05/orders-00003-000000000120.gz"
    assert index_key(key) == "arch/2024-03-05/orders-00003-000000000120.index.json"
    assert data_key("", "t", 0, 0, 0) == "1970-01-01/t-00000-000000000000.gz"
    assert cursor_key("arch", "orders", 3) == "arch/cursors/orders-00003.json"


def test_index_document_round_trips_with_the_seed_field_names():
    _, chunks = write([(0, b"a")], 10)
    doc = index_document(chunks)
    assert set(__import__("json").loads(doc)["chunks"][0]) == {
        "byte_length_uncompressed", "num_records", "byte_length", "byte_offset", "first_record_offset"}
    assert parse_index(doc) == chunks


def test_record_lines():
    assert record_line(converter_for("org.apache.kafka.connect.converters.ByteArrayConverter"), b"\xffraw") == b"\xffraw"
    assert record_line(converter_for("org.apache.kafka.connect.storage.StringConverter"), "é".encode()) == "é".encode()
    json_conv = converter_for("org.apache.kafka.connect.json.JsonConverter", schemas_enable=False)
    assert record_line(json_conv, b'{ "a" : [1, 2] }') == b'{"a":[1,2]}'
    assert record_line(json_conv, None) == b""
    with pytest.raises(LineError, match="newline"):
        record_line(converter_for("org.apache.kafka.connect.storage.StringConverter"), b"two\nlines")


def test_an_archive_goes_on_from_its_cursors_else_from_the_position_given():
    from connectors.s3_block_gzip_sink.batch import at_cursors
    from connectors.s3_block_gzip_sink.store import Cursor

    cursors = {("t", 0): Cursor("t-00000-000000000057.index.json", 154), ("t", 1): None, ("t", 2): None}
    # Partition 0's commit (57) is behind its cursor: the round up to 154 is archived already and not written again.
    assert at_cursors(cursors, {"t": {0: 57, 1: 12}}) == {"t": {0: 154, 1: 12}}
