"""A job's history from the command log (the dashboard's job page).

Every command of a job is in one partition of the command log, the one its key hashes
to (eventq/core/partitioner.py ``job_key``), so its history is one partition read:
the last ``MAX_HISTORY_RECORDS`` records of it at most (a person waits for this page),
folded with the core exactly as ``eventq spark stats`` folds it (eventq/core/fold.py),
so each command shows whether it was accepted and what it did, and [eventq] who issued
it: the name of its token (docs/security.md, "Queue-name prefixes": none without tokens,
nor for what eventq wrote itself: timers, follow-ups).
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass

from eventq.core import CodecError, decode_command
from eventq.core.batch import position, read_record
from eventq.core.commands import NO_JOB_COMMANDS
from eventq.core.fold import JobFold
from eventq.core.partitioner import job_key, partition_for_key
from eventq.kafka.security import KafkaTarget
from eventq.observe.pages import HistoryRow

MAX_HISTORY_RECORDS = 200_000  # ~1-2 s of reading


@dataclass
class JobHistory:
    rows: list[HistoryRow]
    note: str


def format_ms(at_ms: int) -> str:
    moment = dt.datetime.fromtimestamp(at_ms / 1000, tz=dt.timezone.utc)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _detail(row: dict) -> str:
    parts = [row.get("event") or row.get("detail") or ""]
    if row.get("attempt") is not None:
        parts.append(f"attempt {row['attempt']}")
    if row.get("wait_ms") is not None:
        parts.append(f"waited {row['wait_ms'] / 1000:.3f} s")
    if row.get("run_ms") is not None:
        parts.append(f"ran {row['run_ms'] / 1000:.3f} s")
    return ", ".join(p for p in parts if p)


def job_history(bootstrap: KafkaTarget, topic: str, partitions: int, job_id: uuid.UUID,
                max_records: int = MAX_HISTORY_RECORDS) -> JobHistory:
    """Blocking (Kafka reads): run it in a thread."""
    from eventq.kafka.logreader import end_offsets, read_batches, record_of

    key = job_key(job_id)
    partition = partition_for_key(key, partitions)
    low, high = end_offsets(bootstrap, topic)[partition]
    start = max(low, high - max_records)
    wanted = str(job_id)
    fold = JobFold()
    rows: list[HistoryRow] = []
    for batch in read_batches(bootstrap, topic, start={partition: start},
                              partitions=[partition], ends={partition: (low, high)}):
        for message in batch:
            record = record_of(topic, message)
            offset, at_ms = record.offset, record.timestamp_ms
            try:
                _, items = read_record(record.value)
            except CodecError:
                continue
            for index, item in enumerate(items):
                try:
                    decoded = decode_command(item)
                except CodecError:
                    continue
                command = decoded.command
                if isinstance(command, NO_JOB_COMMANDS) or str(command.job_id) != wanted:
                    continue
                row = fold.step(command, at_ms, position(offset, index))
                rows.append(HistoryRow(
                    f"{partition}/{offset}" + (f"#{index}" if len(items) > 1 else ""),
                    format_ms(at_ms), row.get("command") or "?", row.get("outcome") or "?",
                    _detail(row), decoded.issuer))
    note = (f"Commands for this job in partition {partition} of {topic}, offsets "
            f"{start:,} to {high - 1:,}")
    if start > low:
        note += f" (the {start - low:,} older records were not read)"
    return JobHistory(rows, note + ".")
