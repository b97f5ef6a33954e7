"""Avro, JSON Schema and Protobuf schemas and values <-> Connect's data model, without a registry."""

import datetime as dt
import io
import json
from decimal import Decimal

import pytest
from fastavro import parse_schema, schemaless_writer

from connectors.kafka_connect.errors import ConversionError

from connectors.kafka_connect.data import DATE, DECIMAL, TIMESTAMP, Field, Schema, Struct, decimal_schema
from connectors.kafka_connect.registry import avro_data, json_schema_data, protobuf_data
from connectors.kafka_connect.registry.wire import split_message_indexes

AVRO = {"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": {"type": "int", "connect.type": "int16"}},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
    {"name": "digest", "type": {"type": "fixed", "name": "Digest", "size": 2}},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    {"name": "counts", "type": {"type": "map", "values": "long"}},
    {"name": "either", "type": ["null", "string", "long"]},
    {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
        {"name": "sku", "type": "string"}, {"name": "note", "type": ["null", "string"], "default": None}]}}},
]}


def test_avro_types_map_to_connect_as_confluents_avro_data_does():
    schema = avro_data.parse(json.dumps(AVRO))
    connect = schema.connect
    kinds = {f.name: (f.schema.type, f.schema.name, f.schema.optional) for f in connect.fields}
    assert connect.name == "shop.Order" and schema.record_name == "shop.Order"
    assert kinds["id"] == ("INT16", None, False) and kinds["status"] == ("STRING", "shop.Status", False)
    assert connect.field("status").schema.parameter(avro_data.ENUM) == "shop.Status"
    assert kinds["digest"][0] == "BYTES" and kinds["price"] == ("BYTES", DECIMAL, False)
    assert kinds["counts"][0] == "MAP" and kinds["either"] == ("STRUCT", avro_data.UNION, True)
    line = connect.field("lines").schema.value_schema
    assert line.name == "shop.Line" and line.field("note").schema.optional

    out = io.BytesIO()
    schemaless_writer(out, parse_schema(AVRO), {
        "id": 7, "status": "PAID", "digest": b"\x01\x02", "price": Decimal("3.50"), "counts": {"a": 1},
        "either": 42, "lines": [{"sku": "x", "note": "y"}]})
    value = avro_data.decode(schema, memoryview(out.getvalue()))
    assert value.get("id") == 7 and value.get("status") == "PAID" and value.get("price") == Decimal("3.50")
    assert value.get("either").get("long") == 42 and value.get("either").get("string") is None
    assert value.get("lines")[0].get("note") == "y"


def test_a_recursive_avro_record_is_refused_by_name():
    recursive = {"type": "record", "name": "Node", "fields": [{"name": "next", "type": ["null", "Node"]}]}
    with pytest.raises(ConversionError, match="record Node refers to itself"):
        avro_data.parse(json.dumps(recursive))


CONNECT = Schema("STRUCT", name="shop.Order", fields=(
    Field("id", Schema("INT64")), Field("note", Schema("STRING", optional=True)),
    Field("day", Schema("INT32", name=DATE)), Field("at", Schema("INT64", name=TIMESTAMP)),
    Field("tags", Schema("ARRAY", value_schema=Schema("STRING"))),
    Field("counts", Schema("MAP", key_schema=Schema("STRING"), value_schema=Schema("INT32"))),
    Field("blob", Schema("BYTES")),
))
VALUE = Struct(CONNECT, {"id": 5, "note": None, "day": dt.date(2026, 11, 24),
                         "at": dt.datetime(2026, 11, 24, 1, 2, 3, tzinfo=dt.timezone.utc), "tags": ["a"],
                         "counts": {"x": 1}, "blob": b"\x00\xff"})


def _same(connect: Schema, value: Struct) -> None:
    assert [f.name for f in connect.fields] == [f.name for f in CONNECT.fields]
    assert {f.name: value.get(f.name) for f in CONNECT.fields} == VALUE.values


def test_a_connect_struct_written_as_avro_reads_back_the_same():
    writer = avro_data.from_connect_schema(CONNECT)
    reader = avro_data.parse(writer.text)
    assert reader.connect.field("day").schema.name == DATE and reader.connect.field("note").schema.optional
    _same(reader.connect, avro_data.decode(reader, memoryview(avro_data.encode(writer, VALUE))))
    decimal_writer = avro_data.from_connect_schema(Schema("STRUCT", fields=(Field("p", decimal_schema(2)),)))
    assert json.loads(decimal_writer.text)["name"] == "ConnectDefault"


def test_a_connect_struct_written_as_json_schema_reads_back_the_same():
    writer = json_schema_data.from_connect_schema(CONNECT)
    reader = json_schema_data.parse(writer.text)
    assert json.loads(writer.text)["required"] == ["id", "day", "at", "tags", "counts", "blob"]
    _same(reader.connect, json_schema_data.decode(reader, memoryview(json_schema_data.encode(writer, VALUE))))


def test_a_connect_struct_written_as_protobuf_reads_back_the_same():
    writer = protobuf_data.from_connect_schema(CONNECT)
    reader = protobuf_data.parse(writer.text, "default.proto", [])
    indexes, message = split_message_indexes(memoryview(b"\x00" + protobuf_data.encode(writer, VALUE)))
    connect, value = protobuf_data.decode(reader, indexes, message, {})
    _same(connect, value)
    wrapped = protobuf_data.from_connect_schema(Schema("BYTES"))
    assert wrapped.wrapped and protobuf_data.encode(wrapped, b"raw") == b"\x0a\x03raw"


def test_a_flat_record_skips_the_walk_and_gives_the_same_value():
    flat = {"type": "record", "name": "Payment", "fields": [
        {"name": "id", "type": "long"}, {"name": "memo", "type": ["null", "string"]},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
        {"name": "tags", "type": {"type": "array", "items": "string"}}]}
    micros = {**flat, "fields": [{"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}}]}
    schema, kept = avro_data.parse(json.dumps(flat)), avro_data.parse(json.dumps(micros))
    assert schema.flat and not kept.flat and not avro_data.parse(json.dumps(AVRO)).flat
    out = io.BytesIO()
    schemaless_writer(out, parse_schema(flat), {"id": 1, "memo": None, "amount": Decimal("1.25"), "tags": ["x"]})
    fast = avro_data.decode(schema, memoryview(out.getvalue()))
    assert fast == avro_data.to_connect_value(schema.connect, dict(fast.values))
    assert fast.values == {"id": 1, "memo": None, "amount": Decimal("1.25"), "tags": ["x"]}
