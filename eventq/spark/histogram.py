"""The histogram buckets of eventq/core/histogram.py as a Spark SQL expression.

The rule (qless's resolutions) is the core's ``RESOLUTIONS``; this is the same rule
written with Spark columns, so histograms are counted in Spark; a test checks both
agree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eventq.core.histogram import DAY_S, HOUR_S, MINUTE_S, RESOLUTIONS

if TYPE_CHECKING:
    from pyspark.sql import Column


def bucket_columns(duration_ms_column: str) -> tuple[Column, Column, Column]:
    """Spark columns ``(lower_s, width_s, label)`` of the bucket of a duration column."""
    from pyspark.sql import functions as F

    seconds = F.floor(F.greatest(F.col(duration_ms_column), F.lit(0)) / 1000).cast("long")
    (first_below, first_step), *bounded = [
        (below, step) for below, step in RESOLUTIONS if below is not None]
    longest = next(step for below, step in RESOLUTIONS if below is None)
    width = F.when(seconds < first_below, F.lit(first_step))
    for below, step in bounded:
        width = width.when(seconds < below, F.lit(step))
    width = width.otherwise(F.lit(longest)).cast("long")
    lower = seconds - seconds % width

    def whole(column: Column, unit: int) -> Column:
        return (column / unit).cast("long").cast("string")

    text = (
        F.when(width == 1, F.concat(lower.cast("string"), F.lit("s")))
        .when(width == MINUTE_S, F.concat(whole(lower, MINUTE_S), F.lit("m")))
        .when(
            width == 15 * MINUTE_S,
            F.concat(
                whole(lower, HOUR_S),
                F.lit("h"),
                F.lpad(whole(lower % HOUR_S, MINUTE_S), 2, "0"),
                F.lit("m"),
            ),
        )
        .when(width == HOUR_S, F.concat(whole(lower, HOUR_S), F.lit("h")))
        .otherwise(F.concat(whole(lower, DAY_S), F.lit("d")))
    )
    return lower, width, text
