import pytest
from confluent_kafka import KafkaException, TopicPartition

from connectors.kafka.admin import _listed_offset, _retriable, share_budget
from connectors.kafka_connect.java_text import java_double_to_string, java_float_to_string


def test_budget_is_shared_fairly_and_leftovers_go_to_bigger_partitions():
    lags = {("t", 0): 10, ("t", 1): 1000, ("t", 2): 1000, ("t", 3): 0}
    shares = share_budget(lags, 300)
    assert shares == {("t", 0): 10, ("t", 1): 145, ("t", 2): 145, ("t", 3): 0}
    assert share_budget(lags, 10_000) == lags
    assert sum(share_budget({("t", p): 5 for p in range(10)}, 3).values()) == 3


def test_java_number_text():
    cases = {1.0: "1.0", 100.0: "100.0", 1e7: "1.0E7", 1e-3: "0.001", 1.5e-5: "1.5E-5",
             12345678.9: "1.23456789E7", -0.0: "-0.0", float("nan"): "NaN", float("-inf"): "-Infinity"}
    for value, text in cases.items():
        assert java_double_to_string(value) == text
    assert java_float_to_string(0.1) == "0.1"


def test_a_listed_offset_of_none_is_retried_not_taken():
    tp = TopicPartition("t", 1)
    assert _listed_offset(tp, 0) == 0 and _listed_offset(tp, 42) == 42
    with pytest.raises(KafkaException) as raised:
        _listed_offset(tp, -1001)  # what librdkafka answered for every partition right after a broker restart
    assert _retriable(raised.value)
    assert "t[1]" in raised.value.args[0].str()
