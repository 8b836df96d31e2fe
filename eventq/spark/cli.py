"""``eventq spark enqueue|snapshot|stats``: the Spark jobs from the command line.

``eventq/cli/main.py`` adds them with ``register(commands, add_arguments, build_settings)``;
``python -m eventq.spark.cli spark ...`` runs them on their own. pyspark is imported
only when a subcommand runs, so ``eventq --help`` works without the ``spark`` extra.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from eventq.settings import Settings


# The command line's parser class (eventq's own subclass of ArgumentParser): what
# add_subparsers() makes, and so what each subcommand's parser is.
Parser = TypeVar("Parser", bound=argparse.ArgumentParser)

EXIT_OK = 0
EXIT_FAILED = 1
INPUT_FORMATS = ("parquet", "csv", "json")


def say(message: str) -> None:
    print(message, flush=True)


def fail(message: str) -> int:
    print(f"eventq spark: {message}", file=sys.stderr, flush=True)
    return EXIT_FAILED


# --- running a Spark job -------------------------------------------------------------


class _StageProgress(threading.Thread):
    """Prints Spark's task progress to stderr every few seconds while a job runs (only
    on a terminal; Spark's own progress bar is off)."""

    def __init__(self, spark: SparkSession, every_s: float = 3.0) -> None:
        super().__init__(daemon=True)
        self._tracker = spark.sparkContext.statusTracker()
        self._every_s = every_s
        self._stop = threading.Event()

    def run(self) -> None:
        while not self._stop.wait(self._every_s):
            parts = []
            for stage_id in self._tracker.getActiveStageIds():
                info = self._tracker.getStageInfo(stage_id)
                if info is not None:
                    done, total = info.numCompletedTasks, info.numTasks
                    parts.append(f"stage {stage_id}: {done}/{total} tasks")
            if parts:
                print("  ... " + ", ".join(parts), file=sys.stderr, flush=True)

    def stop(self) -> None:
        self._stop.set()


def _run(args: argparse.Namespace, job: Callable[[SparkSession], int]) -> int:
    """Start (or reuse) a SparkSession, run ``job(spark)``, turn errors into advice."""
    from eventq.spark.kafkaio import TopicMissing
    from eventq.spark.session import SparkOptions, SparkSetupError, spark_session

    try:
        options = SparkOptions(
            master=args.master,
            jars_dir=args.spark_jars,
            app_name=f"eventq spark {args.spark_command}",
            driver_memory=args.driver_memory,
        )
        spark, created = spark_session(options)
    except SparkSetupError as error:
        return fail(str(error))
    progress = _StageProgress(spark) if sys.stderr.isatty() else None
    if progress is not None:
        progress.start()
    try:
        return job(spark)
    except (SparkSetupError, TopicMissing, ValueError) as error:
        return fail(str(error))
    except Exception as error:  # AnalysisException, Py4JJavaError, ...
        text = str(error).strip().splitlines()
        return fail(f"the Spark job failed: {text[0] if text else type(error).__name__}")
    finally:
        if progress is not None:
            progress.stop()
        if created:
            spark.stop()


def _phase(message: str) -> None:
    say(f"  {message} ...")


def cmd_enqueue(settings: Settings, args: argparse.Namespace) -> int:
    def job(spark: SparkSession) -> int:
        from eventq.spark.bulk import enqueue

        reader = spark.read.format(args.format)
        if args.format == "csv":
            reader = reader.option("header", "true")  # every cell as text: exact parsing
        try:
            df = reader.load(args.input)
        except Exception as error:
            first = str(error).strip().splitlines()
            return fail(
                f"cannot read {args.input} as {args.format}: "
                f"{first[0] if first else type(error).__name__}"
            )
        say(f"eventq spark enqueue: {args.input} ({args.format}) -> "
            f"{settings.bulk_topic} on {settings.kafka_bootstrap}")
        report = enqueue(
            df,
            settings=settings,
            name=args.name,
            name_column=args.name_column,
            id_column=args.id_column,
            key_columns=args.key_columns,
            id_namespace=args.id_namespace,
            payload_column=args.payload_column,
            ttr_ms=args.ttr_ms,
            ttr_column=args.ttr_column,
            ttl_ms=args.ttl_ms,
            ttl_column=args.ttl_column,
            priority=args.priority,
            priority_column=args.priority_column,
            max_attempts=args.max_attempts,
            max_attempts_column=args.max_attempts_column,
            max_fails=args.max_fails,
            max_fails_column=args.max_fails_column,
            time_column=args.time_column,
            after_column=args.after_column,
            after_keys_column=args.after_keys_column,
            tags=args.tags,
            tags_column=args.tags_column,
            rejects=args.rejects,
            rejects_format=args.rejects_format,
            on_phase=_phase,
        )
        say(report.summary())
        if args.wait and report.sent:
            return _wait_applied(settings, args, report.sent)
        return EXIT_OK

    return _run(args, job)


