"""The command log's row functions, run on Spark's executors: pure, no Spark, no I/O
(pyarrow is imported when a batch is built).

The fold decodes and decides each command exactly as the processor does, with the
core's state machine, so Spark's outcomes, wait and run times are the server's:

- ``explode_commands``: command-log records (single or batch) -> one row per command
  at its position.
- ``fold_commands``: the commands of each job in position order, decoded and decided
  with the core's ``JobFold`` -> one outcome row per command (wait and run times of
  attempts); a recurrence's commands likewise with the core's ``step_recurrence``
  (``RecurrenceFold``: the slots its fires fired).
- ``batch_records``: encoded commands -> batch records of the command log, grouped per
  Kafka partition (eventq/core/batch.py), as bulk enqueue writes them.

The rows of an enqueue are encoded by eventq/spark/enqueue_rows.py, those of the state
log decoded by eventq/spark/state_rows.py. All work on Arrow record batches
(``mapInArrow``, eventq/spark/arrow.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import msgpack

from eventq.core import decode_command
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
from eventq.core.codec import COMMAND_FIELDS, Field
from eventq.core.commands import (
    NO_JOB_COMMANDS,
    RECURRENCE_COMMANDS,
    CommandType,
    RecurrenceCommand,
    recurrence_key,
)
from eventq.core.fold import COMMAND_NAMES, JobFold
from eventq.core.machine import Rejected
from eventq.core.recurrence import Changed, Recurrence
from eventq.core.step import step_recurrence
from eventq.spark.arrow import arrow_schema, record_batch

if TYPE_CHECKING:
    import pyarrow as pa

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
_RECURRENCE_NAME_KEY = next(field.key for field in COMMAND_FIELDS[CommandType.FIRE]
                            if isinstance(field, Field) and field.attr == "name")


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


def explode_commands(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow over command records (key, partition, offset, at_ms, value) -> one
    ``COMMAND_DDL`` row per command: a batch record (eventq/core/batch.py) becomes its
    commands, each at its position (offset, index), named by the job it is for.

    A second copy of an admitted bulk slice is dropped, as the processor skips it: the
    Kafka source reads each topic partition whole and in offset order in one task (no
    ``minPartitions``), so the admission per partition is known here."""
    schema = arrow_schema(COMMAND_DDL)
    admitted: dict[int, int] = {}
    for batch in batches:
        data = batch.to_pydict()
        rows: list[dict[str, Any]] = []
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
        yield record_batch(rows, schema)


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


def fold_commands(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """mapInArrow over ``explode_commands`` rows (one per command: job_id, partition,
    position, at_ms = broker time, value), sorted by (job_id, partition, position)
    within the Spark partition and every command of a job in the same Spark partition:
    folds each job with the core's ``apply`` and each recurrence (its commands named
    ``recur:<name>``, all in its key's partition) with ``step_recurrence`` ->
    ``OUTCOME_DDL`` rows, one per command."""
    schema = arrow_schema(OUTCOME_DDL)
    current: str | None = None
    fold = JobFold()
    recurrence = RecurrenceFold()
    for batch in batches:
        data = batch.to_pydict()
        rows: list[dict[str, Any]] = []
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
        yield record_batch(rows, schema)


BATCH_RECORD_DDL = "key binary, value binary, partition int"
OUT_BATCH_RECORDS = 64  # batch records per Arrow batch handed back to Spark


def batch_records(batches: Iterable[pa.RecordBatch], max_commands: int = MAX_BATCH_COMMANDS,
                  max_bytes: int = BATCH_RECORD_BYTES) -> Iterator[pa.RecordBatch]:
    """mapInArrow over encoded commands (key, value, partition) -> batch records of
    ``BATCH_RECORD_DDL``: the commands of each Kafka partition grouped into records of at
    most ``max_commands`` and about ``max_bytes`` (eventq/core/batch.py), so the
    processor applies a pipeline's jobs a batch at a time. A record of one command keeps
    its key."""
    import pyarrow as pa

    schema = arrow_schema(BATCH_RECORD_DDL)
    builders: dict[int, tuple[BatchBuilder, list[bytes | None]]] = {}
    out: dict[str, list[Any]] = {"key": [], "value": [], "partition": []}

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
        if len(out["value"]) >= OUT_BATCH_RECORDS:
            yield pa.RecordBatch.from_pydict(out, schema=schema)
            out = {"key": [], "value": [], "partition": []}
    for partition, (builder, keys) in builders.items():
        if keys:
            emit(partition)
    if out["value"]:
        yield pa.RecordBatch.from_pydict(out, schema=schema)
