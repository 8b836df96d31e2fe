"""The row functions Spark runs on its executors: pure, no Spark, no I/O.

Everything here is a plain function of its input batches (and of a frozen spec built
on the driver), importable on any executor that has eventq installed, and built only
from eventq's own core and protocol code, so bulk enqueue validates and encodes exactly
as the gateway does and a replay decodes and decides exactly as the processor does:

- ``encode_rows``: one batch of input rows (pandas Series) -> add/schedule command
  records (Kafka key, msgpack value, partition) or a reject reason (the body of the
  scalar pandas UDF of ``eventq.spark.enqueue``).
- ``decode_states``: state-log records -> one row of job columns per live job;
  ``decode_recurrences``: a recurrence's records -> one row per live recurrence.
- ``hash_jobs``: job columns -> partial sums of the core's per-job digest hashes.
- ``batch_records``: encoded commands -> batch records of the command log, grouped
  per Kafka partition (eventq/core/batch.py).
- ``explode_commands``: command-log records (single or batch) -> one row per command
  at its position.
- ``fold_commands``: the commands of each job in position order, decoded and
  decided with the core's state machine -> one outcome row per command (wait and run
  times of attempts); a recurrence's commands likewise with the core's
  ``step_recurrence`` (the slots its fires fired).

The log-side functions work on Arrow record batches (``mapInArrow``): Arrow keeps
nullable 64-bit integers exact, where pandas would turn them into floats.
"""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import msgpack

from eventq.core import (
    Add,
    CodecError,
    Job,
    Schedule,
    State,
    decode_command,
    decode_input,
    decode_state,
    encode_command,
)
from eventq.core.batch import (
    BATCH_RECORD_BYTES,
    MAX_BATCH_COMMANDS,
    NOTHING_ADMITTED,
    BatchBuilder,
    admits,
    is_batch,
    offset_of,
    position,
    read_record,
)
from eventq.core.codec import COMMAND_FIELDS, decode_links, decode_recurrence, encode_links
from eventq.core.commands import (
    NO_JOB_COMMANDS,
    RECURRENCE_COMMANDS,
    CommandType,
    RecurrenceCommand,
    recurrence_key,
)
from eventq.core.digest import StateDigest
from eventq.core.fold import COMMAND_NAMES, JobFold
from eventq.core.job import (
    JOB_FIELD_NAMES,
    after_ids,
    failure_group,
    failure_time_ms,
    make_job,
    waiting_count,
)
from eventq.core.machine import Rejected
from eventq.core.partitioner import job_key, partition_for_key
from eventq.core.recurrence import Changed, Recurrence, recurrence_name_of
from eventq.core.step import step_recurrence
from eventq.core.workflow import input_ids
from eventq.errors import INVALID_AFTER, INVALID_TAGS, EventqError
from eventq.limits import MAX_AFTER_IDS, MAX_TAG_BYTES, MAX_TAGS, MAX_TIME_MS, MIN_TIME_MS
from eventq.protocol.values import (
    parse_after,
    parse_id,
    parse_max_attempts,
    parse_max_fails,
    parse_name,
    parse_priority,
    parse_tag,
    parse_tags,
    parse_time_ms,
    parse_ttl_ms,
    parse_ttr_ms,
)
from eventq.spark.ids import derive_job_id

# ------------------------------------------------------------------------ enqueue

ID_FROM_COLUMN = "column"
ID_FROM_KEYS = "keys"
TIME_AS_MS = "ms"  # integral column or a Spark timestamp/date turned into epoch ms
TIME_AS_TEXT = "text"  # the protocol's YYYY-MM-DDTHH:MM:SS[.fff]Z, or epoch ms digits
# A row's upstreams (docs/workflows.md, "Dependencies"), from one column: the upstreams' ids,
# or their keys, from which their ids are derived as the rows' own are (ids.py). The
# cell is text (the protocol's spelling: ``,`` between elements, as a CSV file gives
# it) or an array; null or an empty array: no upstreams.
AFTER_IDS = "ids"
AFTER_KEYS = "keys"
AFTER_SEPARATOR = ","  # the protocol's, between -after's ids (values.parse_after)
# A row's tags (docs/workflows.md, "Tags"), from one column: text in the protocol's
# spelling (``,`` between the tags, as -tags and a CSV cell give them) or an array of
# strings; null or an empty array: no tags. Or the same tags for every row (a constant).
TAGS_SEPARATOR = ","  # the protocol's, between -tags's tags (values.parse_tags)