def _wait_applied(settings: Settings, args: argparse.Namespace, rows: int) -> int:
    """--wait: until the server has admitted and applied every record written."""
    from eventq.console.progress import Progress
    from eventq.kafka.bulklane import (
        BulkWaitError,
        bulk_group_id,
        end_offsets,
        wait_admitted,
        wait_state_logged,
    )

    targets = end_offsets(settings.kafka, settings.bulk_topic)
    try:
        admission = wait_admitted(
            settings.kafka, settings.bulk_topic, bulk_group_id(settings.app_id),
            targets, Progress(), stall_timeout_s=args.wait_timeout, rows=rows,
        )
    except BulkWaitError as error:
        return fail(str(error))
    if not wait_state_logged(settings.kafka, settings.app_id,
                             settings.commands_topic, args.wait_timeout):
        say(f"applied, but {settings.jobs_topic} did not show it all within "
            f"{args.wait_timeout:g}s (its changelog is committed about once a second)")
    say(f"applied: all {rows:,} rows are live (the server admitted every bulk record of "
        f"{settings.bulk_topic}'s {len(admission.targets)} partitions)")
    return EXIT_OK


def cmd_snapshot(settings: Settings, args: argparse.Namespace) -> int:
    def job(spark: SparkSession) -> int:
        from eventq.spark.statelog import snapshot

        say(f"eventq spark snapshot: {settings.jobs_topic} on {settings.kafka_bootstrap} "
            f"-> {args.output} ({args.output_format})")
        report = snapshot(
            spark, settings=settings, output=args.output, output_format=args.output_format,
            edges_output=args.edges, recurrences_output=args.recurrences,
        )
        say(report.summary())
        return EXIT_OK

    return _run(args, job)


def cmd_stats(settings: Settings, args: argparse.Namespace) -> int:
    def job(spark: SparkSession) -> int:
        from eventq.spark import stats

        say(f"eventq spark stats: {settings.commands_topic} and {settings.jobs_topic} "
            f"on {settings.kafka_bootstrap}")
        result = stats.compute(spark, settings=settings, queue=args.queue)
        say(stats.format_table(result))
        if args.output:
            stats.write(result, spark, args.output)
            say(f"wrote {', '.join(stats.WRITTEN)} to {args.output}/")
        return EXIT_OK

    return _run(args, job)


# --- the parser ----------------------------------------------------------------------


