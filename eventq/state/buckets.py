"""A fixed-bucket histogram that costs no allocation to update (pure).

For the hot paths (a gateway request, a processor record): ``observe`` is one bisect
and two additions on preallocated lists. prometheus_client's own Histogram takes a lock
and walks its buckets per observation; these are read only when scraped.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Sequence


class Histogram:
    """Counts of values per bucket; ``bounds`` are the buckets' inclusive upper bounds
    (Prometheus ``le``), ascending; one more bucket holds everything above the last."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: Sequence[float]) -> None:
        if list(bounds) != sorted(set(bounds)):
            raise ValueError("bounds must be ascending and distinct")
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)
        self.total = 0.0  # the sum of the observed values

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[float, int]]:
        """[(le, count of values <= le)], the last le being +inf (Prometheus' form)."""
        running, out = 0, []
        for bound, count in zip((*self.bounds, float("inf")), self.counts):
            running += count
            out.append((bound, running))
        return out


# Seconds: a request answered from memory takes ~0.1 ms, a write to Kafka ~2-5 ms, a
# blocking lease up to its timeout.
REQUEST_SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                   1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# Commands per record of the command log: 1 (interactive) up to a full batch.
BATCH_COMMANDS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000)
