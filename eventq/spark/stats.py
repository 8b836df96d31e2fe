"""Statistics per queue: jobs by state now, and wait/run time distributions from the log.

- Jobs by state come from the state log (``statelog.read_jobs``): the current state;
  so do live jobs per tag and state (docs/workflows.md, "Tags"), a job counted once
  under each of its tags.
- The command log is decoded, grouped by job (a shuffle on the job id, sorted by offset:
  all commands of a job are in one Kafka partition) and folded with the core's state
  machine (``rows.fold_commands``), so only commands the processor accepted count, with
  the broker's timestamps (the topic uses LogAppendTime). For every accepted attempt:

    wait = lease time (start-attempt) - when the job became ready to lease: its add
           (or its scheduled time, if later), or the fail/TTR timeout that requeued it
    run  = complete/fail time - lease time of that attempt (timed-out attempts have none)

- Failed jobs per failure group come from the state log too (docs/workflows.md, "Failure groups and
retry"): a FAILED job's group as ``inspect failed`` counts it
  (``failure_group``: ``failed`` or ``attempts-exhausted`` when its fail named none).
- Recurrences (docs/workflows.md, "Recurring jobs"): per recurrence, the slots it
  fired by the command log (the fold applies its recur, unrecur and fire commands as
  the processor does: ``rows.RecurrenceFold``; a fire fires at most one slot, a
  repeated or early one none) and the due time of its last; when its next slot is due
  from its record in the state log (none once unrecurred).
- Durations are counted in qless's histogram buckets (``histogram``): seconds for the
  first minute, minutes for the first hour, 15 minutes for the first day, hours to 3
  days, then days. Commands that aged out of the command log's retention are not seen.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from eventq.kafka.security import KafkaTarget
from eventq.protocol.values import format_time
from eventq.spark import histogram, kafkaio, rows, statelog

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from eventq.settings import Settings

STATE_ORDER = ("new", "pending", "leased", "completed", "failed", "waiting")
METRICS = ("wait", "run")
Rows = list[dict[str, Any]]  # a small table, collected: its rows by column name


class Keyed(Protocol):
    """A row read by column name: a pyspark ``Row``, or a dict."""

    def __getitem__(self, key: str, /) -> Any: ...


@dataclass
class Stats:
    """Small collected results (lists of dicts) and, with ``spark``, their DataFrames."""

    states: Rows = field(default_factory=list)  # queue, state, count
    events: Rows = field(default_factory=list)  # queue, command, outcome, event, count
    histogram: Rows = field(default_factory=list)  # queue, metric, lower_s, width_s, label, count
    # queue, metric, count, mean_ms, p50_ms, p90_ms, p99_ms, max_ms
    summary: Rows = field(default_factory=list)
    tags: Rows = field(default_factory=list)  # tag, state, count (live jobs)
    groups: Rows = field(default_factory=list)  # group, count (FAILED jobs)
    # recurrence, queue, every_ms, fired, last_fired_ms, next_ms (null: unrecurred)
    recurrences: Rows = field(default_factory=list)
    commands: int = 0
    seconds: float = 0.0

    SCHEMAS = {
        "states": "queue string, state string, count bigint",
        "events": "queue string, command string, outcome string, event string, count bigint",
        "histogram": "queue string, metric string, lower_s bigint, width_s bigint, "
        "label string, count bigint",
        "summary": "queue string, metric string, count bigint, mean_ms double, "
        "p50_ms bigint, p90_ms bigint, p99_ms bigint, max_ms bigint",
        "tags": "tag string, state string, count bigint",
        "groups": "group string, count bigint",
        "recurrences": "recurrence string, queue string, every_ms bigint, fired bigint, "
        "last_fired_ms bigint, next_ms bigint",
    }

    def dataframe(self, spark: SparkSession, which: str) -> DataFrame:
        """One of ``SCHEMAS`` (``states``, ``events``, ``histogram``, ``summary``,
        ``tags``, ``groups``, ``recurrences``) as a DataFrame."""
        columns = [part.split()[0] for part in self.SCHEMAS[which].split(",")]
        return spark.createDataFrame(
            [tuple(r.get(c) for c in columns) for r in getattr(self, which)],
            self.SCHEMAS[which],
        )

    def queues(self) -> list[str]:
        names = {r["queue"] for r in self.states + self.events if r["queue"] is not None}
        return sorted(names)


def outcomes(spark: SparkSession, bootstrap: KafkaTarget, topic: str) -> DataFrame:
    """One row per command of the command log with its outcome (``rows.OUTCOME_DDL``)."""
    from pyspark.sql import functions as F

    records = kafkaio.read_topic(spark, bootstrap, topic, fail_on_data_loss=False).select(
        "key", "partition", "offset", F.unix_millis("timestamp").alias("at_ms"), "value",
    )
    # One row per command (a batch record holds many, eventq/core/batch.py), named by
    # its job: group each job's commands in one Spark partition, in log order, and
    # decode them fully only once, in the fold.
    return (
        records.mapInArrow(rows.explode_commands, rows.COMMAND_DDL)
        .repartition("job_id")
        .sortWithinPartitions("job_id", "partition", "position")
        .mapInArrow(rows.fold_commands, rows.OUTCOME_DDL)
    )


def durations(outcome_rows: DataFrame) -> DataFrame:
    """(queue, metric, ms) of every wait and run sample."""
    from pyspark.sql import functions as F

    def samples(metric: str, column: str) -> DataFrame:
        return outcome_rows.where(F.col(column).isNotNull()).select(
            "queue", F.lit(metric).alias("metric"), F.col(column).alias("ms")
        )

    return samples("wait", "wait_ms").unionByName(samples("run", "run_ms"))


def compute(
    spark: SparkSession,
    *,
    bootstrap: KafkaTarget | None = None,
    commands_topic: str | None = None,
    jobs_topic: str | None = None,
    settings: Settings | None = None,
    queue: str | None = None,
) -> Stats:
    """Read both topics and compute the statistics (optionally of one queue)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    if settings is None:
        from eventq.settings import Settings

        settings = Settings()
    bootstrap = bootstrap or settings.kafka
    commands_topic = commands_topic or settings.commands_topic
    jobs_topic = jobs_topic or settings.jobs_topic
    kafkaio.topic_partitions(bootstrap, commands_topic)
    kafkaio.topic_partitions(bootstrap, jobs_topic)
    began = time.monotonic()

    jobs = statelog.read_jobs(spark, bootstrap, jobs_topic)
    if queue is not None:
        jobs = jobs.where(F.col("name") == queue)
    states = [
        r.asDict()
        for r in jobs.groupBy(F.col("name").alias("queue"), F.col("state_name").alias("state"))
        .count()
        .orderBy("queue", "state")
        .collect()
    ]
    tags = [
        r.asDict()
        for r in jobs.select(F.explode("tags").alias("tag"), F.col("state_name").alias("state"))
        .groupBy("tag", "state")
        .count()
        .orderBy("tag", "state")
        .collect()
    ]
    groups = [
        r.asDict()
        for r in jobs.where(F.col("failure_group").isNotNull())
        .groupBy(F.col("failure_group").alias("group"))
        .count()
        .orderBy("group")  # bytewise (UTF-8), as inspect failed orders them
        .collect()
    ]
    defined = statelog.read_recurrences(spark, bootstrap, jobs_topic).select(
        "name", "job_name", "every_ms", "fired_ms", "next_ms").collect()

    done = outcomes(spark, bootstrap, commands_topic)
    if queue is not None:
        done = done.where(F.col("queue") == queue)
    done = done.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        of_jobs = done.where(F.col("recurrence").isNull())
        events = [
            r.asDict()
            for r in of_jobs.groupBy("queue", "command", "outcome", "event")
            .count()
            .orderBy("queue", "command", "outcome", "event")
            .collect()
        ]
        logged = done.where(F.col("recurrence").isNotNull()).groupBy("recurrence").agg(
            F.count(F.lit(1)).alias("commands"), F.count("slot").alias("fired"),
            F.max("due_ms").alias("last_fired_ms"),
            F.max_by("queue", "at_ms").alias("queue"),  # its last known queue
        ).collect()
        samples = durations(of_jobs)
        lower, width, text = histogram.bucket_columns("ms")
        buckets = [
            r.asDict()
            for r in samples.groupBy(
                "queue", "metric", lower.alias("lower_s"), width.alias("width_s"),
                text.alias("label"),
            )
            .count()
            .orderBy("queue", "metric", "lower_s")
            .collect()
        ]
        quantiles = F.percentile_approx("ms", [0.5, 0.9, 0.99], 10_000)
        summary = []
        for r in (
            samples.groupBy("queue", "metric")
            .agg(F.count("ms").alias("count"), F.avg("ms").alias("mean_ms"),
                 quantiles.alias("q"), F.max("ms").alias("max_ms"))
            .orderBy("queue", "metric")
            .collect()
        ):
            p50, p90, p99 = r["q"]
            summary.append({
                "queue": r["queue"], "metric": r["metric"], "count": r["count"],
                "mean_ms": r["mean_ms"], "p50_ms": p50, "p90_ms": p90, "p99_ms": p99,
                "max_ms": r["max_ms"],
            })
    finally:
        done.unpersist()
    return Stats(
        states=states,
        events=events,
        histogram=buckets,
        summary=summary,
        tags=tags,
        groups=groups,
        recurrences=recurrence_rows(defined, logged, queue),
        commands=sum(r["count"] for r in events) + sum(r["commands"] for r in logged),
        seconds=time.monotonic() - began,
    )


