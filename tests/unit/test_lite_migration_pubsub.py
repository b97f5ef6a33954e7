"""The pure parts of a migration to Cloud Pub/Sub: Google's Lite -> Pub/Sub message mapping plus the migration's
attributes, the filter of a carried subscription, and the copy's position under out-of-order acknowledgements."""

from __future__ import annotations

import pytest
from google.cloud.pubsublite.cloudpubsub.message_transforms import decode_attribute_event_time
from google.cloud.pubsublite_v1 import SequencedMessage

from connectors.pubsublite_migration.pubsub_copy import _Acknowledged
from connectors.pubsublite_migration.pubsub_side import MessageRefused, acked_filter, pubsub_message


def sequenced(offset: int, key: bytes = b"k", attributes: dict | None = None, event_time: float | None = None):
    message = SequencedMessage.pb()()
    message.cursor.offset = offset
    message.message.key = key
    message.message.data = b"payload"
    for name, values in (attributes or {}).items():
        message.message.attributes[name].values.extend(values)
    if event_time is not None:
        message.message.event_time.FromMilliseconds(int(event_time * 1000))
    return message


def test_a_lite_message_becomes_the_pubsub_message_googles_mapping_makes():
    out = pubsub_message(sequenced(41, b"order-7", {"colour": [b"red"]}, event_time=1_700_000_000.25), 2,
                         ["reader"])
    assert out.data == b"payload" and out.ordering_key == "order-7"
    assert dict(out.attributes) == {
        "colour": "red", "x-goog-pubsublite-event-time": "1700000000,250000000", "lite.partition": "2",
        "lite.offset": "41", "lite.acked.reader": "true"}
    # The Lite client library reads the event time back as it wrote it.
    assert decode_attribute_event_time(out.attributes["x-goog-pubsublite-event-time"]).timestamp() == 1_700_000_000.25


def test_what_pubsub_cannot_carry_is_refused_naming_the_message():
    with pytest.raises(MessageRefused, match="partition 1 offset 5: attribute 'tags' has 2 values"):
        pubsub_message(sequenced(5, attributes={"tags": [b"a", b"b"]}), 1, [])
    with pytest.raises(MessageRefused, match="partition 0 offset 6: its key is not UTF-8"):
        pubsub_message(sequenced(6, key=b"\xff"), 0, [])
    with pytest.raises(MessageRefused, match="attribute 'blob' is not UTF-8"):
        pubsub_message(sequenced(7, attributes={"blob": [b"\xfe"]}), 0, [])


def test_a_carried_subscription_drops_what_its_lite_subscription_had_acknowledged():
    assert acked_filter("projects/p/locations/l/subscriptions/reader") == 'NOT attributes:"lite.acked.reader"'


def test_the_position_stops_at_the_first_message_not_acknowledged():
    acknowledged = _Acknowledged(start=10)
    for offset in (10, 11, 12, 15):  # 13 and 14 were dropped by Lite's retention: never sent
        acknowledged.add(offset)
    acknowledged.ack(11)
    acknowledged.ack(15)
    assert acknowledged.next == 10  # 10 is not acknowledged yet
    acknowledged.ack(10)
    assert acknowledged.next == 12
    acknowledged.ack(12)
    assert acknowledged.next == 16
