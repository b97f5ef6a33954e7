"""An example transform from outside kafka-pubsub-bridge, as a Kafka Connect user writes a custom SMT: a bridges file
names it by its class name, `transforms.<alias>.type=com.example.connect.Uppercase$Value`, with its own keys.

It upper-cases the text of a record's value (or key), or of one field of it (`field`), and leaves other values as
they are. Installed beside the bridge, its entry point in the group `kafka_pubsub_bridge.transforms` makes the class
known; its keys are validated when the bridges file loads, like Kafka's own transforms'.
"""

from __future__ import annotations

from pydantic import Field

from connectors.kafka_connect.data import Struct
from connectors.transforms.classes import TransformClass, TransformConfig
from connectors.transforms.record import ConnectRecord, TransformError
from connectors.transforms.sides import Side


class UppercaseKeys(TransformConfig):
    field: str | None = Field(None, alias="field",
                              description="the field to upper-case (none: the whole key or value, when it is text)")


class Uppercase:
    def __init__(self, keys: UppercaseKeys, side: Side):
        self.field = keys.field
        self.side = side

    def apply(self, record: ConnectRecord) -> ConnectRecord:
        value = self.side.value(record)
        if self.field is None:
            return self.side.updated(record, self.side.schema(record), _upper(value))
        if isinstance(value, dict):
            return self.side.updated(record, None, {**value, self.field: _upper(value.get(self.field))})
        if isinstance(value, Struct):
            return self.side.updated(record, value.schema, Struct(value.schema, {
                **value.values, self.field: _upper(value.get(self.field))}))
        if value is None:
            return record
        raise TransformError(f"field {self.field!r}: the {self.side.name} is not a struct or a map")


def _upper(value):
    return value.upper() if isinstance(value, str) else value


TRANSFORM = TransformClass("com.example.connect.Uppercase", UppercaseKeys, Uppercase,
                           "upper-cases a text key or value, or one field of it", sides=True)
