"""Snapshot: the current jobs of the state log as a DataFrame, and its state digest.

``eventq.jobs`` is read in batch from the earliest to the latest offset; per key the
newest record (highest offset within its partition) wins, tombstones and keys starting
with byte 0x00 (the processor's bookkeeping) are dropped, and every ``Job`` field is
decoded into a column (``state_rows.JOB_DDL``: ids as canonical text, times in epoch ms,
TTL and deadlines as decimal(20,0) since they reach 2^64-1).

The records beside the jobs (a dependent's inputs, an upstream's registrations: keys
``\x00eventq.reg:``/``\x00eventq.input:``, eventq/core/workflow.py) are among those
0x00 keys, so they never reach the job rows. A dependent's row shows its upstreams
(``after``) and how many it still waits for (``waiting``); ``edges`` makes one row
per link (``state_rows.EDGE_DDL``: upstream, dependent, the upstream's latest outcome).

A recurrence's record (docs/workflows.md, "Recurring jobs": key
``\x00eventq.recur:<name>``, eventq/core/recurrence.py) is one of them too: the
snapshot counts the live recurrences and, with ``recurrences_output``, writes one row
each (``state_rows.RECURRENCE_DDL``: the definition, the last slot fired, when the next is
due); they are not in the digest, as ``inspect digest`` leaves them out.

``dataframe_digest`` rebuilds each ``Job`` from its columns and sums the core's per-job
hashes in Spark (one partial sum per Arrow batch, added up on the driver), so it equals
``inspect digest`` and ``eventq.core.state_digest`` over the same jobs.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from eventq.core.recurrence import RECURRENCE_TABLE_PREFIX
from eventq.core.workflow import INPUT_KEY_PREFIX
from eventq.kafka.security import KafkaTarget
from eventq.spark import kafkaio, state_rows

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from eventq.settings import Settings


@dataclass(frozen=True)
class SnapshotReport:
    jobs: int
    digest: str
    undecodable: int
    seconds: float
    topic: str
    output: str | None = None
    undecodable_examples: list[str] = field(default_factory=list)
    jobs_by_state: dict[str, int] = field(default_factory=dict)
    edges_output: str | None = None
    edges_by_outcome: dict[str, int] = field(default_factory=dict)  # with edges_output
    recurrences: int = 0  # live recurrences (docs/workflows.md, "Recurring jobs")
    recurrences_output: str | None = None

    def summary(self) -> str:
        states = ", ".join(f"{s} {n:,}" for s, n in sorted(self.jobs_by_state.items()))
        where = f" to {self.output}" if self.output else ""
        text = (
            f"snapshot of {self.topic}: {self.jobs:,} jobs{where} in {self.seconds:.1f}s "
            f"({self.jobs / max(self.seconds, 1e-9):,.0f} jobs/s)"
            f"\n  {states or 'no jobs'}\n  digest {self.digest}"
        )
        if self.edges_output:
            outcomes = ", ".join(f"{o} {n:,}" for o, n in sorted(self.edges_by_outcome.items()))
            text += (f"\n  {sum(self.edges_by_outcome.values()):,} edges to "
                     f"{self.edges_output}{': ' + outcomes if outcomes else ''}")
        text += f"\n  {self.recurrences:,} recurrences"
        if self.recurrences_output:
            text += f" to {self.recurrences_output}"
        if self.undecodable:
            text += f"\n  {self.undecodable:,} undecodable records skipped, e.g.:"
            text += "".join(f"\n    {example}" for example in self.undecodable_examples)
        return text


def _newest_values(spark: SparkSession, bootstrap: KafkaTarget, topic: str,
                   keys: str) -> DataFrame:
    """The newest live record of every key of the state log that ``keys`` (a SQL
    condition on ``key``) selects: (key, partition, offset, value); a key whose newest
    record is a tombstone is gone."""
    from pyspark.sql import functions as F

    records = kafkaio.read_topic(spark, bootstrap, topic).select(
        "key", "value", "partition", "offset"
    )
    return (
        records.where(F.col("key").isNotNull() & F.expr(keys))
        .groupBy("partition", "key")
        .agg(F.max(F.struct("offset", "value")).alias("newest"))
        .select("key", "partition", F.col("newest.offset").alias("offset"),
                F.col("newest.value").alias("value"))
        .where(F.col("value").isNotNull())
    )


def decoded_states(spark: SparkSession, bootstrap: KafkaTarget, topic: str) -> DataFrame:
    """The newest record of every job key, decoded (``state_rows.DECODED_STATE_DDL``; rows with
    ``undecodable`` set are records that could not be decoded)."""
    newest = _newest_values(spark, bootstrap, topic, "substring(key, 1, 1) != X'00'")
    return newest.mapInArrow(state_rows.decode_states, state_rows.DECODED_STATE_DDL)


def _starts_with(prefix: bytes) -> str:
    """The SQL condition: ``key`` starts with ``prefix``."""
    return f"substring(key, 1, {len(prefix)}) = X'{prefix.hex().upper()}'"


def _keyed(spark: SparkSession, bootstrap: KafkaTarget, topic: str, prefix: bytes,
           newest: DataFrame | None = None) -> DataFrame:
    """The newest live record of every key that starts with ``prefix``: from ``newest``
    (``side_records``) when given, else from a read of the state log of its own."""
    from pyspark.sql import functions as F

    if newest is None:
        return _newest_values(spark, bootstrap, topic, _starts_with(prefix))
    return newest.where(F.expr(_starts_with(prefix)))


def side_records(spark: SparkSession, bootstrap: KafkaTarget, topic: str) -> DataFrame:
    """The newest live record of every input and every recurrence key: the records
    beside the jobs a snapshot reads, in one read of the state log (the job rows are
    read and decoded apart, ``decoded_states``)."""
    return _newest_values(spark, bootstrap, topic, f"{_starts_with(INPUT_KEY_PREFIX)} "
                          f"OR {_starts_with(RECURRENCE_TABLE_PREFIX)}")


def input_digest_parts(spark: SparkSession, bootstrap: KafkaTarget, topic: str,
                       newest: DataFrame | None = None) -> list[tuple[bytes, int]]:
    """The digest's partial sums of the inputs beside the dependents (the newest record
    of each input key, of ``newest`` = ``side_records`` when given), to add to the
    jobs' (eventq/core/digest.py: ``inspect digest`` covers both)."""
    inputs = _keyed(spark, bootstrap, topic, INPUT_KEY_PREFIX, newest)
    parts = (inputs.select("key", "value")
             .mapInArrow(state_rows.hash_inputs, state_rows.PARTIAL_DIGEST_DDL).collect())
    return [(part["sum"], part["count"]) for part in parts]


