"""Kafka not answering, as the one line `Unreachable` (connectors/kafka/outages.py): a client's error, and an admin
call whose retries ran out on one."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from google.api_core.exceptions import RetryError

from connectors.kafka.outages import kafka_outages_named
from connectors.outage import Unreachable

TIMED_OUT = KafkaException(KafkaError(KafkaError._TIMED_OUT, "Failed to get committed offsets: Local: Timed out"))


def test_a_timeout_and_retries_that_ran_out_on_one_are_one_line_naming_kafka():
    for raised in (TIMED_OUT, RetryError("Timeout of 30.0s exceeded", TIMED_OUT)):
        with pytest.raises(Unreachable) as caught, kafka_outages_named("127.0.0.1:9092", "reading the progress of b"):
            raise raised
        assert str(caught.value) == ("Kafka at 127.0.0.1:9092 did not answer while reading the progress of b: Failed "
                                     "to get committed offsets: Local: Timed out; the run recorded nothing")


def test_other_errors_go_through_as_they_are():
    refused = KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "not allowed"))
    for raised in (refused, RetryError("Timeout of 30.0s exceeded", refused), RetryError("other", ValueError("x"))):
        with pytest.raises(type(raised)), kafka_outages_named("127.0.0.1:9092", "reading"):
            raise raised
