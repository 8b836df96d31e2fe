"""Bulk enqueue: every row of a DataFrame becomes an add (or schedule) command in the bulk
lane (`eventq.bulk`, docs/architecture.md, "Lanes"), encoded, validated and partitioned
exactly as the gateway would; the server admits them into the command log a slice at a
time, so a load of millions never stalls the workers' commands.

Each row's fields come from columns or constants; the row is validated with the
protocol's own value parsers and the core's command validation (``enqueue_rows.encode_row``)
inside a scalar pandas UDF. Valid rows are written through Spark's Kafka connector with
an explicit ``partition`` column (Kafka's murmur2 of the key, as every eventq producer);
rows that would be refused are never sent: they are counted and, with ``rejects``,
written out (the input columns + ``job_id``, ``reject_field``, ``reject_reason``).

A DAG is the same DataFrame with a column of each row's upstreams (docs/workflows.md,
"Dependencies"; ``after_column``): their ids, or with ``after_keys_column`` their keys, from
which their ids are derived as the rows' own are, so the edges of a pipeline are named
by the data that names its jobs. Either is an array, or text with ``,`` between the
elements (the protocol's spelling, and what a CSV cell holds); null or an empty array
is a job without upstreams. A malformed list is a reject with its reason, like any
other field (the gateway's ``Invalid After``). A dependent is accepted WAITING whatever
order its upstreams are applied in, so the load needs no order of its own.

A row's tags (docs/workflows.md, "Tags") come from ``tags_column``: text in -tags's
spelling (``,`` between the tags, as a CSV cell holds them) or an array of strings; null
or an empty array is a job without tags, and a malformed list (an empty element, more
than 16, a repeat, a character outside ``[A-Za-z0-9_.-]``, more than 64 bytes) is a
reject on ``tags`` saying which (the gateway's ``Invalid Tags``). ``tags`` gives every
row the same tags instead.

Job ids come from an id column (a version-4 UUID, as text or 16 bytes) or are derived
from key columns (``eventq.spark.ids``): a re-run sends the same ids, which the
processor refuses as duplicates, so running an enqueue twice never makes second jobs
(as long as the first run's jobs exist: a job deleted or expired frees its id, as for
the gateway's add). A refused add writes no ``depend`` (eventq/core/step.py: only an
accepted command has follow-ups), so a re-run adds no edge either. For the same
reason a Spark task that is retried after writing part of its rows is harmless. Two
rows with the same id in one input: the first in the log wins, the other is refused.
"""

from __future__ import annotations

import functools
import time
import uuid
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from eventq.errors import EventqError
from eventq.kafka.security import KafkaTarget
from eventq.protocol import values
from eventq.spark import enqueue_rows, kafkaio, rows
from eventq.spark.ids import namespace_uuid

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from eventq.settings import Settings

ENCODED = "__eventq_encoded"
REJECT_COLUMNS = ("job_id", "reject_field", "reject_reason")
REJECT_FORMATS = ("parquet", "json")


@dataclass(frozen=True)
class EnqueueReport:
    rows: int
    sent: int
    rejected: int
    seconds: float
    topic: str
    partitions: int
    rejects_path: str | None = None
    rejected_by_field: dict[str, int] = field(default_factory=dict)

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds if self.seconds > 0 else float("inf")

    def summary(self) -> str:
        text = (
            f"read {self.rows:,} rows, sent {self.sent:,} commands to {self.topic} "
            f"({self.partitions} partitions), rejected {self.rejected:,} "
            f"in {self.seconds:.1f}s ({self.rows_per_s:,.0f} rows/s)"
        )
        if self.rejected:
            fields = ", ".join(f"{n:,} {f}" for f, n in sorted(self.rejected_by_field.items()))
            where = f"; reasons in {self.rejects_path}" if self.rejects_path else ""
            text += f"\n  rejected rows by field: {fields}{where}"
        return text


def _col(name: str) -> Column:
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def _constant(field_name: str, parse: Callable[[str], int], value: int | str | None,
              ) -> int | None:
    """A constant field checked with the protocol's parser; ValueError if invalid."""
    if value is None:
        return None
    try:
        return parse(str(value))
    except EventqError as error:
        raise ValueError(f"{field_name}: {error.text}, got {value!r}") from None


def _one_of(what: str, constant: object, column: str | None, required: bool) -> None:
    if constant is not None and column is not None:
        raise ValueError(f"give {what} as a constant or a column, not both")
    if required and constant is None and column is None:
        raise ValueError(f"{what} is required: give it as a constant or a column")