def decoded_recurrences(spark: SparkSession, bootstrap: KafkaTarget, topic: str,
                        newest: DataFrame | None = None) -> DataFrame:
    """The newest record of every recurrence key (of ``newest`` = ``side_records`` when
    given), decoded (``state_rows.DECODED_RECURRENCE_DDL``; rows with ``undecodable`` set are
    records that could not be decoded)."""
    records = _keyed(spark, bootstrap, topic, RECURRENCE_TABLE_PREFIX, newest)
    return records.select("key", "value", "partition", "offset").mapInArrow(
        state_rows.decode_recurrences, state_rows.DECODED_RECURRENCE_DDL)


def read_recurrences(spark: SparkSession, bootstrap: KafkaTarget, topic: str) -> DataFrame:
    """The live recurrences of the state log, one row each (``state_rows.RECURRENCE_DDL``)."""
    from pyspark.sql import functions as F

    decoded = decoded_recurrences(spark, bootstrap, topic)
    return decoded.where(F.col("undecodable").isNull()).select(*state_rows.RECURRENCE_COLUMNS)


def read_jobs(spark: SparkSession, bootstrap: KafkaTarget, topic: str) -> DataFrame:
    """The live jobs of the state log, one row per job (``state_rows.JOB_DDL``)."""
    from pyspark.sql import functions as F

    states = decoded_states(spark, bootstrap, topic)
    return states.where(F.col("undecodable").isNull()).select(*state_rows.JOB_COLUMNS)


