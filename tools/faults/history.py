"""The history of a fault-campaign run: every client operation, what it asked and what
it got back, and what the read-back after the run found.

An ``Op`` is one client operation, recorded Jepsen-style with the moment it was invoked
and the moment its answer arrived (float seconds on one monotonic clock counted from the
run's start; ``return_s`` is None when no answer ever came) and an outcome:

- ``ok``: acknowledged (``+OK``; for a bulk load, Kafka's delivery ack);
- ``fail``: definitely had no effect (``-CLIENT-ERROR``, ``-NOT-FOUND``, ``-TIMEOUT``:
  the codes that say so), or a read that erred;
- ``info``: indeterminate: it may have taken effect, possibly **after** the client got
  its answer (any ``-SERVER-ERROR``, whatever its text: the code does not tell "not
  written" from "may still take effect"), so a checker treats an info op's effect as
  possible at any time after its invoke.

``classify`` decides the outcome from the operation's kind and its reply line or
exception alone, so the same rules apply to a live run and to a history read from disk.

A history file is JSON lines (``write_history`` / ``read_history``); each line is an
object with a ``type``:

- ``{"type": "meta", ...}``: anything the runner wants to keep (seed, ports, digests,
  fault schedule); later meta lines update earlier keys;
- ``{"type": "op", "index", "client", "process", "kind", "job_id", "args", "invoke_s",
  "return_s", "outcome", "reply"}``: one ``Op``; ``args`` and ``reply`` hold only the
  fields that differ from their defaults;
- ``{"type": "read-back", "job_id", "status", "at_s", "fields", "result_ok", "result"}``:
  one ``ReadBack``.

Every bytes value (payloads, results, inspect field values) is written as base64 text.
Ops may appear in any order (they are appended as they complete); the reader sorts them
by index.
"""

from __future__ import annotations

import base64
import json
import math
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import IO, Any

from eventq.errors import ClientError, ErrorReply, EventqError, NotFound, Timeout

# --- the vocabulary -------------------------------------------------------------------

KINDS = ("add", "schedule", "run", "bulk", "lease", "touch", "complete", "fail", "delete",
         "result", "inspect",
         # the user-like workload's (load_user.py; judged by workload_rules.py); "drain"
         # is the final drain's period, no request of its own
         "pause", "resume", "retry", "retry-group", "recur", "unrecur", "inputs", "drain")
READS = frozenset({"result", "inspect", "inputs"})
WRITES = frozenset(KINDS) - READS
CREATES = frozenset({"add", "schedule", "run", "bulk"})

OK, FAIL, INFO = "ok", "fail", "info"
OUTCOMES = (OK, FAIL, INFO)

FOUND, NOT_FOUND, UNKNOWN = "found", "not-found", "unknown"
READ_BACK_STATUSES = (FOUND, NOT_FOUND, UNKNOWN)

# Job states of `inspect job` (docs/protocol.md, "inspect").
NEW, COMPLETED, FAILED, PENDING, LEASED = 0, 1, 2, 3, 4


# --- the model ------------------------------------------------------------------------


@dataclass(frozen=True)
class BulkJob:
    """One add command of a bulk batch record."""

    job_id: str
    queue: str
    ttr_ms: int
    ttl_ms: int
    payload: bytes
    max_fails: int = 0
    backoff_ms: int = 0


@dataclass(frozen=True)
class Args:
    """What an operation asked for; fields it does not use stay None (or empty).

    ``queues``: the job's queue for add/schedule/run, the names asked for a lease.
    ``result``: the bytes a complete or fail sends. ``jobs``/``partition``: a bulk
    record's commands and the Kafka partition it went to. ``ttr_ms`` on a touch is its
    ``-ttr`` flag (None: the job's own TTR)."""

    queues: tuple[str, ...] = ()
    ttr_ms: int | None = None
    ttl_ms: int | None = None
    time: str | None = None
    payload: bytes | None = None
    max_fails: int | None = None
    backoff_ms: int | None = None
    priority: int | None = None
    wait_ms: int | None = None
    result: bytes | None = None
    jobs: tuple[BulkJob, ...] = ()
    partition: int | None = None
    # The user-like workload's (load_user.py): ``after`` a dependent's upstreams;
    # ``group`` a fail's -group or retry-group's group; ``name`` a recurrence's name
    # (recur/unrecur); ``every_ms`` its period; ``count`` retry-group's count;
    # ``wall_s`` the wall clock (epoch seconds) at invoke, for ops judged against
    # broker times (schedule, recur, unrecur, drain); ``retry_of`` the index of the op
    # this one repeats after an indeterminate reply (same request, same bytes).
    after: tuple[str, ...] = ()
    group: str | None = None
    name: str | None = None
    every_ms: int | None = None
    count: int | None = None
    wall_s: float | None = None
    retry_of: int | None = None
    delay_ms: int | None = None  # retry's -delay


