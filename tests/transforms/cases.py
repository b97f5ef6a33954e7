"""The records and chains of the transforms' differential test: every Kafka transform and predicate on schemaless
JSON, JSON with schemas (nested structs, optional fields, a timestamp), Avro as a registry converter reads it
(unions, an enum, logical types), tombstones, headers and nulls."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import io
import json
from typing import Any

import fastavro

T = "org.apache.kafka.connect.transforms."
P = "org.apache.kafka.connect.transforms.predicates."


def _field(field: str, type_name: str, optional: bool = False, **more) -> dict:
    return {"field": field, "type": type_name, "optional": optional, **more}


ADDRESS = {"type": "struct", "optional": True, "name": "Address",
           "fields": [_field("city", "string", True), _field("zip", "string", True)]}
ORDER = {"type": "struct", "optional": False, "name": "Order", "version": 3, "fields": [
    _field("id", "int64"), _field("customer", "string", True), _field("amount", "double"),
    _field("paid", "boolean", True), _field("email", "string", True), _field("count", "int32", True),
    {**ADDRESS, "field": "address"},
    _field("tags", "array", True, items={"type": "string", "optional": False}),
]}


def order(i: int, **changes) -> dict:
    payload = {"id": i, "customer": f"c{i}", "amount": 10.5 + i, "paid": i % 2 == 0, "email": f"u{i}@x.org",
               "count": i, "address": {"city": "Oslo", "zip": f"0{i}"}, "tags": ["a", "b"]}
    payload.update(changes)
    return payload


def record(value: Any, *, schema: dict | None = None, key: Any = None, key_schema: dict | None = None,
           topic: str = "orders", headers: list | None = None, timestamp: int | None = 1_700_000_000_123,
           offset: int = 7) -> dict:
    """A case record: key and value as JsonConverter writes them (with a schema: an envelope)."""
    def written(data, data_schema):
        if data is None:
            return None
        return json.dumps({"schema": data_schema, "payload": data} if data_schema else data)

    return {"topic": topic, "partition": 2, "offset": offset, "timestamp": timestamp,
            "key": written(key, key_schema), "value": written(value, schema),
            "key_schemas": key_schema is not None, "value_schemas": schema is not None, "headers": headers or []}


SCHEMALESS = [record(order(1), key="k1", headers=[["trace", "t1"]]),
              record({"id": 2, "nested": {"a": {"b": 5}}, "list": [1, 2]}, key="k2"),
              record(None, key="k3", headers=[["trace", "t3"]]),
              record("a plain string", key="k4"),
              record(order(5, email=None, count=None), key="k5", timestamp=None)]
WITH_SCHEMA = [record(order(1), schema=ORDER, key="k1", key_schema={"type": "string", "optional": False}),
               record(order(2, customer=None, address=None), schema=ORDER, headers=[["trace", "t2"]]),
               record(None, schema=ORDER, key="k3", key_schema={"type": "string", "optional": False}),
               record(order(4), schema=ORDER, topic="payments", timestamp=None)]


def _nullable(name: str, avro_type: Any) -> dict:
    return {"name": name, "type": ["null", avro_type], "default": None}


AVRO_ORDER = {"type": "record", "name": "Order", "namespace": "com.example", "fields": [
    {"name": "id", "type": "long"}, _nullable("customer", "string"), {"name": "amount", "type": "double"},
    _nullable("paid", "boolean"), _nullable("email", "string"), _nullable("count", "int"),
    _nullable("address", {"type": "record", "name": "Address", "fields": [
        _nullable("city", "string"), _nullable("zip", "string")]}),
    _nullable("tags", {"type": "array", "items": "string"}),
    # No default but null: Kafka Connect's AvroData carries a field's default into its Connect schema, ours does not
    # (docs/known-limitations.md).
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
    {"name": "placed", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    _nullable("total", {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}),
]}
_AVRO_ORDER_TEXT = json.dumps(AVRO_ORDER)


def avro_record(value: dict, **more) -> dict:
    """A case record whose value is an Avro datum's binary encoding, as a registry converter reads it (the registry's
    framing aside): both sides decode the same bytes with their own Avro reader and map them to Connect data."""
    data = io.BytesIO()
    fastavro.schemaless_writer(data, fastavro.parse_schema(AVRO_ORDER), value)
    return {**record(None, **more), "value_avro": {"schema": _AVRO_ORDER_TEXT,
                                                   "data": base64.b64encode(data.getvalue()).decode()}}


def avro_order(i: int, **changes) -> dict:
    return {**order(i), "status": "PAID" if i % 2 == 0 else "NEW", "placed": 1_700_000_000_000 + i,
            "day": dt.date(2023, 11, 14 + i), "total": decimal.Decimal(f"{i}2.34"), **changes}


AVRO = [avro_record(avro_order(1), key="k1", headers=[["trace", "t1"]]),
        avro_record(avro_order(2, customer=None, address=None, tags=None), topic="payments")]
ALL = SCHEMALESS + WITH_SCHEMA + AVRO


def chain(*stages: tuple[str, str, dict], predicates: tuple[tuple[str, str, dict], ...] = ()) -> dict:
    keys: dict[str, str] = {"transforms": ",".join(alias for alias, _, _ in stages)}
    for alias, class_name, own in stages:
        keys[f"transforms.{alias}.type"] = class_name
        keys.update({f"transforms.{alias}.{k}": v for k, v in own.items()})
    if predicates:
        keys["predicates"] = ",".join(alias for alias, _, _ in predicates)
        for alias, class_name, own in predicates:
            keys[f"predicates.{alias}.type"] = class_name
            keys.update({f"predicates.{alias}.{k}": v for k, v in own.items()})
    return keys


CASES: dict[str, tuple[dict, list]] = {
    "InsertHeader string": (chain(("h", T + "InsertHeader", {"header": "source", "value.literal": "kafka"})), ALL),
    "InsertHeader typed literals": (chain(
        ("a", T + "InsertHeader", {"header": "n", "value.literal": "42"}),
        ("b", T + "InsertHeader", {"header": "big", "value.literal": "70000"}),
        ("c", T + "InsertHeader", {"header": "flag", "value.literal": "true"}),
        ("d", T + "InsertHeader", {"header": "ratio", "value.literal": "2.5"})), SCHEMALESS[:1]),
    "DropHeaders": (chain(("d", T + "DropHeaders", {"headers": "trace,other"})), ALL),
    "HeaderFrom$Value copy": (chain(("h", T + "HeaderFrom$Value", {"fields": "id,customer", "headers": "oid,cust",
                                                                    "operation": "copy"})), ALL),
    "HeaderFrom$Value move": (chain(("h", T + "HeaderFrom$Value", {"fields": "email", "headers": "mail",
                                                                    "operation": "move"})), ALL),
    "Filter on tombstones": (chain(("f", T + "Filter", {"predicate": "tomb"}),
                                   predicates=(("tomb", P + "RecordIsTombstone", {}),)), ALL),
    "Filter unless a header": (chain(("f", T + "Filter", {"predicate": "traced", "negate": "true"}),
                                     predicates=(("traced", P + "HasHeaderKey", {"name": "trace"}),)), ALL),
    "Filter by topic": (chain(("f", T + "Filter", {"predicate": "pay"}),
                              predicates=(("pay", P + "TopicNameMatches", {"pattern": "pay.*"}),)), ALL),
    "RegexRouter": (chain(("r", T + "RegexRouter", {"regex": "(ord)(ers)", "replacement": "$2-$1-x"})), ALL),
    "TimestampRouter": (chain(("t", T + "TimestampRouter", {"topic.format": "${topic}_${timestamp}",
                                                            "timestamp.format": "yyyy-MM-dd'T'HH"})), ALL),
    "InsertField$Value": (chain(("i", T + "InsertField$Value", {
        "topic.field": "t!", "partition.field": "p", "offset.field": "o", "timestamp.field": "ts?",
        "static.field": "origin", "static.value": "kafka"})), ALL),
    "ReplaceField$Value": (chain(("r", T + "ReplaceField$Value", {"exclude": "email", "renames": "id:order_id,count:n"})),
                           ALL),
    "ReplaceField$Value include": (chain(("r", T + "ReplaceField$Value", {"include": "id,amount"})), ALL),
    "MaskField$Value": (chain(("m", T + "MaskField$Value", {"fields": "email,amount,paid,tags,count"})), ALL),
    "MaskField$Value replacement": (chain(("m", T + "MaskField$Value", {"fields": "email,customer",
                                                                         "replacement": "***"})), ALL),
    "ValueToKey": (chain(("v", T + "ValueToKey", {"fields": "id,customer"})), ALL),
    "ExtractField$Value": (chain(("e", T + "ExtractField$Value", {"field": "customer"})), ALL),
    "ExtractField$Value nested": (chain(("e", T + "ExtractField$Value", {"field": "address.city",
                                                                          "field.syntax.version": "V2"})),
                                  ALL + [record({"id": 1, "nested": {"a": {"b": 5}}}), ]),
    "ExtractField$Key": (chain(("e", T + "ExtractField$Key", {"field": "id"})),
                         [record(order(1), key={"id": 9, "x": 1}), record(None, key=None)]),
    "HoistField$Value": (chain(("h", T + "HoistField$Value", {"field": "wrapped"})), ALL),
    "HoistField$Key": (chain(("h", T + "HoistField$Key", {"field": "k"})), ALL),
    "SetSchemaMetadata$Value": (chain(("s", T + "SetSchemaMetadata$Value", {"schema.name": "com.example.Order",
                                                                              "schema.version": "7"})), ALL),
    "the issue's chain": (chain(("addSource", T + "InsertHeader", {"header": "source", "value.literal": "kafka"}),
                                ("dropTomb", T + "Filter", {"predicate": "isTomb"}),
                                predicates=(("isTomb", P + "RecordIsTombstone", {}),)), ALL),
    "three in a row": (chain(("v", T + "ValueToKey", {"fields": "id"}),
                             ("k", T + "ExtractField$Key", {"field": "id"}),
                             ("m", T + "MaskField$Value", {"fields": "email"})), ALL),
}

# Edge cases: literals, errors, unknown fields, partial topic matches, replacements of numbers.
CASES.update({
    "InsertHeader literal edges": (chain(*[(f"h{i}", T + "InsertHeader", {"header": f"h{i}", "value.literal": text})
                                           for i, text in enumerate(["-129", "3.0", "1e3", "0.1", "", "null",
                                                                     "9223372036854775808", " 7 ", "1.5e-3"])]),
                                   SCHEMALESS[:1]),
    "RegexRouter partial match": (chain(("r", T + "RegexRouter", {"regex": "ord", "replacement": "x"})), ALL),
    "RegexRouter named group": (chain(("r", T + "RegexRouter", {"regex": "(?<name>pay)ments",
                                                                "replacement": "${name}-\\$"})), ALL),
    "TopicNameMatches partial": (chain(("f", T + "Filter", {"predicate": "p"}),
                                       predicates=(("p", P + "TopicNameMatches", {"pattern": "pay"}),)), ALL),
    "ValueToKey missing field": (chain(("v", T + "ValueToKey", {"fields": "id,nope"})), ALL),
    "ExtractField$Value unknown": (chain(("e", T + "ExtractField$Value", {"field": "nope"})), ALL),
    "MaskField$Value number replacement": (chain(("m", T + "MaskField$Value", {"fields": "amount,id,count",
                                                                                "replacement": "12"})), ALL),
    "MaskField$Value bad replacement": (chain(("m", T + "MaskField$Value", {"fields": "paid",
                                                                             "replacement": "x"})), ALL),
    "MaskField$Value nested struct": (chain(("m", T + "MaskField$Value", {"fields": "address"})), ALL),
    "ReplaceField$Key": (chain(("r", T + "ReplaceField$Key", {"exclude": "x"})),
                         [record(order(1), key={"id": 9, "x": 1}), record(order(1), key="plain")]),
    "SetSchemaMetadata$Key": (chain(("s", T + "SetSchemaMetadata$Key", {"schema.name": "K"})), ALL),
    "HeaderFrom$Key": (chain(("h", T + "HeaderFrom$Key", {"fields": "id", "headers": "kid", "operation": "copy"})),
                       [record(order(1), key={"id": 9, "x": 1}), record(order(1), key=None)]),
    "InsertField$Key": (chain(("i", T + "InsertField$Key", {"topic.field": "t"})),
                        [record(order(1), key={"id": 9}), record(order(1), key=None), record(order(1), key="s")]),
    "HoistField then ExtractField": (chain(("h", T + "HoistField$Value", {"field": "w"}),
                                           ("e", T + "ExtractField$Value", {"field": "w"})), ALL),
    "negate with a header": (chain(("i", T + "InsertHeader", {"header": "x", "value.literal": "1",
                                                              "predicate": "traced", "negate": "false"}),
                                   predicates=(("traced", P + "HasHeaderKey", {"name": "trace"}),)), ALL),
})

EVENT = {"type": "struct", "optional": False, "name": "Event", "fields": [
    _field("at", "int64", name="org.apache.kafka.connect.data.Timestamp", version=1),
    _field("day", "int32", True, name="org.apache.kafka.connect.data.Date", version=1),
    _field("text", "string", True), _field("unix", "int64", True), _field("ratio", "float", True),
    _field("flag", "boolean", True), _field("small", "int8", True), _field("blob", "bytes", True),
    {"field": "inner", "type": "struct", "optional": True, "fields": [
        _field("x", "int32"), {"field": "deep", "type": "struct", "optional": False,
                               "fields": [_field("y", "string", True)]}]},
]}


def event(**changes) -> dict:
    payload = {"at": 1_700_000_000_123, "day": 19_675, "text": "2023-11-14 22:13:20", "unix": 1_700_000_000,
               "ratio": 2.5, "flag": True, "small": -5, "blob": "AAEC", "inner": {"x": 3, "deep": {"y": "z"}}}
    payload.update(changes)
    return payload


EVENTS = [record(event(), schema=EVENT), record(event(inner=None, text=None, day=None), schema=EVENT),
          record({"at": 1_700_000_000_123, "text": "2023-11-14 22:13:20", "n": "42", "f": 1.75, "b": True,
                  "nested": {"a": {"b": [1, 2]}, "c": None}}),
          record(None), record("12", key="k")]

CASES.update({
    "Cast$Value fields": (chain(("c", T + "Cast$Value", {"spec": "ratio:float64,flag:int8,small:string,unix:int32,"
                                                                 "at:string,blob:string,day:int32"})), EVENTS),
    "Cast$Value schemaless": (chain(("c", T + "Cast$Value", {"spec": "n:int32,f:int16,b:string,at:float32,"
                                                                     "missing:string"})), EVENTS),
    "Cast$Value to boolean": (chain(("c", T + "Cast$Value", {"spec": "n:boolean,f:boolean,small:boolean"})), EVENTS),
    "Cast$Value whole": (chain(("c", T + "Cast$Value", {"spec": "int64"})), EVENTS),
    "Cast$Key whole string": (chain(("c", T + "Cast$Key", {"spec": "string"})), ALL),
    "Cast bad spec": (chain(("c", T + "Cast$Value", {"spec": "a:array"})), EVENTS[:1]),
    "Flatten$Value": (chain(("f", T + "Flatten$Value", {"delimiter": "_"})), EVENTS + ALL),
    "TimestampConverter$Value to string": (chain(("t", T + "TimestampConverter$Value", {
        "field": "at", "target.type": "string", "format": "yyyy-MM-dd HH:mm:ss.SSS"})), EVENTS),
    "TimestampConverter$Value from string": (chain(("t", T + "TimestampConverter$Value", {
        "field": "text", "target.type": "Timestamp", "format": "yyyy-MM-dd HH:mm:ss"})), EVENTS),
    "TimestampConverter$Value unix seconds": (chain(("t", T + "TimestampConverter$Value", {
        "field": "unix", "target.type": "Date", "unix.precision": "seconds"})), EVENTS),
    "TimestampConverter$Value to unix micros": (chain(("t", T + "TimestampConverter$Value", {
        "field": "at", "target.type": "unix", "unix.precision": "microseconds"})), EVENTS),
    "TimestampConverter$Value date to Time": (chain(("t", T + "TimestampConverter$Value", {
        "field": "day", "target.type": "Time"})), EVENTS),
    "TimestampConverter$Key whole": (chain(("t", T + "TimestampConverter$Key", {
        "target.type": "Timestamp"})), [record(None, key=1_700_000_000_123), record(None, key="x")]),
    "TimestampConverter string without format": (chain(("t", T + "TimestampConverter$Value", {
        "field": "at", "target.type": "string"})), EVENTS[:1]),
})