def edges(jobs: DataFrame) -> DataFrame:
    """The edges of the DAG of ``jobs`` (rows of ``state_rows.JOB_COLUMNS``): one row per
    upstream of each dependent (``state_rows.EDGE_DDL``)."""
    from pyspark.sql import functions as F

    dependents = jobs.where(F.col("upstreams").isNotNull())
    return dependents.select("id", "name", "state_name", "upstreams").mapInArrow(
        state_rows.explode_edges, state_rows.EDGE_DDL)


def dataframe_digest(jobs: DataFrame, inputs: Sequence[tuple[bytes, int]] = ()) -> str:
    """The core's state digest of a DataFrame of job rows (``state_rows.JOB_COLUMNS``), with
    the inputs' partial sums (``input_digest_parts``) when the state has any."""
    parts = (
        jobs.select(*state_rows.JOB_COLUMNS)
        .mapInArrow(state_rows.hash_jobs, state_rows.PARTIAL_DIGEST_DDL)
        .collect()
    )
    return state_rows.combine_digest([(part["sum"], part["count"]) for part in parts] + list(inputs))


def snapshot(
    spark: SparkSession,
    *,
    bootstrap: KafkaTarget | None = None,
    topic: str | None = None,
    settings: Settings | None = None,
    output: str | None = None,
    output_format: str = "parquet",
    edges_output: str | None = None,
    recurrences_output: str | None = None,
) -> SnapshotReport:
    """Read the state log, write its live jobs to ``output`` (if given) and digest them;
    with ``edges_output``, write their DAG's edges there too (``edges``); count the
    live recurrences and, with ``recurrences_output``, write them there
    (``state_rows.RECURRENCE_DDL``)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    if settings is None:
        from eventq.settings import Settings

        settings = Settings()
    bootstrap = bootstrap or settings.kafka
    topic = topic or settings.jobs_topic
    kafkaio.topic_partitions(bootstrap, topic)  # a clear error if it does not exist
    began = time.monotonic()
    states = decoded_states(spark, bootstrap, topic).persist(StorageLevel.MEMORY_AND_DISK)
    side = side_records(spark, bootstrap, topic).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        bad = states.where(F.col("undecodable").isNotNull())
        undecodable = bad.count()
        examples = [r["undecodable"] for r in bad.select("undecodable").limit(20).collect()]
        recurring = decoded_recurrences(spark, bootstrap, topic, side).persist(
            StorageLevel.MEMORY_AND_DISK)
        bad_recurrences = recurring.where(F.col("undecodable").isNotNull())
        undecodable += bad_recurrences.count()
        examples += [r["undecodable"] for r in
                     bad_recurrences.limit(max(0, 20 - len(examples))).collect()]
        live = recurring.where(F.col("undecodable").isNull()).select(*state_rows.RECURRENCE_COLUMNS)
        if recurrences_output:
            live.write.mode("overwrite").format(output_format).save(recurrences_output)
        recurrences = live.count()
        recurring.unpersist()
        jobs = states.where(F.col("undecodable").isNull()).select(*state_rows.JOB_COLUMNS)
        counted = jobs.groupBy("state_name").count().collect()
        by_state = {r["state_name"]: r["count"] for r in counted}
        if output:
            jobs.write.mode("overwrite").format(output_format).save(output)
        by_outcome: dict[str, int] = {}
        if edges_output:
            edges(jobs).write.mode("overwrite").format(output_format).save(edges_output)
            written = spark.read.format(output_format).load(edges_output)
            by_outcome = {r["outcome"]: r["count"]
                          for r in written.groupBy("outcome").count().collect()}
        digest = dataframe_digest(jobs, input_digest_parts(spark, bootstrap, topic, side))
    finally:
        states.unpersist()
        side.unpersist()
    return SnapshotReport(
        jobs=sum(by_state.values()),
        digest=digest,
        undecodable=undecodable,
        seconds=time.monotonic() - began,
        topic=topic,
        output=output,
        undecodable_examples=examples,
        jobs_by_state=by_state,
        edges_output=edges_output,
        edges_by_outcome=by_outcome,
        recurrences=recurrences,
        recurrences_output=recurrences_output,
    )