def recurrence_rows(defined: Iterable[Keyed], logged: Iterable[Keyed],
                    queue: str | None = None) -> Rows:
    """``Stats.recurrences``: one row per recurrence the state log defines (``defined``:
    name, job_name, every_ms, fired_ms, next_ms) or the command log names (``logged``:
    recurrence, fired, last_fired_ms, queue), by name bytewise. Its fired slots are the
    command log's (those that aged out of its retention are not counted); its queue,
    every, last fired slot and next due time the record's while it lives. Once
    unrecurred: the log's last known queue and last fired slot, and no next.

    With ``queue`` (``logged`` then counts only the commands of its recurrences while
    they added to it): the recurrences that add to it now, or did by the log."""
    by_name: dict[str, dict[str, Any]] = {}
    for r in logged:
        by_name[r["recurrence"]] = {
            "recurrence": r["recurrence"], "queue": r["queue"], "every_ms": None,
            "fired": r["fired"], "last_fired_ms": r["last_fired_ms"], "next_ms": None,
        }
    for r in defined:
        if queue is not None and r["job_name"] != queue and r["name"] not in by_name:
            continue
        row = by_name.setdefault(r["name"], {"recurrence": r["name"], "fired": 0,
                                             "last_fired_ms": None})
        row.update(queue=r["job_name"], every_ms=r["every_ms"], next_ms=r["next_ms"])
        if r["fired_ms"] is not None and queue in (None, r["job_name"]):
            row["last_fired_ms"] = r["fired_ms"]
    return [by_name[name] for name in sorted(by_name, key=str.encode)]