@dataclass(frozen=True)
class Reply:
    """What came back. A lease: ``job_id``, ``name``, ``ttr_ms``, ``payload``. A result
    or run: ``success`` and ``data``. An inspect: ``fields`` (key, raw value) in reply
    order. An error: ``error``, the reply line without ``\\r\\n`` (``-NOT-FOUND``), or for
    a failure on the client's side a description (``connection lost: ...``)."""

    job_id: str | None = None
    name: str | None = None
    ttr_ms: int | None = None
    payload: bytes | None = None
    success: bool | None = None
    data: bytes | None = None
    fields: tuple[tuple[str, bytes], ...] | None = None
    error: str | None = None

    def field(self, key: str) -> bytes | None:
        return _field(self.fields or (), key)


@dataclass(frozen=True)
class Op:
    """One client operation (see the module docstring for the outcome's meaning).
    ``job_id`` is None for a lease until it returns a job, and for a bulk load (its
    jobs are in ``args.jobs``)."""

    index: int
    client: int
    process: int
    kind: str
    job_id: str | None
    args: Args
    invoke_s: float
    return_s: float | None
    outcome: str
    reply: Reply = Reply()

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown op kind {self.kind!r}")
        if self.outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {self.outcome!r}")

    @property
    def job_ids(self) -> tuple[str, ...]:
        """Every job this op names (a bulk names each of its commands' jobs)."""
        if self.kind == "bulk":
            return tuple(job.job_id for job in self.args.jobs)
        return () if self.job_id is None else (self.job_id,)

    @property
    def latest_effect_s(self) -> float:
        """Until when this op's effect may land: an acknowledged op took effect before
        it returned; an indeterminate one may still take effect at any later time
        (``-SERVER-ERROR ... may still take effect``), so forever."""
        if self.outcome == OK and self.return_s is not None:
            return self.return_s
        return math.inf


@dataclass(frozen=True)
class ReadBack:
    """What the read-back after the run found for one job: ``found`` (with its inspect
    fields, and ``result_ok``/``result`` when it is COMPLETED or FAILED and the result
    could be read), ``not-found``, or ``unknown`` (no definite answer in time).
    ``at_s`` is when the answering ``inspect job`` was invoked (same clock as ops)."""

    job_id: str
    status: str
    at_s: float | None = None
    fields: tuple[tuple[str, bytes], ...] = ()
    result_ok: bool | None = None
    result: bytes | None = None

    def __post_init__(self) -> None:
        if self.status not in READ_BACK_STATUSES:
            raise ValueError(f"unknown read-back status {self.status!r}")

    def field(self, key: str) -> bytes | None:
        return _field(self.fields, key)

    def number(self, key: str) -> int | None:
        value = self.field(key)
        return None if value is None else int(value)


def _field(pairs: Iterable[tuple[str, bytes]], key: str) -> bytes | None:
    for name, value in pairs:
        if name == key:
            return value
    return None


# --- outcomes -------------------------------------------------------------------------

# The reply codes that say the op had no effect (eventq/errors.py): a malformed or
# refused request, an absent job, a wait that ended with nothing. Any other code is a
# -SERVER-ERROR (eventq/errors.py ``ErrorReply.error_class`` reads an unknown code as one
# too), and a -SERVER-ERROR does not say on the wire whether the command was written:
# ``NotWritten`` ("nothing happened") and ``MayTakeEffect`` share its code, and the
# gateway's own refusals ("command was not applied", internal errors) do too. Only their
# texts differ, and a reworded text must not turn an op that may have taken effect into
# one that did not: every -SERVER-ERROR on a write is indeterminate.
DEFINITE_CLASSES = (ClientError, NotFound, Timeout)


