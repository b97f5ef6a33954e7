"""One logical record, written by confluent-kafka's own serializers (Avro, Protobuf, JSON Schema) and as a
JsonConverter envelope, for tests that compare what each converter path makes of it."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message_factory import GetMessageClass
from google.protobuf import timestamp_pb2  # noqa: F401  (its file goes into the pool below)
from google.type import date_pb2  # noqa: F401

from connectors.kafka_connect.data import DATE, TIMESTAMP

DAY = dt.date(2026, 11, 24)
AT = dt.datetime(2026, 11, 24, 1, 2, 3, 456000, tzinfo=dt.timezone.utc)
BODY = b"\x00body\xff"


def registry() -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": os.environ["SCHEMA_REGISTRY_URL"]})


def record_values(i: int) -> dict:
    return {"id": i, "name": f"order-{i}", "day": DAY, "at": AT, "tags": ["a", f"t{i}"], "note": None,
            "cps_message_body": BODY}


def json_envelope(i: int) -> bytes:
    """The same record as a JsonConverter (schemas.enable) envelope."""
    fields = [
        {"field": "id", "type": "int64", "optional": False},
        {"field": "name", "type": "string", "optional": False},
        {"field": "day", "type": "int32", "name": DATE, "optional": False},
        {"field": "at", "type": "int64", "name": TIMESTAMP, "optional": False},
        {"field": "tags", "type": "array", "items": {"type": "string"}, "optional": False},
        {"field": "note", "type": "string", "optional": True},
        {"field": "cps_message_body", "type": "bytes", "optional": False},
    ]
    payload = {"id": i, "name": f"order-{i}", "day": (DAY - dt.date(1970, 1, 1)).days,
               "at": int(AT.timestamp() * 1000), "tags": ["a", f"t{i}"], "note": None,
               "cps_message_body": base64.b64encode(BODY).decode()}
    return json.dumps({"schema": {"type": "struct", "name": "shop.Order", "fields": fields},
                       "payload": payload}).encode()


AVRO_SCHEMA = json.dumps({"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": "string"},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "note", "type": ["null", "string"], "default": None},
    {"name": "cps_message_body", "type": "bytes"}]})

JSON_SCHEMA = json.dumps({"type": "object", "title": "shop.Order", "properties": {
    "id": {"type": "integer"}, "name": {"type": "string"},
    "day": {"type": "integer", "title": DATE, "connect.type": "int32"},
    "at": {"type": "integer", "title": TIMESTAMP, "connect.type": "int64"},
    "tags": {"type": "array", "items": {"type": "string"}},
    "note": {"oneOf": [{"type": "null"}, {"type": "string"}]},
    "cps_message_body": {"type": "string", "connect.type": "bytes"}},
    "required": ["id", "name", "day", "at", "tags", "cps_message_body"]})


def protobuf_order_class():
    fdp = descriptor_pb2.FileDescriptorProto(name="shop/order.proto", package="shop", syntax="proto3",
                                             dependency=["google/protobuf/timestamp.proto", "google/type/date.proto"])
    message = fdp.message_type.add(name="Order")
    t = descriptor_pb2.FieldDescriptorProto
    for number, (name, kind, type_name) in enumerate([
            ("id", t.TYPE_INT64, None), ("name", t.TYPE_STRING, None), ("day", t.TYPE_MESSAGE, ".google.type.Date"),
            ("at", t.TYPE_MESSAGE, ".google.protobuf.Timestamp"), ("tags", t.TYPE_STRING, None),
            ("note", t.TYPE_STRING, None), ("cps_message_body", t.TYPE_BYTES, None)], start=1):
        field = message.field.add(name=name, number=number, type=kind,
                                  label=t.LABEL_REPEATED if name == "tags" else t.LABEL_OPTIONAL)
        if type_name:
            field.type_name = type_name
        if name == "note":  # proto3 `optional`: absent is null, as in the other formats
            field.proto3_optional = True
            field.oneof_index = 0
    message.oneof_decl.add(name="_note")
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    pool.AddSerializedFile(date_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(fdp)
    return GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def serialized(fmt: str, topic: str, i: int) -> bytes:
    """Record i as confluent-kafka's serializer for `fmt` writes it (registering under <topic>-value)."""
    ctx = SerializationContext(topic, MessageField.VALUE)
    values = record_values(i)
    if fmt == "avro":
        return AvroSerializer(registry(), AVRO_SCHEMA)(values, ctx)
    if fmt == "json":
        doc = {**values, "day": (DAY - dt.date(1970, 1, 1)).days, "at": int(AT.timestamp() * 1000),
               "cps_message_body": base64.b64encode(BODY).decode()}
        return JSONSerializer(JSON_SCHEMA, registry())(doc, ctx)
    order_class = protobuf_order_class()
    message = order_class(id=i, name=f"order-{i}", tags=values["tags"], cps_message_body=BODY)
    message.day.year, message.day.month, message.day.day = DAY.year, DAY.month, DAY.day
    message.at.FromDatetime(AT)
    return ProtobufSerializer(order_class, registry(), {"use.deprecated.format": False})(message, ctx)


CONVERTERS = {"avro": "io.confluent.connect.avro.AvroConverter",
              "protobuf": "io.confluent.connect.protobuf.ProtobufConverter",
              "json": "io.confluent.connect.json.JsonSchemaConverter"}
