"""The state log's row functions, run on Spark's executors: pure, no Spark, no I/O
(pyarrow is imported when a batch is built).

Every ``Job`` field is a column (``JOB_FIELD_KINDS``, and the columns derived from a
job beside them), so a snapshot holds each job whole, and a row read back is the same
``Job`` (``job_of_row``), which the core's digest hashes as the server does:

- ``decode_states``: state-log records -> one row of job columns per live job;
  ``decode_recurrences``: a recurrence's records -> one row per live recurrence.
- ``explode_edges``: the job rows of dependents -> one row per link of the DAG.
- ``hash_jobs``, ``hash_inputs``: job rows, input records -> partial sums of the core's
  digest hashes, which ``combine_digest`` adds up on the driver.

All work on Arrow record batches (``mapInArrow``, eventq/spark/arrow.py).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable, Iterator
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from eventq.core import CodecError, Job, State, decode_input, decode_state
from eventq.core.codec import decode_links, decode_recurrence, encode_links
from eventq.core.digest import StateDigest
from eventq.core.job import (
    JOB_FIELD_NAMES,
    after_ids,
    failure_group,
    failure_time_ms,
    make_job,
    waiting_count,
)
from eventq.core.recurrence import Recurrence, recurrence_name_of
from eventq.core.workflow import input_ids
from eventq.spark.arrow import arrow_schema, ddl_columns, record_batch

if TYPE_CHECKING:
    import pyarrow as pa

# The Spark type of each ``Job`` field: the one table the state log's rows come from.
# Columns follow the dataclass's field order, with the columns derived from a field
# after it (``_DERIVED_KINDS``); a field added to ``Job`` is one line here
# (tests/spark/test_rows.py fails without it). Times up to 2^64-1 are
# decimal(20,0) (docs/protocol.md, "Arguments": a TTL).
JOB_FIELD_KINDS: dict[str, str] = {
    "id": "string", "name": "string", "ttr_ms": "bigint", "ttl_ms": "decimal(20,0)",
    "payload": "binary", "priority": "int", "max_attempts": "int", "max_fails": "int",
    "attempts": "int", "fails": "int", "state": "int", "created_ms": "bigint",
    "scheduled_ms": "bigint", "expires_ms": "decimal(20,0)",
    "lease_deadline_ms": "decimal(20,0)", "result": "binary", "result_ok": "boolean",
    "version": "bigint", "backoff_ms": "int", "returns": "int", "retry_ms": "bigint",
    # A dependent's (docs/workflows.md, "Dependencies"), null for other jobs; its links as
    # the job map holds them (msgpack, eventq.core.codec.encode_links).
    "upstreams": "binary", "added_at": "bigint", "released_ms": "bigint",
    "finished_at": "bigint", "finished_ms": "bigint", "group": "string",
    # A job's tags (docs/workflows.md, "Tags") in -tags order, null for a job without.
    "tags": "array<string>",
    # A retry's (docs/workflows.md, "Failure groups and retry"), null/false until one.
    "delayed_ms": "bigint", "early": "boolean",
    # A dependent's scope (docs/security.md, "Queue-name prefixes": its token's prefix),
    # null for other jobs.
    "scope": "string",
}  # fmt: skip
# Columns written after a field's, derived from the job (never read back: job_of_row
# takes the fields). A dependent's upstreams as the protocol shows them
# (docs/workflows.md, "Dependencies": the ids of -after in order; ``waiting``, those not
# COMPLETED, 0 once released), null for a job without upstreams like ``upstreams``.
_DERIVED_KINDS: dict[str, tuple[tuple[str, str], ...]] = {
    "state": (("state_name", "string"),),
    "upstreams": (("after", "array<string>"), ("waiting", "int")),
    # A FAILED job's failure group and failure time (job.failure_group, failure_time_ms:
    # the time of its record's event for a job without upstreams), null otherwise.
    "group": (("failure_group", "string"), ("failed_ms", "bigint")),
}


def _job_columns() -> tuple[tuple[str, str], ...]:
    columns: list[tuple[str, str]] = []
    for name in JOB_FIELD_NAMES:
        columns.append((name, JOB_FIELD_KINDS[name]))
        columns.extend(_DERIVED_KINDS.get(name, ()))
    return tuple(columns)


_COLUMN_KINDS = _job_columns()
# Fields a Job holds as None when unset (their annotation admits None).
_OPTIONAL_FIELDS = frozenset(
    field.name for field in dataclasses.fields(Job) if "None" in str(field.type))
JOB_COLUMNS = tuple(name for name, _ in _COLUMN_KINDS)
JOB_DDL = ", ".join(f"{name} {kind}" for name, kind in _COLUMN_KINDS)
DECODED_STATE_DDL = JOB_DDL + ", undecodable string"


def _to_column(value: Any, kind: str) -> Any:
    if value is None:
        return None
    if kind == "array<string>":  # a job's tags; none: null
        return list(value) if value else None
    if isinstance(value, tuple):  # a dependent's links; none: null
        return encode_links(value) if value else None
    if isinstance(value, uuid.UUID):
        return str(value)  # canonical text
    if isinstance(value, State):
        return int(value)
    if kind == "decimal(20,0)":
        return Decimal(value)
    return value


def job_row(job: Job, record_ms: int | None = None) -> dict[str, Any]:
    """A job as a row of ``JOB_COLUMNS`` (ids as canonical text, ms as integers);
    ``record_ms``: the broker time of its state record's event (a FAILED job's failure
    time when it has no upstreams)."""
    row = {name: _to_column(getattr(job, name), JOB_FIELD_KINDS[name])
           for name in JOB_FIELD_NAMES}
    row["state_name"] = job.state.name.lower()
    row["after"] = [str(upstream) for upstream in after_ids(job)] if job.upstreams else None
    row["waiting"] = waiting_count(job) if job.upstreams else None
    row["failure_group"] = failure_group(job)
    row["failed_ms"] = None if record_ms is None else failure_time_ms(job, record_ms)
    return row


def _of_column(name: str, value: Any) -> Any:
    if value is None:
        return None
    if name == "id":
        return uuid.UUID(value)
    if name == "state":
        return State(value)
    if name == "upstreams":
        return decode_links(bytes(value))
    kind = JOB_FIELD_KINDS[name]
    if kind == "array<string>":
        return tuple(value)
    if kind == "binary":
        return bytes(value)
    if kind in ("int", "bigint", "decimal(20,0)"):
        return int(value)
    return value


def job_of_row(row: dict[str, Any]) -> Job:
    """The ``Job`` a row of ``JOB_COLUMNS`` describes (validated by ``Job`` itself). A
    column a row lacks or leaves empty where its field cannot be None (a snapshot
    written before that field existed) takes the field's default."""
    return make_job({name: _of_column(name, row.get(name)) for name in JOB_FIELD_NAMES
                     if row.get(name) is not None or name in _OPTIONAL_FIELDS})


