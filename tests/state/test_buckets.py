"""Fixed-bucket histograms for metrics (eventq/state/buckets.py)."""

from __future__ import annotations

import pytest

from eventq.state.buckets import Histogram


def test_a_fixed_histogram_counts_values_at_or_below_each_bound():
    h = Histogram((1, 5, 10))
    for value in (0.5, 1, 1.5, 5, 7, 11, 1000):
        h.observe(value)
    assert h.cumulative() == [(1, 2), (5, 4), (10, 5), (float("inf"), 7)]
    assert h.count == 7 and h.total == pytest.approx(1026.0)
    with pytest.raises(ValueError):
        Histogram((5, 1))