# The struct the pandas UDF returns, one per input row.
ENCODED_DDL = (
    "key binary, value binary, partition int, job_id string, "
    "reject_field string, reject_reason string"
)
ENCODED_FIELDS = ("key", "value", "partition", "job_id", "reject_field", "reject_reason")


@dataclasses.dataclass(frozen=True)
class EnqueueSpec:
    """How the rows of one enqueue become commands (built and checked on the driver).

    A field is either a constant (already validated) or comes from a column: ``None``
    for name/ttr/ttl, ``*_from_column`` for priority/max-attempts/max-fails (whose null
    cells, like an absent flag, mean 0).
    """

    id_mode: str  # ID_FROM_COLUMN or ID_FROM_KEYS
    namespace: bytes  # 16 bytes, for ID_FROM_KEYS
    partitions: int  # of the command topic
    now_ms: int  # the driver's clock at start: schedule's "time + ttl in the future"
    name: str | None = None  # None: from the name column
    ttr_ms: int | None = None  # None: from the ttr column
    ttl_ms: int | None = None  # None: from the ttl column
    priority: int = 0
    max_attempts: int = 0
    max_fails: int = 0
    priority_from_column: bool = False
    max_attempts_from_column: bool = False
    max_fails_from_column: bool = False
    time_kind: str | None = None  # None: no time column (always add)
    after_kind: str | None = None  # AFTER_IDS, AFTER_KEYS; None: no upstreams column
    tags: tuple[str, ...] = ()  # every row's tags (already validated), unless from a column
    tags_from_column: bool = False
    key_count: int = 0  # key columns, for ID_FROM_KEYS (an upstream's key has as many)


class Reject(Exception):
    """A row that would be refused: ``field`` and a reason that says why (and the job
    id, when the row got as far as having one)."""

    def __init__(self, field: str, reason: str, job_id: uuid.UUID | None = None) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason
        self.job_id = job_id


# The core's names of fields (in its ValueErrors) -> the names rejects use.
_CORE_FIELDS = {"ttr_ms": "ttr", "ttl_ms": "ttl", "time_ms": "time",
                "max_attempts": "max-attempts", "max_fails": "max-fails"}


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _parsed(field: str, parse, raw: object) -> Any:
    """``parse(str(raw))``; a protocol ClientError becomes a Reject with its text."""
    text = raw if isinstance(raw, str) else str(raw)
    try:
        return parse(text)
    except EventqError as error:
        raise Reject(field, f"{error.text or error.code}, got {_shown(raw)}") from None


def _required(field: str, parse, raw: object) -> Any:
    if raw is None:
        raise Reject(field, "missing (null)")
    return _parsed(field, parse, raw)


def _flag(field: str, parse, from_column: bool, raw: object, constant: int) -> int:
    """An optional flag: the constant, or the column's cell (null: 0, as if absent)."""
    if not from_column:
        return constant
    return 0 if raw is None else _parsed(field, parse, raw)


_MS = re.compile(r"-?[0-9]{1,16}")


def _time_ms(kind: str, raw: object) -> int:
    text = str(raw)
    if kind == TIME_AS_TEXT and _MS.fullmatch(text) is None:
        return _parsed("time", parse_time_ms, raw)
    if _MS.fullmatch(text) is None or not MIN_TIME_MS <= int(text) <= MAX_TIME_MS:
        raise Reject("time", f"Invalid Time, got {_shown(raw)} (epoch ms)")
    return int(text)