def _columns(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise argparse.ArgumentTypeError("give one or more column names, comma-separated")
    return names


def _spark_arguments(parser: argparse.ArgumentParser) -> None:
    from pathlib import Path

    group = parser.add_argument_group("Spark")
    group.add_argument(
        "--master", default="local[2]", metavar="URL",
        help="Spark master: local[N] (default local[2]) or a cluster's URL "
        "(spark://host:7077, yarn, k8s://...; executors need eventq installed)",
    )
    group.add_argument(
        "--spark-jars", type=Path, default=None, metavar="DIR",
        help="directory of the Kafka connector jars (default kafka/lib/spark, "
        "filled by `make deps`)",
    )
    group.add_argument(
        "--driver-memory", default="2g", metavar="SIZE",
        help="driver memory in local mode, where it also runs the tasks (default 2g)",
    )


def _field_pair(group: argparse._ArgumentGroup, field: str, what: str,
                required: bool = False) -> None:
    pair = group.add_mutually_exclusive_group(required=required)
    pair.add_argument(f"--{field}-ms" if field in ("ttr", "ttl") else f"--{field}",
                      type=int, default=None, metavar="N",
                      help=f"{what}, the same for every row")
    pair.add_argument(f"--{field}-column", default=None, metavar="C",
                      help=f"{what} from column C (null: {'rejected' if required else '0'})")


def _add_enqueue(actions: argparse._SubParsersAction[Parser]) -> Parser:
    enqueue = actions.add_parser(
        "enqueue",
        help="enqueue every row of a file as a job (add, or schedule with --time-column)",
        description=(
            "Enqueue every row of INPUT as a job: the same add/schedule commands the "
            "gateway writes, validated with the protocol's rules and partitioned as the "
            "gateway partitions. Rows that would be refused are not sent; they are "
            "written to --rejects with the reason. Job ids come from --id-column or are "
            "derived from --key-columns, so running the same enqueue twice is harmless."
        ),
    )
    _enqueue_io_arguments(enqueue)
    _job_field_arguments(enqueue)
    enqueue.set_defaults(handler=cmd_enqueue)
    return enqueue


def _enqueue_io_arguments(enqueue: argparse.ArgumentParser) -> None:
    io = enqueue.add_argument_group("input and output")
    io.add_argument("--input", required=True, metavar="PATH", help="file or directory to read")
    io.add_argument("--format", choices=INPUT_FORMATS, default="parquet",
                    help="input format (default parquet; csv: with a header line, every "
                    "cell read as text)")
    io.add_argument("--rejects", required=True, metavar="PATH",
                    help="where rejected rows go, with job_id, reject_field, reject_reason "
                    "(replaced on each run)")
    io.add_argument("--rejects-format", choices=("parquet", "json"), default="parquet",
                    help="format of --rejects (default parquet)")
    io.add_argument("--wait", action=argparse.BooleanOptionalAction, default=False,
                    help="after sending, wait with a progress bar until the running "
                    "server has applied every row (default: return once Kafka has them)")
    io.add_argument("--wait-timeout", type=float, default=60.0, metavar="S",
                    help="with --wait: give up when nothing is applied for S seconds "
                    "(default 60)")


def _job_field_arguments(enqueue: argparse.ArgumentParser) -> None:
    fields = enqueue.add_argument_group("job fields (a constant or a column each)")
    names = fields.add_mutually_exclusive_group(required=True)
    names.add_argument("--name", default=None, metavar="NAME", help="queue name of every job")
    names.add_argument("--name-column", default=None, metavar="C", help="queue name from column C")
    ids = fields.add_mutually_exclusive_group(required=True)
    ids.add_argument("--id-column", default=None, metavar="C",
                     help="job id from column C (a version-4 UUID, text or 16 bytes)")
    ids.add_argument("--key-columns", type=_columns, default=None, metavar="A,B",
                     help="derive each job id from these columns (and the queue name): "
                     "a re-run gives the same ids")
    fields.add_argument("--id-namespace", default=None, metavar="NS",
                        help="namespace of derived ids (a UUID or any text; default eventq's)")
    fields.add_argument("--payload-column", default=None, metavar="C",
                        help="payload from column C (binary as is, text as UTF-8, "
                        "structs as JSON; null: empty); default: the whole row as JSON")
    _field_pair(fields, "ttr", "time to run in ms (1..86400000)", required=True)
    _field_pair(fields, "ttl", "time to live in ms (>= 1)", required=True)
    _field_pair(fields, "priority", "priority (signed 32-bit; default 0)")
    _field_pair(fields, "max-attempts", "max attempts (0..255; default 0 = 255)")
    _field_pair(fields, "max-fails", "max fails (0..255; default 0)")
    fields.add_argument("--time-column", default=None, metavar="C",
                        help="schedule rows whose C is not null at that time (a timestamp, "
                        "epoch ms, or text like 2030-01-31T12:00:00Z); others are added")
    after = fields.add_mutually_exclusive_group()
    after.add_argument("--after-column", default=None, metavar="C",
                       help="each job waits for the upstream jobs whose ids column C holds "
                       "(an array, or text with ',' between the ids, as -after; null or "
                       "empty: none): a DAG in one file")
    after.add_argument("--after-keys-column", default=None, metavar="C",
                       help="as --after-column, naming upstreams by their keys (with "
                       "--key-columns: an array of values, of structs with the key "
                       "columns, or text with ',' between them)")
    tags = fields.add_mutually_exclusive_group()
    tags.add_argument("--tags", default=None, metavar="T1,T2",
                      help="tags of every job (1-16, as -tags; inspect tagged finds them)")
    tags.add_argument("--tags-column", default=None, metavar="C",
                      help="each job's tags from column C (an array, or text with ',' "
                      "between the tags, as -tags; null or empty array: none)")


def _add_snapshot(actions: argparse._SubParsersAction[Parser]) -> Parser:
    snapshot = actions.add_parser(
        "snapshot",
        help="write the live jobs of the state log to parquet and print their digest",
        description=(
            "Read the state log (eventq.jobs) from its start to its end, keep the newest "
            "record of every job (tombstones remove), write one row per live job with "
            "every field to --output, and print the state digest (equal to `inspect "
            "digest` of a server that has applied the same log)."
        ),
    )
    snapshot.add_argument("--output", required=True, metavar="PATH",
                          help="directory to write (replaced)")
    snapshot.add_argument("--output-format", choices=("parquet", "json"), default="parquet",
                          help="format of --output (default parquet)")
    snapshot.add_argument("--edges", default=None, metavar="PATH",
                          help="also write the workflows' edges, one row per upstream of "
                          "each live dependent with the upstream's latest outcome, to "
                          "directory PATH (replaced)")
    snapshot.add_argument("--recurrences", default=None, metavar="PATH",
                          help="also write the recurring jobs, one row per live "
                          "recurrence with its definition, the last slot fired and when "
                          "the next is due, to directory PATH (replaced)")
    snapshot.set_defaults(handler=cmd_snapshot)
    return snapshot


def _add_stats(actions: argparse._SubParsersAction[Parser]) -> Parser:
    stats = actions.add_parser(
        "stats",
        help="per queue: jobs by state, and wait/run time histograms from the log",
        description=(
            "Per queue: the jobs in each state now (from the state log), the commands "
            "applied, and the distributions of wait time (ready to leased) and run time "
            "(leased to completed/failed) from the command log, in qless's histogram "
            "buckets (seconds for the first minute, minutes for the first hour, 15 "
            "minutes for the first day, hours to 3 days, then days). Then live jobs per "
            "tag, FAILED jobs per failure group, and per recurrence the slots it fired "
            "(command log) and when its next is due (state log)."
        ),
    )
    stats.add_argument("--queue", default=None, metavar="NAME",
                       help="only this queue (and the recurrences that add to it)")
    stats.add_argument("--output", default=None, metavar="PATH",
                       help="also write the tables as parquet to PATH/{states,events,"
                       "histogram,summary,tags,groups,recurrences}")
    stats.set_defaults(handler=cmd_stats)
    return stats


def register(
    subparsers: argparse._SubParsersAction[Parser],
    add_settings_arguments: Callable[[argparse.ArgumentParser], None],
    build_settings: Callable[..., Settings] | None = None,
) -> Parser:
    """Add ``spark`` with ``enqueue``, ``snapshot`` and ``stats`` to ``subparsers``.

    Each subcommand gets the settings flags (``add_settings_arguments``) and sets
    ``handler(settings, args) -> exit code``, as eventq's other subcommands do.
    ``build_settings`` is accepted for symmetry with ``main`` here (settings are built by
    the caller before the handler runs).
    """
    spark = subparsers.add_parser(
        "spark",
        help="bulk enqueue, snapshot and statistics with Spark (needs the spark extra)",
        description=(
            "PySpark jobs on eventq's topics through Spark's Kafka connector: bulk "
            "enqueue from files, a parquet snapshot of the live jobs with its state "
            "digest, and per-queue statistics. Local Spark (local[2]) unless --master."
        ),
    )
    actions = spark.add_subparsers(dest="spark_command", metavar="ACTION", required=True)
    for add_action in (_add_enqueue, _add_snapshot, _add_stats):
        action = add_action(actions)
        _spark_arguments(action)
        add_settings_arguments(action)
    return spark


def build_parser() -> argparse.ArgumentParser:
    from eventq.settings import add_arguments, build_settings

    parser = argparse.ArgumentParser(prog="eventq")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    register(commands, add_arguments, build_settings)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m eventq.spark.cli spark ...`` (the same as ``eventq spark ...``)."""
    from eventq.settings import build_settings

    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        settings = build_settings(args, os.environ)
    except ValueError as error:
        parser.error(str(error))
    handler: Callable[[Settings, argparse.Namespace], int] = args.handler  # set by register
    return handler(settings, args)


if __name__ == "__main__":
    sys.exit(main())