def classify(kind: str, answer: bytes | str | BaseException) -> str:
    """The outcome of an op of ``kind`` from its reply's first line (``+OK 1``,
    ``-NOT-FOUND``, ...) or the exception it ended with, by the reply's code alone
    (``DEFINITE_CLASSES``; never its text).

    An ``EventqError`` is judged by its reply line. Any other exception (connection
    lost, client-side timeout, a Kafka delivery error of a bulk load) leaves the op
    indeterminate. A read that errs changed nothing and told nothing: ``fail``. A
    ``run``'s outcome speaks of its reply only: its job was added and is deleted when
    run returns whatever the reply, so a checker must never read a run's ``fail`` as
    "its job never existed"."""
    if isinstance(answer, EventqError):
        answer = answer.reply
    if isinstance(answer, BaseException):
        return INFO
    line = answer.encode("utf-8") if isinstance(answer, str) else answer
    line = line.rstrip(b"\r\n")
    if line.startswith(b"+OK"):
        return OK
    if line.startswith(b"-"):
        if issubclass(ErrorReply.of(line).error_class, DEFINITE_CLASSES):
            return FAIL
    if kind in READS:
        return FAIL
    return INFO  # a -SERVER-ERROR (or an unexpected line) on a write


def error_line(error: BaseException) -> str:
    """What an op that ended with ``error`` records as its reply."""
    if isinstance(error, EventqError):
        return error.reply.decode("utf-8", "replace").rstrip("\r\n")
    if isinstance(error, TimeoutError):
        return f"client timeout: {error}" if str(error) else "client timeout"
    return f"{type(error).__name__}: {error}"


# --- the clock and the recorder -------------------------------------------------------


class Clock:
    """Seconds since the run's start on the monotonic clock: every op, every read-back
    and every fault of a run is timed by one of these."""

    def __init__(self, origin: float | None = None) -> None:
        self.origin = time.monotonic() if origin is None else origin

    def now(self) -> float:
        return time.monotonic() - self.origin


class Recorder:
    """Hands out op indexes in invoke order and keeps finished ops (appending each to a
    history file at once when given one, so a crashed run still leaves its ops)."""

    def __init__(self, clock: Clock | None = None, sink: HistoryWriter | None = None) -> None:
        self.clock = clock or Clock()
        self.sink = sink
        self._next = 0
        self._ops: list[Op] = []

    def begin(self) -> tuple[int, float]:
        """The next op's index and its invoke time."""
        index, self._next = self._next, self._next + 1
        return index, self.clock.now()

    def record(self, op: Op) -> Op:
        self._ops.append(op)
        if self.sink is not None:
            self.sink.write_op(op)
        return op

    @property
    def ops(self) -> list[Op]:
        return sorted(self._ops, key=lambda op: op.index)


# --- JSON lines -----------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"), validate=True)


def _pairs_to_json(pairs: Iterable[tuple[str, bytes]]) -> list[list[str]]:
    return [[key, _b64(value)] for key, value in pairs]


def _pairs_from_json(items: Iterable[list[str]]) -> tuple[tuple[str, bytes], ...]:
    return tuple((key, _unb64(value)) for key, value in items)


def _plain(value: Any) -> Any:
    """A dataclass field's value as JSON: bytes as base64, tuples as lists."""
    if isinstance(value, bytes):
        return _b64(value)
    if isinstance(value, BulkJob):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    return value


def _non_default(obj: Any) -> dict[str, Any]:
    """The fields that differ from their defaults (a history stays small to read)."""
    out = {}
    for f in fields(obj):
        value = getattr(obj, f.name)
        if value == f.default:
            continue
        out[f.name] = _pairs_to_json(value) if f.name == "fields" else _plain(value)
    return out


def _bulk_job_from_json(item: Mapping[str, Any]) -> BulkJob:
    return BulkJob(**{**item, "payload": _unb64(item["payload"])})


def _args_from_json(item: Mapping[str, Any]) -> Args:
    values = dict(item)
    for key in ("payload", "result"):
        if key in values:
            values[key] = _unb64(values[key])
    values["queues"] = tuple(values.get("queues", ()))
    values["after"] = tuple(values.get("after", ()))
    values["jobs"] = tuple(_bulk_job_from_json(job) for job in values.get("jobs", ()))
    return Args(**values)


def _reply_from_json(item: Mapping[str, Any]) -> Reply:
    values = dict(item)
    for key in ("payload", "data"):
        if key in values:
            values[key] = _unb64(values[key])
    if "fields" in values:
        values["fields"] = _pairs_from_json(values["fields"])
    return Reply(**values)


