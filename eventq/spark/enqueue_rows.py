"""The enqueue's row functions: input rows -> add/schedule commands, run on Spark's
executors; pure, no Spark, no I/O (pandas is imported when a batch is encoded).

A row is validated with the protocol's own value parsers and the core's command
validation, and encoded and partitioned with the core's codec and partitioner, so bulk
enqueue refuses and writes exactly what the gateway would:

- ``EnqueueSpec``: how the rows of one enqueue become commands (the constants, and which
  fields come from columns), built and checked on the driver (eventq/spark/bulk.py).
- ``encode_row``: one row's cells -> (Kafka key, command record, partition, job id), or
  a ``Reject`` naming the field and why.
- ``encode_rows``: one batch of input rows (pandas Series) -> a DataFrame of
  ``ENCODED_FIELDS`` (the body of the scalar pandas UDF of ``eventq.spark.enqueue``).
"""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from eventq.core import Add, Schedule, encode_command
from eventq.core.partitioner import job_key, partition_for_key
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

if TYPE_CHECKING:
    import pandas as pd

Parsed = TypeVar("Parsed")  # what a protocol value parser gives (an int, a name, an id)

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


def _parsed(field: str, parse: Callable[[str], Parsed], raw: object) -> Parsed:
    """``parse(str(raw))``; a protocol ClientError becomes a Reject with its text."""
    text = raw if isinstance(raw, str) else str(raw)
    try:
        return parse(text)
    except EventqError as error:
        raise Reject(field, f"{error.text or error.code}, got {_shown(raw)}") from None


def _required(field: str, parse: Callable[[str], Parsed], raw: object) -> Parsed:
    if raw is None:
        raise Reject(field, "missing (null)")
    return _parsed(field, parse, raw)


def _flag(field: str, parse: Callable[[str], int], from_column: bool, raw: object,
          constant: int) -> int:
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
        values = [None if v is None else str(v) for v in _as_list(key)]
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


def _after_fault(elements: list[Any]) -> str:
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


def _as_list(raw: object) -> list[Any]:
    """An array cell (a numpy array from Arrow, or a list) as a list."""
    return list(cast("Iterable[Any]", raw))  # an ndarray or a list: iterable


def _protocol_after(elements: list[Any], raw: object) -> tuple[uuid.UUID, ...]:
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
        keys: list[list[Any] | None] = [
            None if value == "" else [value] for value in raw.split(AFTER_SEPARATOR)]
    else:
        keys = [None if key is None else _as_list(key) for key in _as_list(raw)]
    namespace = uuid.UUID(bytes=spec.namespace)
    ids: list[str] = []
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


def _tags_fault(elements: list[Any]) -> str:
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
    payload: bytes | None,
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


# An encoded row: (key, value, partition, job_id, reject_field, reject_reason).
Encoded = tuple[bytes | None, bytes | None, int | None, str | None, str | None, str | None]


def _encoded(spec: EnqueueSpec, cells: tuple[Any, ...]) -> Encoded:
    """A row's ``ENCODED_FIELDS``: its command, or the reject (with the job id when the
    row got as far as having one)."""
    try:
        key, value, partition, job_id = encode_row(spec, *cells)
    except Reject as reject:
        reject_id = None if reject.job_id is None else str(reject.job_id)
        return None, None, None, reject_id, reject.field, reject.reason
    return key, value, partition, job_id, None, None


def encode_rows(spec: EnqueueSpec, *columns: pd.Series) -> pd.DataFrame:
    """The pandas UDF body: 13 Series (id, key, name, payload, ttr, ttl, priority,
    max-attempts, max-fails, time, after, after's queues, tags) -> a DataFrame of
    ``ENCODED_FIELDS``."""
    import pandas as pd

    out: dict[str, list[object]] = {field: [] for field in ENCODED_FIELDS}
    for cells in zip(*(column.tolist() for column in columns)):
        for field, value in zip(ENCODED_FIELDS, _encoded(spec, cells), strict=True):
            out[field].append(value)
    frame = pd.DataFrame(out)
    frame["partition"] = pd.array(out["partition"], dtype="Int32")
    return frame