def _check_columns(df: DataFrame, names: Sequence[str | None]) -> None:
    present = set(df.columns)
    missing = [n for n in names if n is not None and n not in present]
    if missing:
        raise ValueError(
            f"no column {', '.join(map(repr, missing))} in the input "
            f"(columns: {', '.join(df.columns)})"
        )


def _text(df: DataFrame, column: str | None) -> Column:
    from pyspark.sql import functions as F

    return F.lit(None).cast("string") if column is None else _col(column).cast("string")


def _payload(df: DataFrame, column: str | None) -> Column:
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if column is None:  # the whole row as JSON
        return F.to_json(F.struct(*[_col(c) for c in df.columns])).cast("binary")
    kind = df.schema[column].dataType
    if isinstance(kind, T.BinaryType):
        return _col(column)
    if isinstance(kind, (T.StructType, T.ArrayType, T.MapType)):
        return F.to_json(_col(column)).cast("binary")
    return _col(column).cast("string").cast("binary")  # text as UTF-8


def _time(df: DataFrame, column: str | None) -> tuple[Column, str | None]:
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if column is None:
        return F.lit(None).cast("string"), None
    kind = df.schema[column].dataType
    if isinstance(kind, (T.TimestampType, T.TimestampNTZType, T.DateType)):
        return F.unix_millis(_col(column).cast("timestamp")).cast("string"), enqueue_rows.TIME_AS_MS
    if isinstance(kind, (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.DecimalType)):
        return _col(column).cast("string"), enqueue_rows.TIME_AS_MS
    if isinstance(kind, T.StringType):
        return _col(column), enqueue_rows.TIME_AS_TEXT
    raise ValueError(
        f"time column {column!r} is {kind.simpleString()}: use a timestamp, a date, "
        "epoch milliseconds or text like 2030-01-31T12:00:00Z"
    )


