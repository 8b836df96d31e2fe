"""eventq for PySpark pipelines (docs/architecture.md, "Spark"). Needs the ``spark`` extra.

- ``enqueue(df, name=..., key_columns=[...], ttr_ms=..., ttl_ms=..., ...)``: every row
  becomes an add (or schedule) command in ``eventq.commands``, exactly as the gateway
  would write it; rows that would be refused are counted and written to a reject output.
  With ``after_column=`` (upstream ids) or ``after_keys_column=`` (upstream keys) the
  rows are a DAG (docs/workflows.md, "Dependencies").
- ``read_jobs(spark, bootstrap, topic)`` / ``snapshot(spark, ...)``: the live jobs of
  ``eventq.jobs`` as a DataFrame (and parquet), ``dataframe_digest(df)`` their state
  digest (equal to ``inspect digest``), ``dag_edges(jobs)`` one row per upstream of
  each dependent with the upstream's latest outcome; ``read_recurrences(spark,
  bootstrap, topic)`` the live recurring jobs (``snapshot(recurrences_output=...)``
  writes them).
- ``compute_stats(spark, ...)``: per queue, jobs by state and qless-style wait/run time
  histograms from the command log; jobs per tag, FAILED jobs per failure group, and
  per recurrence its slots fired and next due time.
- ``spark_session(SparkOptions(...))``: a local (or cluster) session with the Kafka
  connector jars that ``make deps`` fetched; ``eventq spark ...`` is the CLI.

Importing this package does not import pyspark; the row functions Spark runs on its
executors are pure: ``eventq.spark.enqueue_rows`` (rows -> commands),
``eventq.spark.state_rows`` (the state log's jobs, edges, digest and recurrences),
``eventq.spark.rows`` (the command log's fold), over ``eventq.spark.arrow``'s batches.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "enqueue": ("eventq.spark.bulk", "enqueue"),
    "EnqueueReport": ("eventq.spark.bulk", "EnqueueReport"),
    "read_jobs": ("eventq.spark.statelog", "read_jobs"),
    "read_recurrences": ("eventq.spark.statelog", "read_recurrences"),
    "snapshot": ("eventq.spark.statelog", "snapshot"),
    "dataframe_digest": ("eventq.spark.statelog", "dataframe_digest"),
    "dag_edges": ("eventq.spark.statelog", "edges"),
    "SnapshotReport": ("eventq.spark.statelog", "SnapshotReport"),
    "compute_stats": ("eventq.spark.stats", "compute"),
    "format_stats": ("eventq.spark.stats", "format_table"),
    "Stats": ("eventq.spark.stats", "Stats"),
    "spark_session": ("eventq.spark.session", "spark_session"),
    "SparkOptions": ("eventq.spark.session", "SparkOptions"),
    "SparkSetupError": ("eventq.spark.session", "SparkSetupError"),
    "derive_job_id": ("eventq.spark.ids", "derive_job_id"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    try:
        module, attribute = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module 'eventq.spark' has no attribute {name!r}") from None
    import importlib

    return getattr(importlib.import_module(module), attribute)
