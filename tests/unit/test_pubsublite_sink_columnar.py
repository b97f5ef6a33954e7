"""The Lite sink's columnar conversion gives what the record-by-record rules give, row for row."""

import pytest

from connectors.errors import RecordError
from connectors.kafka.record import records_from_arrow
from connectors.pubsublite_sink.columnar import LiteColumnarConverter
from connectors.pubsublite_sink.config import PubSubLiteSinkConfig
from connectors.pubsublite_sink.convert import PubSubLiteSinkConverter
from tests.unit.kafka_rows import awkward_kafka_rows

STRING = "org.apache.kafka.connect.storage.StringConverter"
BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter"
LITE = {"topics": "t", "pubsublite.project": "p", "pubsublite.location": "europe-west1-b", "pubsublite.topic": "l"}


def _expected(converter: PubSubLiteSinkConverter, record):
    try:
        message = converter.convert(record)
    except RecordError as exc:
        return ("error", str(exc))
    return message.SerializeToString(deterministic=True), message.ByteSize()


@pytest.mark.parametrize("key_converter, value_converter", [(STRING, STRING), (BYTES, BYTES), (BYTES, STRING),
                                                            (STRING, BYTES)])
def test_columnar_conversion_matches_the_record_rules(key_converter, value_converter):
    config = PubSubLiteSinkConfig.model_validate({**LITE, "key.converter": key_converter,
                                                  "value.converter": value_converter})
    columnar = LiteColumnarConverter(config)
    assert columnar.kinds.columnar
    batch = awkward_kafka_rows()
    expected = [_expected(PubSubLiteSinkConverter(config), r) for r in records_from_arrow(batch)]
    got = []
    for row, outcome in columnar.convert(batch):
        assert row == len(got)
        if isinstance(outcome, RecordError):
            got.append(("error", str(outcome)))
        else:
            message, size = outcome
            got.append((message.SerializeToString(deterministic=True), size))
    assert got == expected
    # the data set has messages and, with a String converter, bad records
    assert any(e[0] == "error" for e in expected) == (STRING in (key_converter, value_converter))
    assert any(e[0] != "error" for e in expected)


def test_other_converters_take_the_record_path():
    config = PubSubLiteSinkConfig.model_validate({**LITE, "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                                                  "value.converter.schemas.enable": False})
    columnar = LiteColumnarConverter(config)
    assert not columnar.kinds.columnar
    outcomes = [type(o).__name__ for _, o in columnar.convert(awkward_kafka_rows().slice(0, 12))]
    # rows 0-3 have a null value (an empty message); 4-7 an empty one and 8-11 b"hello": neither is JSON
    assert outcomes == ["tuple"] * 4 + ["RecordError"] * 8