def _upstream_ids(df: DataFrame, column: str | None) -> Column:
    """The after column as the UDF takes it: text as is, an array as array<string>."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if column is None:
        return F.lit(None).cast("string")
    kind = df.schema[column].dataType
    if isinstance(kind, T.StringType):
        return _col(column)
    if isinstance(kind, T.ArrayType) and isinstance(kind.elementType, T.StringType):
        return _col(column)
    raise ValueError(
        f"after column {column!r} is {kind.simpleString()}: give the upstream ids as an "
        "array of strings, or as text with ',' between them"
    )


def _upstream_keys(df: DataFrame, column: str, key_columns: Sequence[str],
                   name_column: str | None) -> tuple[Column, Column]:
    """The after-keys column as the UDF takes it: (keys, their queues). Text (one key
    column) as is; an array becomes array<array<string>>, each upstream's key values as
    Spark's CAST(... AS STRING) writes them, as the rows' own keys are read (ids.py). An
    array of structs names the key columns' fields, and may name an upstream's queue in
    a field named like the name column (else the dependent's queue)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    kind = df.schema[column].dataType
    no_names = F.lit(None).cast("array<string>")
    one_key = len(key_columns) == 1
    if isinstance(kind, T.StringType) and one_key:
        return _col(column), no_names
    element = kind.elementType if isinstance(kind, T.ArrayType) else None
    if isinstance(element, T.StructType):
        missing = [c for c in key_columns if c not in element.fieldNames()]
        if missing:
            raise ValueError(f"after keys column {column!r}: its structs lack the key "
                             f"columns {', '.join(map(repr, missing))}")
        keys = F.transform(_col(column), lambda up: F.array(
            *[up.getField(c).cast("string") for c in key_columns]))
        if name_column is not None and name_column in element.fieldNames():
            return keys, F.transform(_col(column),
                                     lambda up: up.getField(name_column).cast("string"))
        return keys, no_names
    if isinstance(element, T.ArrayType):
        return F.transform(_col(column), lambda up: up.cast("array<string>")), no_names
    if element is not None and one_key and not isinstance(element, (T.MapType, T.BinaryType)):
        return F.transform(_col(column), lambda up: F.array(up.cast("string"))), no_names
    raise ValueError(
        f"after keys column {column!r} is {kind.simpleString()}: give each row's upstream "
        f"keys as an array of {'values' if one_key else 'structs with the key columns'}"
        + (", or as text with ',' between them" if one_key else "")
    )


def _tag_values(df: DataFrame, column: str | None) -> Column:
    """The tags column as the UDF takes it: text as is, an array as array<string>."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if column is None:
        return F.lit(None).cast("string")
    kind = df.schema[column].dataType
    if isinstance(kind, T.StringType) or (
        isinstance(kind, T.ArrayType) and isinstance(kind.elementType, T.StringType)
    ):
        return _col(column)
    raise ValueError(
        f"tags column {column!r} is {kind.simpleString()}: give the tags as an array of "
        "strings, or as text with ',' between them"
    )


def _constant_tags(tags: str | Sequence[str] | None) -> tuple[str, ...]:
    """Every row's tags, given as text (``a,b``) or a sequence, checked as -tags."""
    if tags is None:
        return ()
    text = tags if isinstance(tags, str) else ",".join(map(str, tags))
    if not text and not isinstance(tags, str):
        return ()
    try:
        return values.parse_tags(text)
    except EventqError as error:
        raise ValueError(f"tags: {error.text}, got {tags!r}") from None


def _id(df: DataFrame, column: str) -> Column:
    from pyspark.sql import types as T

    if isinstance(df.schema[column].dataType, T.BinaryType):
        return _col(column)
    return _col(column).cast("string")


@dataclass(frozen=True)
class _Fields:
    """Where each job field of an enqueue comes from: ``enqueue``'s arguments of the
    same names, checked against each other (``ValueError`` for those that cannot work
    together, before anything is read)."""

    name: str | None
    name_column: str | None
    id_column: str | None
    key_columns: tuple[str, ...]
    payload_column: str | None
    ttr_ms: int | None
    ttr_column: str | None
    ttl_ms: int | None
    ttl_column: str | None
    priority: int | None
    priority_column: str | None
    max_attempts: int | None
    max_attempts_column: str | None
    max_fails: int | None
    max_fails_column: str | None
    time_column: str | None
    after_column: str | None
    after_keys_column: str | None
    tags: str | Sequence[str] | None
    tags_column: str | None

    def __post_init__(self) -> None:
        _one_of("name", self.name, self.name_column, required=True)
        _one_of("ttr", self.ttr_ms, self.ttr_column, required=True)
        _one_of("ttl", self.ttl_ms, self.ttl_column, required=True)
        _one_of("priority", self.priority, self.priority_column, required=False)
        _one_of("max-attempts", self.max_attempts, self.max_attempts_column, required=False)
        _one_of("max-fails", self.max_fails, self.max_fails_column, required=False)
        if (self.id_column is None) == (not self.key_columns):
            raise ValueError(
                "give the job ids as id_column, or key_columns to derive them from "
                "(deterministic ids make a re-run harmless), not both"
            )
        if self.after_column is not None and self.after_keys_column is not None:
            raise ValueError("give the upstreams as after_column (ids) or after_keys_column "
                             "(keys), not both")
        if self.tags is not None and self.tags_column is not None:
            raise ValueError("give the tags as tags (every row's) or tags_column, not both")
        if self.after_keys_column is not None and not self.key_columns:
            raise ValueError("after_keys_column derives upstream ids as the rows' own are: "
                             "it needs key_columns")

    def columns(self) -> list[str | None]:
        """Every column named (None: a field given otherwise)."""
        return [self.name_column, self.id_column, *self.key_columns, self.payload_column,
                self.ttr_column, self.ttl_column, self.priority_column,
                self.max_attempts_column, self.max_fails_column, self.time_column,
                self.after_column, self.after_keys_column, self.tags_column]


def _check_input(df: DataFrame, fields: _Fields, rejects: str | None,
                 rejects_format: str) -> None:
    """``ValueError`` for an input the fields and the reject output cannot work with."""
    if rejects_format not in REJECT_FORMATS:
        raise ValueError(f"rejects_format must be one of {', '.join(REJECT_FORMATS)}")
    clash = [c for c in REJECT_COLUMNS if c in df.columns]
    if rejects and clash:
        raise ValueError(f"the input has columns named like the reject columns: {clash}")
    _check_columns(df, fields.columns())
    if fields.name is not None:
        try:
            values.parse_name(fields.name)
        except EventqError as error:
            raise ValueError(f"name: {error.text}, got {fields.name!r}") from None


def _upstreams(df: DataFrame, fields: _Fields) -> tuple[Column, Column, str | None]:
    """The upstreams' columns as the UDF takes them (the after cell, its queues) and
    how to read them (``enqueue_rows.AFTER_KEYS``, ``AFTER_IDS``, or None: none)."""
    from pyspark.sql import functions as F

    if fields.after_keys_column is not None:
        value, names = _upstream_keys(df, fields.after_keys_column, fields.key_columns,
                                      fields.name_column)
        return value, names, enqueue_rows.AFTER_KEYS
    kind = enqueue_rows.AFTER_IDS if fields.after_column is not None else None
    return _upstream_ids(df, fields.after_column), F.lit(None).cast("array<string>"), kind


def _spec(fields: _Fields, *, partitions: int, id_namespace: uuid.UUID | str | None,
          now_ms: int | None, time_kind: str | None,
          after_kind: str | None) -> enqueue_rows.EnqueueSpec:
    """How the rows become commands: the constants checked with the protocol's parsers
    (``ValueError`` if one is invalid), and which fields come from columns."""
    return enqueue_rows.EnqueueSpec(
        id_mode=enqueue_rows.ID_FROM_COLUMN if fields.id_column else enqueue_rows.ID_FROM_KEYS,
        namespace=namespace_uuid(id_namespace).bytes,
        partitions=partitions,
        now_ms=now_ms if now_ms is not None else time.time_ns() // 1_000_000,
        name=fields.name,
        ttr_ms=_constant("ttr", values.parse_ttr_ms, fields.ttr_ms),
        ttl_ms=_constant("ttl", values.parse_ttl_ms, fields.ttl_ms),
        priority=_constant("priority", values.parse_priority, fields.priority) or 0,
        max_attempts=_constant("max-attempts", values.parse_max_attempts,
                               fields.max_attempts) or 0,
        max_fails=_constant("max-fails", values.parse_max_fails, fields.max_fails) or 0,
        priority_from_column=fields.priority_column is not None,
        max_attempts_from_column=fields.max_attempts_column is not None,
        max_fails_from_column=fields.max_fails_column is not None,
        time_kind=time_kind,
        after_kind=after_kind,
        key_count=len(fields.key_columns),
        tags=_constant_tags(fields.tags),
        tags_from_column=fields.tags_column is not None,
    )


def _encoder(spec: enqueue_rows.EnqueueSpec) -> Callable[..., Column]:
    """The scalar pandas UDF that encodes rows by ``spec`` (``enqueue_rows.encode_rows``)
    into a struct of ``enqueue_rows.ENCODED_DDL``."""
    from pyspark.sql.functions import pandas_udf
    from pyspark.util import PythonEvalType

    with warnings.catch_warnings():  # "prefer type hints": a partial has none to give
        warnings.simplefilter("ignore", UserWarning)
        encode: Callable[..., Column] = pandas_udf(
            functools.partial(enqueue_rows.encode_rows, spec),
            returnType=enqueue_rows.ENCODED_DDL,
            functionType=PythonEvalType.SQL_SCALAR_PANDAS_UDF,
        )
    return encode


def _udf_arguments(df: DataFrame, fields: _Fields, time_value: Column, after_value: Column,
                   after_names: Column) -> list[Column]:
    """The UDF's 13 arguments, in ``enqueue_rows.encode_rows``'s order (``ValueError``
    for a tags column of no usable type)."""
    from pyspark.sql import functions as F

    key_columns = fields.key_columns
    return [
        _id(df, fields.id_column) if fields.id_column else F.lit(None).cast("string"),
        F.array(*[_col(c).cast("string") for c in key_columns]) if key_columns
        else F.lit(None).cast("array<string>"),
        _text(df, fields.name_column),
        _payload(df, fields.payload_column),
        _text(df, fields.ttr_column),
        _text(df, fields.ttl_column),
        _text(df, fields.priority_column),
        _text(df, fields.max_attempts_column),
        _text(df, fields.max_fails_column),
        time_value,
        after_value,
        after_names,
        _tag_values(df, fields.tags_column),
    ]


def _encode_and_send(df: DataFrame, encoded: Column, *, bootstrap: KafkaTarget, topic: str,
                     partitions: int, rejects: str | None, rejects_format: str,
                     on_phase: Callable[[str], None] | None) -> EnqueueReport:
    """Encode every row (``encoded``: the UDF over its arguments), count the rejects by
    field, write them to ``rejects`` if given, and send the commands as batch records."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    phase = on_phase or (lambda message: None)
    began = time.monotonic()
    processed = df.withColumn(ENCODED, encoded).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        phase("validating and encoding rows")
        counts: dict[str | None, int] = {
            r["field"]: r["count"]
            for r in processed.groupBy(F.col(f"{ENCODED}.reject_field").alias("field"))
            .count()
            .collect()
        }
        total = sum(counts.values())
        rejected_by_field = {f: n for f, n in counts.items() if f is not None}
        rejected = sum(rejected_by_field.values())
        if rejects:
            phase(f"writing {rejected:,} rejected rows to {rejects}")
            (
                processed.where(F.col(f"{ENCODED}.reject_field").isNotNull())
                .select(*[_col(c) for c in df.columns],
                        *[F.col(f"{ENCODED}.{c}").alias(c) for c in REJECT_COLUMNS])
                .write.mode("overwrite")
                .format(rejects_format)
                .save(rejects)
            )
        if total - rejected:
            phase(f"sending {total - rejected:,} commands to {topic}")
            accepted = processed.where(F.col(f"{ENCODED}.reject_field").isNull()).select(
                F.col(f"{ENCODED}.key").alias("key"),
                F.col(f"{ENCODED}.value").alias("value"),
                F.col(f"{ENCODED}.partition").alias("partition"),
            )
            # Batch records per Kafka partition, so the processor applies the jobs a
            # batch at a time (docs/architecture.md, "Batches").
            records = accepted.mapInArrow(rows.batch_records, rows.BATCH_RECORD_DDL)
            kafkaio.write_records(records, bootstrap, topic)
    finally:
        processed.unpersist()
    return EnqueueReport(
        rows=total,
        sent=total - rejected,
        rejected=rejected,
        seconds=time.monotonic() - began,
        topic=topic,
        partitions=partitions,
        rejects_path=rejects,
        rejected_by_field=rejected_by_field,
    )


def enqueue(
    df: DataFrame,
    *,
    bootstrap: KafkaTarget | None = None,
    topic: str | None = None,
    settings: Settings | None = None,
    name: str | None = None,
    name_column: str | None = None,
    id_column: str | None = None,
    key_columns: Sequence[str] | None = None,
    id_namespace: uuid.UUID | str | None = None,
    payload_column: str | None = None,
    ttr_ms: int | None = None,
    ttr_column: str | None = None,
    ttl_ms: int | None = None,
    ttl_column: str | None = None,
    priority: int | None = None,
    priority_column: str | None = None,
    max_attempts: int | None = None,
    max_attempts_column: str | None = None,
    max_fails: int | None = None,
    max_fails_column: str | None = None,
    time_column: str | None = None,
    after_column: str | None = None,
    after_keys_column: str | None = None,
    tags: str | Sequence[str] | None = None,
    tags_column: str | None = None,
    rejects: str | None = None,
    rejects_format: str = "parquet",
    now_ms: int | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> EnqueueReport:
    """Enqueue every row of ``df`` as a job; returns counts (see the module docstring).

    Kafka comes from ``bootstrap``/``topic``, else from ``settings`` (an
    ``eventq.settings.Settings``), else the defaults (local broker, eventq.bulk).
    Each job field is a constant (``ttr_ms=60000``) or a column (``ttr_column="ttr"``):
    name, ttr and ttl are required; priority, max-attempts and max-fails default to 0
    (also for null cells). A non-null ``time_column`` cell makes the row a schedule.
    Without ``payload_column`` the payload is the row as JSON. A row's upstreams come
    from ``after_column`` (their ids) or ``after_keys_column`` (their keys, with
    ``key_columns``); its tags from ``tags_column``, or ``tags`` for every row.
    ``ValueError`` for arguments that cannot work (before anything is read or sent).
    """
    if settings is None:
        from eventq.settings import Settings

        settings = Settings()
    bootstrap = bootstrap or settings.kafka
    topic = topic or settings.bulk_topic
    fields = _Fields(
        name=name, name_column=name_column, id_column=id_column,
        key_columns=tuple(key_columns or ()), payload_column=payload_column,
        ttr_ms=ttr_ms, ttr_column=ttr_column, ttl_ms=ttl_ms, ttl_column=ttl_column,
        priority=priority, priority_column=priority_column,
        max_attempts=max_attempts, max_attempts_column=max_attempts_column,
        max_fails=max_fails, max_fails_column=max_fails_column, time_column=time_column,
        after_column=after_column, after_keys_column=after_keys_column,
        tags=tags, tags_column=tags_column,
    )  # fmt: skip
    _check_input(df, fields, rejects, rejects_format)
    time_value, time_kind = _time(df, time_column)
    after_value, after_names, after_kind = _upstreams(df, fields)
    partitions = kafkaio.topic_partitions(bootstrap, topic)
    spec = _spec(fields, partitions=partitions, id_namespace=id_namespace, now_ms=now_ms,
                 time_kind=time_kind, after_kind=after_kind)
    encode = _encoder(spec)
    arguments = _udf_arguments(df, fields, time_value, after_value, after_names)
    return _encode_and_send(df, encode(*arguments), bootstrap=bootstrap, topic=topic,
                            partitions=partitions, rejects=rejects,
                            rejects_format=rejects_format, on_phase=on_phase)
