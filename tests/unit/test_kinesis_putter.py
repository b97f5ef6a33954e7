"""PutRecords within the service limits, and records Kinesis refuses for a while sent again (a scripted client:
moto never refuses a record)."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from connectors.kinesis_sink.config import MAX_BYTES_PER_REQUEST, MAX_RECORDS_PER_REQUEST
from connectors.kinesis_sink.write import (
    SHARD_LIST_KEPT_S, KinesisPutter, KinesisRefused, kept_shard_hash_keys,
)


class ScriptedKinesis:
    def __init__(self, refuse=lambda data, attempt: None, request_error: str | None = None):
        self.requests: list[list[bytes]] = []
        self.accepted: list[bytes] = []
        self.attempts: dict[bytes, int] = {}
        self._refuse, self._request_error = refuse, request_error

    def put_records(self, StreamName, Records):
        if self._request_error:
            raise ClientError({"Error": {"Code": self._request_error, "Message": "no"}}, "PutRecords")
        self.requests.append([r["Data"] for r in Records])
        results = []
        for record in Records:
            attempt = self.attempts[record["Data"]] = self.attempts.get(record["Data"], 0) + 1
            code = self._refuse(record["Data"], attempt)
            if code:
                results.append({"ErrorCode": code, "ErrorMessage": "slow down"})
            else:
                self.accepted.append(record["Data"])
                results.append({"SequenceNumber": "1", "ShardId": "shardId-0"})
        return {"FailedRecordCount": sum(1 for r in results if "ErrorCode" in r), "Records": results}


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def putter(client, delivered, clock=None, timeout_s=60.0):
    clock = clock or Clock()
    return KinesisPutter(client, "s", MAX_RECORDS_PER_REQUEST, MAX_BYTES_PER_REQUEST, timeout_s, delivered.append,
                         clock, clock.sleep)


def test_requests_hold_at_most_500_records_and_5_mib():
    client, delivered = ScriptedKinesis(), []
    p = putter(client, delivered)
    for i in range(1200):
        p.add(f"r{i}".encode(), "k", i)
    big = b"x" * (1024 * 1024 - 1)
    for i in range(9):
        p.add(big + bytes([i]), "k", 1200 + i)
    p.close()
    assert [len(r) for r in client.requests] == [500, 500, 204, 4, 1]  # 4 records of 1 MiB fill 5 MiB
    assert sorted(delivered) == list(range(1209))


def test_refused_records_are_sent_again_and_all_arrive():
    refuse = lambda data, attempt: "ProvisionedThroughputExceededException" if data in (b"r3", b"r7") and attempt < 3 else None  # noqa: E731
    client, delivered, clock = ScriptedKinesis(refuse), [], Clock()
    p = putter(client, delivered, clock)
    for i in range(10):
        p.add(f"r{i}".encode(), "k", i)
    p.close()
    assert sorted(delivered) == list(range(10)) and client.attempts[b"r3"] == 3 and clock.now > 0  # backed off


def test_records_refused_past_the_timeout_fail_the_task_naming_them():
    client, delivered = ScriptedKinesis(lambda data, attempt: "InternalFailure" if data == b"r1" else None), []
    p = putter(client, delivered, timeout_s=5)
    for i in range(3):
        p.add(f"r{i}".encode(), "k", i)
    with pytest.raises(KinesisRefused, match="kept refusing 1 records for 5 s .InternalFailure") as error:
        p.close()
    assert error.value.origins == [1] and sorted(delivered) == [0, 2]


def test_a_stream_that_does_not_exist_fails_at_once():
    client, delivered = ScriptedKinesis(request_error="ResourceNotFoundException"), []
    p = putter(client, delivered)
    p.add(b"r", "k", 0)
    with pytest.raises(KinesisRefused, match="ResourceNotFoundException"):
        p.close()


class _ShardLister:
    """Answers ListShards with two open shards and a closed one; counts the calls."""

    def __init__(self):
        self.calls = 0

    def list_shards(self, **kwargs):
        self.calls += 1
        shards = [{"HashKeyRange": {"StartingHashKey": "170"}, "SequenceNumberRange": {}},
                  {"HashKeyRange": {"StartingHashKey": "0"}, "SequenceNumberRange": {"EndingSequenceNumber": "9"}},
                  {"HashKeyRange": {"StartingHashKey": "0"}, "SequenceNumberRange": {}}]
        return {"Shards": shards}


def test_a_streams_shard_list_is_asked_again_only_after_it_is_kept_long_enough():
    client, now = _ShardLister(), [100.0]
    assert kept_shard_hash_keys(client, "s", lambda: now[0]) == ["0", "170"]
    now[0] += SHARD_LIST_KEPT_S - 1
    assert kept_shard_hash_keys(client, "s", lambda: now[0]) == ["0", "170"] and client.calls == 1
    assert kept_shard_hash_keys(client, "other", lambda: now[0]) and client.calls == 2
    now[0] += 2
    kept_shard_hash_keys(client, "s", lambda: now[0])
    assert client.calls == 3