def _job_id(spec: EnqueueSpec, raw_id: object, name: str, key: object) -> uuid.UUID:
    if spec.id_mode == ID_FROM_KEYS:
        values = [None if v is None else str(v) for v in key]
        return derive_job_id(uuid.UUID(bytes=spec.namespace), name, values)
    if raw_id is None:
        raise Reject("id", "missing (null)")
    if isinstance(raw_id, (bytes, bytearray, memoryview)):
        raw = bytes(raw_id)
        if len(raw) != 16:
            raise Reject("id", f"Invalid ID, got {len(raw)} bytes (16 expected)")
        value = uuid.UUID(bytes=raw)
        if value.version != 4 or value.variant != uuid.RFC_4122:
            raise Reject("id", f"Invalid ID, got {value} (not a version-4 UUID)")
        return value
    return _parsed("id", lambda text: parse_id(text, require_v4=True), raw_id)


def _after_fault(elements: list) -> str:
    """Which rule of -after a list of id spellings breaks (docs/workflows.md, "Values and checks"),
    said in the reject's reason; "" when it finds none. The verdict is
    the protocol's own (``parse_after``): this only explains it."""
    if len(elements) > MAX_AFTER_IDS:
        return f"{len(elements)} upstreams, at most {MAX_AFTER_IDS}"
    seen: dict[uuid.UUID, int] = {}
    for number, element in enumerate(elements, 1):
        if element is None or element == "":
            return f"upstream {number} is empty"
        try:
            value = parse_id(str(element), require_v4=True)
        except EventqError:
            return f"upstream {number} is not a version-4 UUID"
        if value in seen:
            return f"upstream {number} repeats upstream {seen[value]}"
        seen[value] = number
    return ""


def _invalid_after(fault: str, raw: object) -> Reject:
    said = f" ({fault})" if fault else ""
    return Reject("after", f"{INVALID_AFTER}{said}, got {_shown(_plain(raw))}")


def _plain(raw: object) -> object:
    """A cell as its reason shows it: an array (numpy's, from Arrow) as a list."""
    if raw is None or isinstance(raw, (str, bytes)):
        return raw
    return [_plain(element) for element in _as_list(raw)]


def _as_list(raw: object) -> list:
    """An array cell (a numpy array from Arrow, or a list) as a list."""
    return list(raw)  # type: ignore[call-overload]  # an ndarray or a list: iterable


def _protocol_after(elements: list, raw: object) -> tuple[uuid.UUID, ...]:
    """The ids of ``elements`` by the protocol's rule for -after (values.parse_after),
    or a Reject that says which rule they break. An element holding the separator would
    read as two: it is no id."""
    if any(e is None or AFTER_SEPARATOR in str(e) for e in elements):
        raise _invalid_after(_after_fault(elements), raw)
    try:
        return parse_after(AFTER_SEPARATOR.join(map(str, elements)))
    except EventqError:
        raise _invalid_after(_after_fault(elements), raw) from None


def _upstream_ids(raw: object) -> tuple[uuid.UUID, ...]:
    if isinstance(raw, str):
        return _protocol_after(raw.split(AFTER_SEPARATOR), raw)
    return _protocol_after(_as_list(raw), raw)


def _upstream_name(names: object, index: int, name: str, raw: object) -> str:
    """An upstream's queue: its own (a key struct's field named like the name column),
    else the dependent's."""
    own = None if names is None else _as_list(names)[index]
    if own is None:
        return name
    try:
        return parse_name(str(own))
    except EventqError as error:
        raise _invalid_after(f"upstream {index + 1}'s queue: {error.text}", raw) from None


def _upstream_keys(spec: EnqueueSpec, raw: object, names: object, name: str,
                   ) -> tuple[uuid.UUID, ...]:
    """The ids of upstreams named by their keys: text (one key column: its values with
    ``,`` between them) or an array of keys, each of as many values as key columns."""
    if isinstance(raw, str):
        keys: list = [None if value == "" else [value] for value in raw.split(AFTER_SEPARATOR)]
    else:
        keys = [None if key is None else _as_list(key) for key in _as_list(raw)]
    namespace = uuid.UUID(bytes=spec.namespace)
    ids = []
    for index, key in enumerate(keys):
        if key is None:
            raise _invalid_after(f"upstream {index + 1} is empty", raw)
        if len(key) != spec.key_count:
            raise _invalid_after(f"upstream {index + 1} has {len(key)} key values, "
                                 f"not {spec.key_count}", raw)
        values = [None if value is None else str(value) for value in key]
        upstream_name = _upstream_name(names, index, name, raw)
        ids.append(str(derive_job_id(namespace, upstream_name, values)))
    return _protocol_after(ids, raw)  # at most 100, all distinct: the protocol's rule


