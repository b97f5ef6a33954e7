"""A histogram fed counts by bucket: a batch reports how many of its records fell in each bucket (thousands of
records, one report), which prometheus_client's Histogram cannot take (it observes one value at a time)."""

from __future__ import annotations

import threading
from typing import Iterator, Sequence

from prometheus_client.core import HistogramMetricFamily
from prometheus_client.registry import Collector


class BucketedHistogram(Collector):
    def __init__(self, name: str, documentation: str, labels: Sequence[str], upper_bounds_s: Sequence[float]):
        self._name, self._documentation, self._labels = name, documentation, tuple(labels)
        self._bounds = tuple(upper_bounds_s)  # the last bucket (+Inf) is implied
        self._series: dict[tuple[str, ...], tuple[list[int], float]] = {}
        self._lock = threading.Lock()

    def add(self, labels: Sequence[str], counts: Sequence[int], sum_s: float) -> None:
        """`counts`: one per bound and one past the last (not cumulative)."""
        if len(counts) != len(self._bounds) + 1:
            raise ValueError(f"{self._name}: {len(counts)} counts for {len(self._bounds) + 1} buckets")
        with self._lock:
            totals, total_sum = self._series.get(tuple(labels), ([0] * len(counts), 0.0))
            self._series[tuple(labels)] = ([a + b for a, b in zip(totals, counts)], total_sum + sum_s)

    def collect(self) -> Iterator[HistogramMetricFamily]:
        family = HistogramMetricFamily(self._name, self._documentation, labels=self._labels)
        with self._lock:
            for labels, (counts, sum_s) in self._series.items():
                cumulative, buckets = 0, []
                for bound, n in zip((*map(str, self._bounds), "+Inf"), counts):
                    cumulative += n
                    buckets.append((bound, cumulative))
                family.add_metric(list(labels), buckets, sum_s)
        yield family