def decode_states(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow: (key, value, partition, offset) of the newest state record of each
    key -> ``DECODED_STATE_DDL`` rows; an undecodable record gives a row with only
    ``undecodable`` set (topic position and error), never an exception."""
    schema = arrow_schema(DECODED_STATE_DDL)
    for batch in batches:
        data = batch.to_pydict()
        rows: list[dict[str, Any]] = []
        for value, partition, offset in zip(data["value"], data["partition"], data["offset"]):
            try:
                event, job = decode_state(value)
            except ValueError as error:  # CodecError
                rows.append({"undecodable": f"partition {partition} offset {offset}: {error}"})
                continue
            if job is not None:  # a record without a job holds no live job
                rows.append(job_row(job, event.at_ms))
        yield record_batch(rows, schema)


# The edges of the jobs' DAG (docs/workflows.md, "Dependencies"), one row per link of
# a live dependent: the upstream, the dependent (its queue and state), the link's place
# in -after (from 1), and the upstream's latest outcome the dependent applied
# (unfinished: none yet, or retried since; completed with its broker time).
EDGE_DDL = (
    "upstream string, dependent string, name string, position int, outcome string, "
    "completed_ms bigint, dependent_state string"
)


def edge_rows(dependent: str, name: str, state: str, links: bytes) -> list[dict[str, Any]]:
    """The edges of one dependent, from its ``upstreams`` column (encode_links)."""
    return [
        {"upstream": str(link.id), "dependent": dependent, "name": name, "position": number,
         "outcome": link.outcome.word, "completed_ms": link.completed_ms,
         "dependent_state": state}
        for number, link in enumerate(decode_links(links), 1)
    ]


def explode_edges(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow over job rows (id, name, state_name, upstreams) -> ``EDGE_DDL`` rows,
    one per upstream of each dependent (a job without upstreams has none)."""
    schema = arrow_schema(EDGE_DDL)
    for batch in batches:
        data = batch.to_pydict()
        out: list[dict[str, Any]] = []
        for job_id, name, state, links in zip(data["id"], data["name"], data["state_name"],
                                              data["upstreams"]):
            if links is not None:
                out.extend(edge_rows(job_id, name, state, bytes(links)))
        yield record_batch(out, schema)


PARTIAL_DIGEST_DDL = "sum binary, count bigint"


def hash_jobs(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow: rows of ``JOB_COLUMNS`` -> one (sum of job hashes mod 2^256, count)
    per batch; the driver adds them up (``combine_digest``)."""
    schema = arrow_schema(PARTIAL_DIGEST_DDL)
    for batch in batches:
        digest = StateDigest(job_of_row(row) for row in batch.to_pylist())
        total, count = _digest_parts(digest)
        yield record_batch([{"sum": total.to_bytes(32, "big"), "count": count}], schema)


def hash_inputs(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow: the newest (key, value) of each input record beside the dependents
    (docs/workflows.md, "Inputs") -> one (sum of input hashes mod 2^256, count 0) per
    batch: the digest covers inputs as ``inspect digest`` does (eventq/core/digest.py),
    and counts only jobs. An undecodable one is left out, as the server leaves it."""
    schema = arrow_schema(PARTIAL_DIGEST_DDL)
    for batch in batches:
        digest = StateDigest()
        for row in batch.to_pylist():
            try:
                dependent, upstream = input_ids(bytes(row["key"]))
                entry = decode_input(bytes(row["value"]))
            except (CodecError, ValueError):
                continue
            digest.add_input(dependent, upstream, entry)
        yield record_batch([{"sum": digest.sum.to_bytes(32, "big"), "count": 0}], schema)


def _digest_parts(digest: StateDigest) -> tuple[int, int]:
    # StateDigest keeps (sum mod 2^256, count) in two slots and offers no public way to
    # read or merge them; these two helpers are the only places that reach inside.
    return digest._sum, digest._count


def combine_digest(parts: list[tuple[bytes, int]]) -> str:
    """The core's hex state digest of jobs whose partial (sum, count) are ``parts``."""
    digest = StateDigest()
    total = sum(int.from_bytes(bytes(s), "big") for s, _ in parts)
    digest._sum = total % (1 << 256)
    digest._count = sum(int(c) for _, c in parts)
    return digest.hexdigest()


# A recurrence's record beside the jobs (docs/workflows.md, "Recurring jobs";
# eventq/core/recurrence.py), one row per live recurrence: its definition (``recur``'s
# fields, ``created_ms`` its broker time), the last slot fired (``fired_ms``, that
# slot's due time, null before the first; ``fired_slot``, the slot when it is one of
# the current every), the first slot allowed to fire, and the next slot and when it is
# due (the core's ``Recurrence.next_slot``/``next_ms``: ``inspect recurring``'s
# ``next``, in the past while a due slot waits for its timer). Not in the state digest
# (eventq/core/digest.py covers jobs and inputs; docs/architecture.md, "Recurring jobs").
RECURRENCE_DDL = (
    "name string, job_name string, every_ms bigint, next_ms bigint, next_slot bigint, "
    "fired_ms bigint, fired_slot bigint, first_slot bigint, created_ms bigint, "
    "ttr_ms bigint, ttl_ms decimal(20,0), priority int, max_attempts int, max_fails int, "
    "backoff_ms int, tags array<string>, payload binary, payload_bytes int, version bigint"
)
RECURRENCE_COLUMNS = tuple(name for name, _ in ddl_columns(RECURRENCE_DDL))
DECODED_RECURRENCE_DDL = RECURRENCE_DDL + ", undecodable string"


def recurrence_row(record: Recurrence) -> dict[str, Any]:
    """A recurrence's record as a row of ``RECURRENCE_COLUMNS`` (tags: null for none,
    as a job's row has them)."""
    d = record.definition
    return {
        "name": d.name, "job_name": d.job_name, "every_ms": d.every_ms,
        "next_ms": record.next_ms, "next_slot": record.next_slot,
        "fired_ms": record.fired_ms, "fired_slot": record.fired_slot,
        "first_slot": record.first_slot, "created_ms": d.created_ms, "ttr_ms": d.ttr_ms,
        "ttl_ms": Decimal(d.ttl_ms), "priority": d.priority,
        "max_attempts": d.max_attempts, "max_fails": d.max_fails,
        "backoff_ms": d.backoff_ms, "tags": list(d.tags) if d.tags else None,
        "payload": d.payload, "payload_bytes": len(d.payload), "version": record.version,
    }  # fmt: skip


def _recurrence_of(key: bytes, value: bytes) -> Recurrence:
    """The record of a recurrence's table key (``recurrence_table_key``); ValueError
    (CodecError) when it cannot be decoded or holds another recurrence than its key
    names (no fold writes one)."""
    record = decode_recurrence(value)
    named = recurrence_name_of(key)
    if record.name != named:
        raise ValueError(f"the record of recurrence {record.name!r} under the key of {named!r}")
    return record


def decode_recurrences(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow: (key, value, partition, offset) of the newest record of each
    recurrence key -> ``DECODED_RECURRENCE_DDL`` rows; an undecodable record gives a row
    with only ``undecodable`` set (topic position and error), as ``decode_states``."""
    schema = arrow_schema(DECODED_RECURRENCE_DDL)
    for batch in batches:
        data = batch.to_pydict()
        out = []
        for key, value, partition, offset in zip(data["key"], data["value"],
                                                 data["partition"], data["offset"]):
            try:
                out.append(recurrence_row(_recurrence_of(bytes(key), bytes(value))))
            except ValueError as error:  # CodecError, or a name that is no name
                out.append({"undecodable": f"partition {partition} offset {offset}: {error}"})
        yield record_batch(out, schema)

