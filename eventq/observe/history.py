"""The last minutes of every queue, for the dashboard's charts (pure; time passed in).

Every ``SAMPLE_EVERY_S`` the web server records each queue's counts now (ready,
scheduled, leased) and its cumulative event counts (livestats); rates are differences
of consecutive samples. ``KEEP_SAMPLES`` samples: 15 minutes.

A queue new to the history starts from zero at the sample before: the
sampler names every queue the live statistics ever counted, so a queue absent from a
sample had no jobs and no events then. Without that baseline, jobs added and run
between two samples on a new queue (the first jobs after a start, say) were in its
first sample's totals, which has no rate, and the charts stayed flat at zero.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Callable, Sequence

SAMPLE_EVERY_S = 5.0
KEEP_SAMPLES = 180
GAUGES = ("ready", "scheduled", "leased")
RATES = ("added", "leased", "completed", "failed")  # per second


@dataclass(frozen=True, slots=True)
class Sample:
    at_s: float
    gauges: tuple[int, ...]  # as GAUGES
    totals: tuple[int, ...]  # cumulative events, as RATES


class History:
    def __init__(self, keep: int = KEEP_SAMPLES) -> None:
        self._keep = keep
        self.queues: dict[str, deque[Sample]] = {}
        self._last_at_s: float | None = None  # the previous record's time

    def record(self, at_s: float, queues: dict[str, tuple[tuple[int, ...], tuple[int, ...]]]) -> None:
        """``queues``: {name: (gauges, totals)} now. A queue absent from a sample keeps
        its older samples until they age out."""
        for name, (gauges, totals) in queues.items():
            samples = self.queues.get(name)
            if samples is None:
                samples = self.queues[name] = self._new_queue(len(gauges), len(totals))
            samples.append(Sample(at_s, tuple(gauges), tuple(totals)))
        self._last_at_s = at_s
        oldest = at_s - self._keep * SAMPLE_EVERY_S
        for name in [n for n, s in self.queues.items() if s[-1].at_s < oldest]:
            del self.queues[name]

    def _new_queue(self, gauges: int, totals: int) -> deque[Sample]:
        """A queue's samples, from zero at the previous record if there was one (see the
        module's docstring); the first record of all has no time before it to count from."""
        samples: deque[Sample] = deque(maxlen=self._keep)
        if self._last_at_s is not None:
            samples.append(Sample(self._last_at_s, (0,) * gauges, (0,) * totals))
        return samples

    def gauge_series(self, name: str | None) -> dict[str, list[tuple[float, float]]]:
        """{gauge: [(t, value)]} of a queue, or summed over all queues (None)."""
        return self._series(name, lambda s: s.gauges, GAUGES, rate=False)

    def rate_series(self, name: str | None) -> dict[str, list[tuple[float, float]]]:
        """{event: [(t, per second)]} between consecutive samples."""
        return self._series(name, lambda s: s.totals, RATES, rate=True)

    def latest_rates(self, name: str) -> dict[str, float]:
        series = self.rate_series(name)
        return {k: (points[-1][1] if points else 0.0) for k, points in series.items()}

    def _series(self, name: str | None, values_of: Callable[[Sample], Sequence[float]],
                keys: Sequence[str], rate: bool) -> dict[str, list[tuple[float, float]]]:
        if name is None:
            chosen = list(self.queues.values())
        else:
            chosen = [self.queues[name]] if name in self.queues else []
        summed: dict[float, list[float]] = {}
        for samples in chosen:
            previous = None
            for sample in samples:
                values: Sequence[float] = values_of(sample)
                if rate:
                    if previous is None or sample.at_s <= previous.at_s:
                        previous = sample
                        continue
                    span = sample.at_s - previous.at_s
                    values = [max(0, a - b) / span for a, b in zip(values, values_of(previous))]
                    previous = sample
                slot = summed.setdefault(round(sample.at_s, 1), [0.0] * len(keys))
                for i, value in enumerate(values):
                    slot[i] += value
        times = sorted(summed)
        return {key: [(t, summed[t][i]) for t in times] for i, key in enumerate(keys)}
