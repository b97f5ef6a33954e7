"""Kafka partition schemes of the reference source, with Java's hashes so placement matches.

Written by hand because the placement must equal Java's String.hashCode and Arrays.hashCode(byte[]),
which no Python library provides.
"""

from __future__ import annotations


def _to_int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def java_string_hash(text: str) -> int:
    """java.lang.String.hashCode: s[0]*31^(n-1) + ... over UTF-16 code units, in 32-bit arithmetic."""
    h = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & 0xFFFFFFFF
    return _to_int32(h)


def java_bytes_hash(data: bytes) -> int:
    """java.util.Arrays.hashCode(byte[]): 31*h + b over signed bytes, starting at 1."""
    h = 1
    for b in data:
        h = (31 * h + (b - 256 if b > 127 else b)) & 0xFFFFFFFF
    return _to_int32(h)


def partition_for_hash(h: int, count: int) -> int:
    """abs(hash) mod count. Java's Math.abs(Integer.MIN_VALUE) stays negative and the reference then
    picks a negative partition; Python's abs does not overflow, so ours is always in range."""
    return abs(h) % count


class Partitioner:
    """Picks the Kafka partition for each record, per kafka.partition.scheme.

    None means "leave it to the producer's partitioner" (kafka_partitioner), which is configured as
    murmur2 like Java producers, so keyed records land where a Java producer would put them.
    """

    def __init__(self, scheme: str, count: int, start: int = 0):
        self.scheme = scheme
        self.count = count
        self._next = start

    def _round_robin(self) -> int:
        partition = self._next % self.count
        self._next += 1
        return partition

    def partition(self, key: str | None, data: bytes, ordering_key: str) -> int | None:
        if self.scheme == "round_robin":
            return self._round_robin()
        if self.scheme == "hash_key":
            return 0 if key is None else partition_for_hash(java_string_hash(key), self.count)
        if self.scheme == "hash_value":
            return partition_for_hash(java_bytes_hash(data), self.count)
        if self.scheme == "ordering_key":
            if not ordering_key:
                return self._round_robin()
            return partition_for_hash(java_string_hash(ordering_key), self.count)
        return None  # kafka_partitioner
