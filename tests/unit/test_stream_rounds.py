"""How an always-on stream's task gathers a long round (the archive's: a round is a file), without Kafka: the
consumer, the lease and the clock are stand-ins, the round logic is stream_task's own."""

from __future__ import annotations

from concurrent.futures import Future

from connectors.kafka.range_reader import ReaderSettings
from connectors.framework.stream_task import StreamSettings, _Stream


class _Message:
    def __init__(self, offset: int):
        self._offset = offset

    def error(self):
        return None

    def offset(self) -> int:
        return self._offset


class _Consumer:
    """One record per call, after the call's timeout has passed on the test's clock."""

    def __init__(self, clock: list[float]):
        self.clock, self.next_offset = clock, 0

    def consume(self, num_messages: int, timeout: float) -> list:
        self.clock[0] += timeout
        self.next_offset += 1
        return [_Message(self.next_offset - 1)]


class _Lease:
    def __init__(self, holds_for_calls: int = 10**9):
        self.calls, self.holds_for_calls = 0, holds_for_calls

    def holds(self) -> bool:
        self.calls += 1
        return self.calls <= self.holds_for_calls


def _stream(monkeypatch, linger_s: float) -> tuple[_Stream, list[float], list[dict]]:
    clock = [0.0]
    monkeypatch.setattr("connectors.framework.stream_task.time.monotonic", lambda: clock[0])
    stream = object.__new__(_Stream)  # no consumer of Kafka's: the round logic only
    stream.settings = StreamSettings(ReaderSettings({}, "k:9092", 30), "connect-b", "s1", linger_s, ("t", 0))
    stream.consumer = _Consumer(clock)
    stream.positions, stream.committed = {("t", 0): 0}, {("t", 0): 0}
    stream.in_flight = None
    commits: list[dict] = []
    stream._commit = lambda: (commits.append(dict(stream.positions)), stream.committed.update(stream.positions))
    return stream, clock, commits


def _delivered(ends: dict) -> tuple[Future, dict]:
    done: Future = Future()
    done.set_result([])  # acknowledged: no summary rows to count
    return done, ends


def test_a_long_round_commits_the_acknowledged_round_before_it_while_it_gathers(monkeypatch):
    stream, clock, commits = _stream(monkeypatch, linger_s=5.0)
    stream.in_flight = _delivered({("t", 0): 40})
    messages = stream._gather_round(_Lease())
    assert clock[0] >= 5.0 and len(messages) > 1  # it gathered for the whole linger, in steps
    assert commits == [{("t", 0): 40}]  # at its first step, not once the round had gathered
    assert stream.in_flight is None


def test_a_long_round_stops_gathering_when_the_lease_ends(monkeypatch):
    stream, clock, _ = _stream(monkeypatch, linger_s=30.0)
    messages = stream._gather_round(_Lease(holds_for_calls=2))
    assert clock[0] < 5.0 and len(messages) == 4  # the first record, then three steps of a second


def test_a_short_round_is_one_call_after_its_first_record(monkeypatch):
    stream, clock, commits = _stream(monkeypatch, linger_s=0.05)
    stream.in_flight = _delivered({("t", 0): 40})
    lease = _Lease()
    assert len(stream._gather_round(lease)) == 2
    assert lease.calls == 0 and commits == []  # the hot path looks at neither the lease nor the round in flight