def op_to_json(op: Op) -> dict[str, Any]:
    return {
        "type": "op", "index": op.index, "client": op.client, "process": op.process,
        "kind": op.kind, "job_id": op.job_id, "args": _non_default(op.args),
        "invoke_s": op.invoke_s, "return_s": op.return_s, "outcome": op.outcome,
        "reply": _non_default(op.reply),
    }


def op_from_json(item: Mapping[str, Any]) -> Op:
    return Op(
        index=item["index"], client=item["client"], process=item["process"],
        kind=item["kind"], job_id=item["job_id"], args=_args_from_json(item["args"]),
        invoke_s=item["invoke_s"], return_s=item["return_s"], outcome=item["outcome"],
        reply=_reply_from_json(item["reply"]),
    )


def read_back_to_json(read: ReadBack) -> dict[str, Any]:
    return {
        "type": "read-back", "job_id": read.job_id, "status": read.status, "at_s": read.at_s,
        "fields": _pairs_to_json(read.fields), "result_ok": read.result_ok,
        "result": None if read.result is None else _b64(read.result),
    }


def read_back_from_json(item: Mapping[str, Any]) -> ReadBack:
    return ReadBack(
        job_id=item["job_id"], status=item["status"], at_s=item["at_s"],
        fields=_pairs_from_json(item["fields"]), result_ok=item["result_ok"],
        result=None if item["result"] is None else _unb64(item["result"]),
    )


class HistoryWriter:
    """Appends ops, read-backs and meta lines to a history file, one JSON object a
    line, flushed per line (a run killed midway keeps what it wrote)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._file: IO[str] = open(self.path, "a", encoding="utf-8")

    def _line(self, item: Mapping[str, Any]) -> None:
        self._file.write(json.dumps(item, separators=(",", ":"), allow_nan=False) + "\n")
        self._file.flush()

    def write_op(self, op: Op) -> None:
        self._line(op_to_json(op))

    def write_read_back(self, read: ReadBack) -> None:
        self._line(read_back_to_json(read))

    def write_meta(self, meta: Mapping[str, Any]) -> None:
        self._line({"type": "meta", **meta})

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class Recorded:
    """A history file's content: ops sorted by index, read-backs by job id, meta."""

    ops: tuple[Op, ...]
    read_back: Mapping[str, ReadBack] = field(default_factory=dict)
    meta: Mapping[str, Any] = field(default_factory=dict)


def write_history(path: str | Path, ops: Iterable[Op],
                  read_back: Iterable[ReadBack] = (), meta: Mapping[str, Any] | None = None,
                  ) -> None:
    """Write a whole history at once (a new file)."""
    Path(path).unlink(missing_ok=True)
    with HistoryWriter(path) as writer:
        if meta:
            writer.write_meta(meta)
        for op in ops:
            writer.write_op(op)
        for read in read_back:
            writer.write_read_back(read)


def iter_lines(path: str | Path) -> Iterator[dict[str, Any]]:
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except json.JSONDecodeError:
            # Only a torn last line (a run killed while writing it) is forgiven.
            if number != len(lines):
                raise ValueError(f"{path}:{number}: not JSON") from None


def read_history(path: str | Path) -> Recorded:
    ops: list[Op] = []
    reads: dict[str, ReadBack] = {}
    meta: dict[str, Any] = {}
    for item in iter_lines(path):
        kind = item.get("type")
        if kind == "op":
            ops.append(op_from_json(item))
        elif kind == "read-back":
            read = read_back_from_json(item)
            reads[read.job_id] = read
        elif kind == "meta":
            meta.update({k: v for k, v in item.items() if k != "type"})
        else:
            raise ValueError(f"{path}: unknown line type {kind!r}")
    ops.sort(key=lambda op: op.index)
    return Recorded(tuple(ops), reads, meta)


__all__ = [
    "KINDS", "READS", "WRITES", "CREATES", "OK", "FAIL", "INFO", "OUTCOMES",
    "FOUND", "NOT_FOUND", "UNKNOWN", "NEW", "COMPLETED", "FAILED", "PENDING", "LEASED",
    "BulkJob", "Args", "Reply", "Op", "ReadBack", "classify", "error_line",
    "DEFINITE_CLASSES", "Clock", "Recorder", "HistoryWriter", "Recorded",
    "write_history", "read_history", "op_to_json", "op_from_json", "read_back_to_json",
    "read_back_from_json",
]