WRITTEN = ("states", "events", "histogram", "summary", "tags", "groups", "recurrences")


def write(stats: Stats, spark: SparkSession, output: str,
          output_format: str = "parquet") -> None:
    """``output``/states, /events, /histogram, /summary, /tags, /groups and
    /recurrences."""
    for which in WRITTEN:
        stats.dataframe(spark, which).coalesce(1).write.mode("overwrite").format(
            output_format
        ).save(f"{output.rstrip('/')}/{which}")


# ------------------------------------------------------------------------ the table


def _duration(ms: float | None) -> str:
    if ms is None:
        return "-"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.3g}s" if seconds < 10 else f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{seconds / 60:.1f}m"
    if seconds < 86400:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"


def _is_registration(event: Mapping[str, object]) -> bool:
    """A ``depend`` (docs/workflows.md, "Command types"): it registers a dependent
    beside its upstream and never changes the upstream, so the fold counts it as ignored
    (eventq/core/machine.py, REGISTERED); the table counts it as a registration. The
    upstream may not exist yet: a dependent may come before its upstreams."""
    return event["command"] == "depend" and event["outcome"] == "ignored"


def format_table(stats: Stats, bar_width: int = 40) -> str:
    """A readable per-queue report of ``stats``."""
    lines: list[str] = []
    for queue in stats.queues() or []:
        by_state = {r["state"]: r["count"] for r in stats.states if r["queue"] == queue}
        lines.append(f"queue {queue}")
        lines.append(
            "  jobs now   "
            + "  ".join(f"{s} {by_state.get(s, 0):,}" for s in STATE_ORDER)
        )
        accepted: dict[str, int] = {}
        refused: dict[str, int] = {}
        for r in stats.events:
            if r["queue"] != queue:
                continue
            if _is_registration(r):
                accepted["registered"] = accepted.get("registered", 0) + r["count"]
            elif r["outcome"] == "accepted":
                accepted[r["event"]] = accepted.get(r["event"], 0) + r["count"]
            else:
                key = f"{r['command']} {r['outcome']}"
                refused[key] = refused.get(key, 0) + r["count"]
        if accepted:
            lines.append("  events     " + "  ".join(f"{e} {n:,}" for e, n in sorted(accepted.items())))
        if refused:
            lines.append("  not applied " + "  ".join(f"{e} {n:,}" for e, n in sorted(refused.items())))
        for metric in METRICS:
            summary = next(
                (r for r in stats.summary if r["queue"] == queue and r["metric"] == metric), None
            )
            if summary is None:
                lines.append(f"  {metric:<5}      no samples")
                continue
            lines.append(
                f"  {metric:<5}      {summary['count']:,} samples  "
                f"mean {_duration(summary['mean_ms'])}  p50 {_duration(summary['p50_ms'])}  "
                f"p90 {_duration(summary['p90_ms'])}  p99 {_duration(summary['p99_ms'])}  "
                f"max {_duration(summary['max_ms'])}"
            )
            buckets = [
                r for r in stats.histogram if r["queue"] == queue and r["metric"] == metric
            ]
            most = max((r["count"] for r in buckets), default=1)
            for r in buckets:
                bar = "#" * max(1, round(bar_width * r["count"] / most))
                lines.append(f"    {r['label']:>7}  {bar} {r['count']:,}")
    unknown = sum(r["count"] for r in stats.events
                  if r["queue"] is None and not _is_registration(r))
    early = sum(r["count"] for r in stats.events if r["queue"] is None and _is_registration(r))
    if unknown:
        lines.append(f"({unknown:,} commands for jobs the log never created: not found/ignored)")
    if early:
        lines.append(f"({early:,} dependents registered with an upstream not added yet)")
    by_tag: dict[str, dict[str, int]] = {}
    for r in stats.tags:
        by_tag.setdefault(r["tag"], {})[r["state"]] = r["count"]
    for tag, counts in sorted(by_tag.items()):
        lines.append(f"tag {tag}  " + "  ".join(
            f"{s} {counts[s]:,}" for s in STATE_ORDER if s in counts))
    for r in stats.groups:
        lines.append(f"group {r['group']}  failed {r['count']:,}")
    for r in stats.recurrences:
        last = ("" if r["last_fired_ms"] is None
                else f" (last due {format_time(r['last_fired_ms'])})")
        every = "" if r["every_ms"] is None else f" every {_duration(r['every_ms'])}"
        upcoming = ("gone (unrecurred)" if r["next_ms"] is None
                    else f"next due {format_time(r['next_ms'])}")
        lines.append(f"recurrence {r['recurrence']}  queue {r['queue'] or '-'}{every}  "
                     f"fired {r['fired']:,}{last}  {upcoming}")
    lines.append(
        f"{len(stats.queues())} queues, {stats.commands:,} commands folded in {stats.seconds:.1f}s"
    )
    return "\n".join(lines)