def _after(spec: EnqueueSpec, raw: object, names: object, job_id: uuid.UUID,
           name: str) -> tuple[uuid.UUID, ...]:
    """A row's upstreams, checked as the gateway checks -after (docs/workflows.md, "Values and
    checks": 1-100 distinct version-4 ids, none the job's own)."""
    if spec.after_kind is None or raw is None:
        return ()
    if not isinstance(raw, str) and len(_as_list(raw)) == 0:
        return ()  # an empty array: a job without upstreams
    if spec.after_kind == AFTER_KEYS:
        ids = _upstream_keys(spec, raw, names, name)
    else:
        ids = _upstream_ids(raw)
    if job_id in ids:  # the grammar's last check of -after (grammar._after_excludes_own_id)
        raise _invalid_after(f"upstream {ids.index(job_id) + 1} is the job itself", raw)
    return ids


def _tags_fault(elements: list) -> str:
    """Which rule of -tags a list of tags breaks (docs/workflows.md, "Values and checks"), said in
    the reject's reason; "" when it finds none. The verdict is the
    protocol's own (``parse_tags``): this only explains it."""
    if len(elements) > MAX_TAGS:
        return f"{len(elements)} tags, at most {MAX_TAGS}"
    seen: dict[str, int] = {}
    for number, element in enumerate(elements, 1):
        if element is None or element == "":
            return f"tag {number} is empty"
        try:
            parse_tag(str(element))
        except EventqError:
            return f"tag {number} is not 1-{MAX_TAG_BYTES} bytes of [A-Za-z0-9_.-]"
        if element in seen:
            return f"tag {number} repeats tag {seen[element]}"
        seen[element] = number
    return ""


def _tags(spec: EnqueueSpec, raw: object) -> tuple[str, ...]:
    """A row's tags, checked as the gateway checks -tags (1-16 distinct tags of 1-64
    bytes of ``[A-Za-z0-9_.-]``); null or an empty array: none."""
    if not spec.tags_from_column:
        return spec.tags
    if raw is None:
        return ()
    elements = raw.split(TAGS_SEPARATOR) if isinstance(raw, str) else _as_list(raw)
    if not isinstance(raw, str) and not elements:
        return ()  # an empty array: a job without tags
    # An element holding the separator would read as two: it is no tag.
    if all(e is not None and TAGS_SEPARATOR not in str(e) for e in elements):
        try:
            return parse_tags(TAGS_SEPARATOR.join(map(str, elements)))
        except EventqError:
            pass
    fault = _tags_fault(elements)
    said = f" ({fault})" if fault else ""
    raise Reject("tags", f"{INVALID_TAGS}{said}, got {_shown(_plain(raw))}")


