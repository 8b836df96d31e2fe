"""Histogram buckets of durations with qless's resolutions (pure).

qless keeps its wait and run histograms "at the second resolution for the first minute,
the minute resolution for the first hour, the 15-minute resolution for the first day,
the hour resolution for the first 3 days, and then at the day resolution from there on
out". A bucket is named by its lower bound and width in seconds:

    [0s, 1s) ... [59s, 60s)          60 buckets of 1 s       labels 0s ... 59s
    [1m, 2m) ... [59m, 60m)          59 buckets of 1 min     labels 1m ... 59m
    [1h, 1h15m) ... [23h45m, 24h)    92 buckets of 15 min    labels 1h00m ... 23h45m
    [24h, 25h) ... [71h, 72h)        48 buckets of 1 h       labels 24h ... 71h
    [3d, 4d) ...                     1 day each, unbounded   labels 3d, 4d, ...

``bucket_columns`` (eventq/spark/histogram.py) is the same rule as a Spark SQL
expression (so histograms are counted in Spark); a test checks both agree.
"""

from __future__ import annotations

MINUTE_S = 60
HOUR_S = 3600
DAY_S = 86_400

# (durations below this many seconds, have buckets this many seconds wide)
RESOLUTIONS: tuple[tuple[int | None, int], ...] = (
    (MINUTE_S, 1),
    (HOUR_S, MINUTE_S),
    (DAY_S, 15 * MINUTE_S),
    (3 * DAY_S, HOUR_S),
    (None, DAY_S),
)


def bucket_of(duration_ms: int) -> tuple[int, int]:
    """(lower bound, width) in seconds of the bucket holding ``duration_ms``.

    Negative durations (a broker clock stepping back) count as 0.
    """
    seconds = max(duration_ms, 0) // 1000
    for below, width in RESOLUTIONS:
        if below is None or seconds < below:
            return seconds - seconds % width, width
    raise AssertionError("unreachable")


def label(lower_s: int, width_s: int) -> str:
    """A bucket's short name: ``12s``, ``5m``, ``1h15m``, ``26h``, ``4d``."""
    if width_s == 1:
        return f"{lower_s}s"
    if width_s == MINUTE_S:
        return f"{lower_s // MINUTE_S}m"
    if width_s == 15 * MINUTE_S:
        return f"{lower_s // HOUR_S}h{lower_s % HOUR_S // MINUTE_S:02d}m"
    if width_s == HOUR_S:
        return f"{lower_s // HOUR_S}h"
    return f"{lower_s // DAY_S}d"