def encode_row(
    spec: EnqueueSpec,
    raw_id: object,
    key: object,
    name: object,
    payload: object,
    ttr: object,
    ttl: object,
    priority: object,
    max_attempts: object,
    max_fails: object,
    time: object,
    after: object = None,
    after_names: object = None,
    tags: object = None,
) -> tuple[bytes, bytes, int, str]:
    """(Kafka key, command record, partition, job id) of one row, or raise Reject.

    Checks run in the protocol's order (id, name, ttr, ttl, time, size, flags, after, tags;
    with key columns the name comes first, the id is derived from it); then the core's
    command validates the whole (its ValueError is a Reject too).
    """
    job_id = _job_id(spec, raw_id, "", key) if spec.id_mode == ID_FROM_COLUMN else None
    try:
        name = spec.name if spec.name is not None else _required("name", parse_name, name)
        if job_id is None:
            job_id = _job_id(spec, raw_id, name, key)
        ttr_ms = spec.ttr_ms if spec.ttr_ms is not None else _required("ttr", parse_ttr_ms, ttr)
        ttl_ms = spec.ttl_ms if spec.ttl_ms is not None else _required("ttl", parse_ttl_ms, ttl)
        time_ms = None
        if spec.time_kind is not None and time is not None:
            time_ms = _time_ms(spec.time_kind, time)
            if time_ms + ttl_ms <= spec.now_ms:
                raise Reject("time", "Invalid Time, time + ttl is already past")
        data = b"" if payload is None else bytes(payload)
        prio = _flag("priority", parse_priority, spec.priority_from_column, priority,
                     spec.priority)
        attempts = _flag("max-attempts", parse_max_attempts, spec.max_attempts_from_column,
                         max_attempts, spec.max_attempts)
        fails = _flag("max-fails", parse_max_fails, spec.max_fails_from_column, max_fails,
                      spec.max_fails)
        upstreams = _after(spec, after, after_names, job_id, name)
        job_tags = _tags(spec, tags)
        try:
            if time_ms is None:
                command: Add | Schedule = Add(
                    job_id, name, ttr_ms, ttl_ms, data, prio, attempts, fails, after=upstreams,
                    tags=job_tags,
                )
            else:
                command = Schedule(
                    job_id, name, ttr_ms, ttl_ms, time_ms, data, prio, attempts, fails,
                    after=upstreams, tags=job_tags,
                )
        except ValueError as error:  # the core's own validation (e.g. payload over 1 MiB)
            field = str(error).split(" ", 1)[0]
            raise Reject(_CORE_FIELDS.get(field, field), str(error)) from None
    except Reject as reject:
        reject.job_id = job_id
        raise
    key_bytes = job_key(job_id)
    partition = partition_for_key(key_bytes, spec.partitions)
    return key_bytes, encode_command(command), partition, str(job_id)


def encode_rows(spec: EnqueueSpec, *columns):
    """The pandas UDF body: 13 Series (id, key, name, payload, ttr, ttl, priority,
    max-attempts, max-fails, time, after, after's queues, tags) -> a DataFrame of
    ``ENCODED_FIELDS``."""
    import pandas as pd

    out: dict[str, list] = {field: [] for field in ENCODED_FIELDS}
    for row in zip(*(column.tolist() for column in columns)):
        try:
            key, value, partition, job_id = encode_row(spec, *row)
            field = reason = None
        except Reject as reject:
            key = value = partition = None
            job_id = None if reject.job_id is None else str(reject.job_id)
            field, reason = reject.field, reject.reason
        out["key"].append(key)
        out["value"].append(value)
        out["partition"].append(partition)
        out["job_id"].append(job_id)
        out["reject_field"].append(field)
        out["reject_reason"].append(reason)
    frame = pd.DataFrame(out)
    frame["partition"] = pd.array(out["partition"], dtype="Int32")
    return frame


# --------------------------------------------------------------------- state log

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
    # A dependent's (docs/workflows.md), null for other jobs; its links as the job map
    # holds them (msgpack, eventq.core.codec.encode_links).
    "upstreams": "binary", "added_at": "bigint", "released_ms": "bigint",
    "finished_at": "bigint", "finished_ms": "bigint", "group": "string",
    # A job's tags (docs/workflows.md, "Tags") in -tags order, null for a job without.
    "tags": "array<string>",
    # A retry's (docs/workflows.md, "Failure groups and retry"), null/false until one.
    "delayed_ms": "bigint", "early": "boolean",
    # A dependent's scope (docs/security.md: its token's prefix), null for other jobs.
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
_U64_COLUMNS = tuple(name for name, kind in _COLUMN_KINDS if kind == "decimal(20,0)")


def _arrow_schema(ddl: str):
    import pyarrow as pa

    kinds = {
        "string": pa.string(), "binary": pa.binary(), "bigint": pa.int64(), "int": pa.int32(),
        "boolean": pa.bool_(), "decimal(20,0)": pa.decimal128(20, 0),
        "array<string>": pa.list_(pa.string()),
    }  # fmt: skip
    fields = []
    for part in re.split(r",\s*(?![^()]*\))", ddl):
        name, kind = part.strip().split(" ", 1)
        fields.append(pa.field(name, kinds[kind.strip()]))
    return pa.schema(fields)


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


def explode_edges(batches: Iterator) -> Iterator:
    """mapInArrow over job rows (id, name, state_name, upstreams) -> ``EDGE_DDL`` rows,
    one per upstream of each dependent (a job without upstreams has none)."""
    schema = _arrow_schema(EDGE_DDL)
    for batch in batches:
        data = batch.to_pydict()
        out: list[dict[str, Any]] = []
        for job_id, name, state, links in zip(data["id"], data["name"], data["state_name"],
                                              data["upstreams"]):
            if links is not None:
                out.extend(edge_rows(job_id, name, state, bytes(links)))
        yield _batch(out, schema)


def _batch(rows: list[dict[str, Any]], schema):
    import pyarrow as pa

    columns = {field.name: [row.get(field.name) for row in rows] for field in schema}
    return pa.RecordBatch.from_pydict(columns, schema=schema)


def decode_states(batches: Iterator) -> Iterator:
    """mapInArrow: (key, value, partition, offset) of the newest state record of each
    key -> ``DECODED_STATE_DDL`` rows; an undecodable record gives a row with only
    ``undecodable`` set (topic position and error), never an exception."""
    schema = _arrow_schema(DECODED_STATE_DDL)
    for batch in batches:
        data = batch.to_pydict()
        rows = []
        for value, partition, offset in zip(data["value"], data["partition"], data["offset"]):
            try:
                event, job = decode_state(value)
            except ValueError as error:  # CodecError
                rows.append({"undecodable": f"partition {partition} offset {offset}: {error}"})
                continue
            if job is not None:  # a record without a job holds no live job
                rows.append(job_row(job, event.at_ms))
        yield _batch(rows, schema)


PARTIAL_DIGEST_DDL = "sum binary, count bigint"


def hash_jobs(batches: Iterator) -> Iterator:
    """mapInArrow: rows of ``JOB_COLUMNS`` -> one (sum of job hashes mod 2^256, count)
    per batch; the driver adds them up (``combine_digest``)."""
    schema = _arrow_schema(PARTIAL_DIGEST_DDL)
    for batch in batches:
        digest = StateDigest(job_of_row(row) for row in batch.to_pylist())
        total, count = _digest_parts(digest)
        yield _batch([{"sum": total.to_bytes(32, "big"), "count": count}], schema)


def hash_inputs(batches: Iterator) -> Iterator:
    """mapInArrow: the newest (key, value) of each input record beside the dependents
    (docs/workflows.md, "Inputs") -> one (sum of input hashes mod 2^256, count 0) per
    batch: the digest covers inputs as ``inspect digest`` does (eventq/core/digest.py),
    and counts only jobs. An undecodable one is left out, as the server leaves it."""
    schema = _arrow_schema(PARTIAL_DIGEST_DDL)
    for batch in batches:
        digest = StateDigest()
        for row in batch.to_pylist():
            try:
                dependent, upstream = input_ids(bytes(row["key"]))
                entry = decode_input(bytes(row["value"]))
            except (CodecError, ValueError):
                continue
            digest.add_input(dependent, upstream, entry)
        yield _batch([{"sum": digest.sum.to_bytes(32, "big"), "count": 0}], schema)


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
RECURRENCE_COLUMNS = tuple(part.strip().split(" ", 1)[0]
                           for part in re.split(r",\s*(?![^()]*\))", RECURRENCE_DDL))
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


def decode_recurrences(batches: Iterator) -> Iterator:
    """mapInArrow: (key, value, partition, offset) of the newest record of each
    recurrence key -> ``DECODED_RECURRENCE_DDL`` rows; an undecodable record gives a row
    with only ``undecodable`` set (topic position and error), as ``decode_states``."""
    schema = _arrow_schema(DECODED_RECURRENCE_DDL)
    for batch in batches:
        data = batch.to_pydict()
        out = []
        for key, value, partition, offset in zip(data["key"], data["value"],
                                                 data["partition"], data["offset"]):
            try:
                out.append(recurrence_row(_recurrence_of(bytes(key), bytes(value))))
            except ValueError as error:  # CodecError, or a name that is no name
                out.append({"undecodable": f"partition {partition} offset {offset}: {error}"})
        yield _batch(out, schema)


# ------------------------------------------------------------------- command log

# One row per command. A recurrence's command (recur, unrecur, fire: keyed
# ``recur:<name>``, its ``job_id`` here) has ``recurrence`` set, ``queue`` the queue its
# slots' jobs go to (its definition's, the last known once unrecurred), and for an
# accepted fire the slot it fired (``slot``: the latest due, which may be later than
# the one the timer asked for) and that slot's due time (``due_ms``); ``next_ms``, when
# the recurrence's next slot is due after the command (null: there is no recurrence).
OUTCOME_DDL = (
    "queue string, job_id string, command string, outcome string, event string, "
    "detail string, at_ms bigint, attempt int, wait_ms bigint, run_ms bigint, "
    "recurrence string, slot bigint, due_ms bigint, next_ms bigint"
)


COMMAND_DDL = "job_id string, partition int, position bigint, at_ms bigint, value binary"


# The key of a recurrence command's name (``rn``), from the codec's table.
_RECURRENCE_NAME_KEY = next(
    field.key for field in COMMAND_FIELDS[CommandType.FIRE] if field.attr == "name")


def _job_id_of(data: bytes) -> str | None:
    """The job id a command names, without decoding the rest (None if it cannot tell:
    the fold then reports the command as undecodable). A recurrence's command names
    none: its Kafka key instead, ``recur:<name>``, as a record of its own has it."""
    try:
        command = msgpack.unpackb(data, raw=False)
        if "i" not in command and _RECURRENCE_NAME_KEY in command:
            return recurrence_key(command[_RECURRENCE_NAME_KEY]).decode()
        return str(uuid.UUID(bytes=command.get("i")))
    except Exception:
        return None


def explode_commands(batches: Iterator) -> Iterator:
    """mapInArrow over command records (key, partition, offset, at_ms, value) -> one
    ``COMMAND_DDL`` row per command: a batch record (eventq/core/batch.py) becomes its
    commands, each at its position (offset, index), named by the job it is for.

    A second copy of an admitted bulk slice is dropped, as the processor skips it: the
    Kafka source reads each topic partition whole and in offset order in one task (no
    ``minPartitions``), so the admission per partition is known here."""
    schema = _arrow_schema(COMMAND_DDL)
    admitted: dict[int, int] = {}
    for batch in batches:
        data = batch.to_pydict()
        rows = []
        for key, partition, offset, at_ms, value in zip(
            data["key"], data["partition"], data["offset"], data["at_ms"], data["value"]
        ):
            try:
                source, items = read_record(value) if is_batch(value) else (None, None)
            except ValueError:  # CodecError: a broken batch is one undecodable row
                source, items = None, None
            if source is not None:
                if source.partition != partition or not admits(
                    source, admitted.get(partition, NOTHING_ADMITTED)
                ):
                    continue
                admitted[partition] = source.end
            if items is None:  # a single command (or a broken batch), named by its key
                job_id = key.decode(errors="replace") if key is not None else None
                rows.append({"job_id": job_id, "partition": partition, "position": position(offset),
                             "at_ms": at_ms, "value": value})
                continue
            for index, item in enumerate(items):
                rows.append({"job_id": _job_id_of(item), "partition": partition,
                             "position": position(offset, index), "at_ms": at_ms,
                             "value": item})
        yield _batch(rows, schema)


class RecurrenceFold:
    """The fold of one recurrence's commands, as the processor applies them
    (streams/processor.py ``_apply_recurrence``: the core's ``step_recurrence``, each
    decided from the record, the command, its broker time and its position), one
    ``OUTCOME_DDL`` row per command. Folded from the log's start in position order, no
    command is at or below a position applied already (the processor's watermark)."""

    __slots__ = ("record", "queue")

    def __init__(self) -> None:
        self.record: Recurrence | None = None
        self.queue: str | None = None  # its slots' queue, kept once it is gone

    def step(self, command: RecurrenceCommand, at_ms: int, at: int) -> dict[str, Any]:
        row: dict[str, Any] = {
            "job_id": recurrence_key(command.name).decode(), "recurrence": command.name,
            "command": COMMAND_NAMES.get(int(command.type)), "at_ms": at_ms,
        }  # fmt: skip
        result = step_recurrence(self.record, command, at_ms, at)
        outcome = result.outcome
        if isinstance(outcome, Changed):
            row["outcome"] = "accepted"
            if outcome.fired is not None and outcome.record is not None:
                row.update(slot=outcome.fired, due_ms=outcome.record.fired_ms)
        elif isinstance(outcome, Rejected):
            row.update(outcome="rejected", detail=outcome.error.text or outcome.error.code)
        else:
            row.update(outcome="ignored", detail=outcome.reason)
        self.record = result.record
        if self.record is not None:
            self.queue = self.record.definition.job_name
            row["next_ms"] = self.record.next_ms
        row["queue"] = self.queue
        return row


def fold_commands(batches: Iterator) -> Iterator:
    """mapInArrow over ``explode_commands`` rows (one per command: job_id, partition,
    position, at_ms = broker time, value), sorted by (job_id, partition, position)
    within the Spark partition and every command of a job in the same Spark partition:
    folds each job with the core's ``apply`` and each recurrence (its commands named
    ``recur:<name>``, all in its key's partition) with ``step_recurrence`` ->
    ``OUTCOME_DDL`` rows, one per command."""
    schema = _arrow_schema(OUTCOME_DDL)
    current: str | None = None
    fold = JobFold()
    recurrence = RecurrenceFold()
    for batch in batches:
        data = batch.to_pydict()
        rows = []
        for job_id, partition, at, at_ms, value in zip(
            data["job_id"], data["partition"], data["position"], data["at_ms"], data["value"]
        ):
            if job_id != current:
                current, fold, recurrence = job_id, JobFold(), RecurrenceFold()
            try:
                command = decode_command(value).command
                if isinstance(command, RECURRENCE_COMMANDS):
                    if recurrence_key(command.name).decode() != job_id:
                        raise ValueError(f"a command of recurrence {command.name!r} "
                                         f"under key {job_id!r}")
                elif isinstance(command, NO_JOB_COMMANDS):
                    continue  # pause/resume: not a job's history
                elif str(command.job_id) != job_id:
                    raise ValueError(f"a command for {command.job_id} under key {job_id!r}")
            except ValueError as error:  # CodecError
                rows.append({
                    "job_id": job_id, "queue": fold.queue or recurrence.queue, "at_ms": at_ms,
                    "outcome": "undecodable",
                    "detail": f"partition {partition} offset {offset_of(at)}: {error}",
                })
                continue
            if isinstance(command, RECURRENCE_COMMANDS):
                rows.append(recurrence.step(command, at_ms, at))
            else:
                rows.append(fold.step(command, at_ms, at))
        yield _batch(rows, schema)


BATCH_RECORD_DDL = "key binary, value binary, partition int"


def batch_records(batches: Iterator, max_commands: int = MAX_BATCH_COMMANDS,
                  max_bytes: int = BATCH_RECORD_BYTES) -> Iterator:
    """mapInArrow over encoded commands (key, value, partition) -> batch records of
    ``BATCH_RECORD_DDL``: the commands of each Kafka partition grouped into records of at
    most ``max_commands`` and about ``max_bytes`` (eventq/core/batch.py), so the
    processor applies a pipeline's jobs a batch at a time. A record of one command keeps
    its key."""
    import pyarrow as pa

    schema = _arrow_schema(BATCH_RECORD_DDL)
    builders: dict[int, tuple[BatchBuilder, list]] = {}
    out: dict[str, list] = {"key": [], "value": [], "partition": []}

    def emit(partition: int) -> None:
        builder, keys = builders[partition]
        out["key"].append(keys[0] if len(keys) == 1 else None)
        out["value"].append(builder.take())
        out["partition"].append(partition)
        keys.clear()

    for batch in batches:
        data = batch.to_pydict()
        for key, value, partition in zip(data["key"], data["value"], data["partition"]):
            builder, keys = builders.setdefault(
                partition, (BatchBuilder(max_commands, max_bytes), [])
            )
            if not builder.fits(value):
                emit(partition)
            builder.add(value)
            keys.append(key)
        if len(out["value"]) >= 64:
            yield pa.RecordBatch.from_pydict(out, schema=schema)
            out = {"key": [], "value": [], "partition": []}
    for partition, (builder, keys) in builders.items():
        if keys:
            emit(partition)
    if out["value"]:
        yield pa.RecordBatch.from_pydict(out, schema=schema)
