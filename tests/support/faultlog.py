"""Small command logs of one job for the fault checker's log-time tests
(tools/faults/logview.py, logrules.py): each method appends one command at a broker
time, in log order, and ``view()`` folds them with the real core."""

from __future__ import annotations

import uuid

from eventq.core.commands import (
    Add,
    Complete,
    Delete,
    Expire,
    Fail,
    ReleaseAttempt,
    Retry,
    Schedule,
    StartAttempt,
    TimeoutAttempt,
    Touch,
)
from eventq.core.job import State
from tools.faults.logview import JobLog, LogCommand, LogView, fold_job, log_view

T0_MS = 1_800_000_000_000  # a broker time well inside the core's range


class JobLogBuilder:
    """One job's commands; times are milliseconds after ``T0_MS``; positions grow by
    one per command (one partition)."""

    def __init__(self, job_id: str | None = None, partition: int = 0) -> None:
        self.job_id = job_id or str(uuid.uuid4())
        self.uuid = uuid.UUID(self.job_id)
        self.partition = partition
        self.commands: list[LogCommand] = []

    def put(self, at_ms: int, command) -> LogCommand:
        entry = LogCommand(self.job_id, self.partition, len(self.commands) + 1,
                           T0_MS + at_ms, command)
        self.commands.append(entry)
        return entry

    def add(self, at_ms=0, ttr_ms=1000, ttl_ms=3_600_000, max_fails=0, backoff_ms=0,
            payload=b"p"):
        return self.put(at_ms, Add(self.uuid, "q", ttr_ms, ttl_ms, payload,
                                   max_fails=max_fails, backoff_ms=backoff_ms))

    def schedule(self, time_ms, at_ms=0, ttr_ms=1000, ttl_ms=3_600_000):
        return self.put(at_ms, Schedule(self.uuid, "q", ttr_ms, ttl_ms, T0_MS + time_ms, b"p"))

    def start(self, at_ms, attempt):
        return self.put(at_ms, StartAttempt(self.uuid, attempt))

    def timeout(self, at_ms, attempt):
        return self.put(at_ms, TimeoutAttempt(self.uuid, attempt))

    def release(self, at_ms, attempt, state=State.NEW):
        return self.put(at_ms, ReleaseAttempt(self.uuid, attempt, state))

    def touch(self, at_ms, attempt, ttr_ms=None):
        return self.put(at_ms, Touch(self.uuid, attempt, ttr_ms))

    def complete(self, at_ms, result=b"done"):
        return self.put(at_ms, Complete(self.uuid, result))

    def fail(self, at_ms, result=b"failed"):
        return self.put(at_ms, Fail(self.uuid, result))

    def retry(self, at_ms, delay_ms=0):
        return self.put(at_ms, Retry(self.uuid, delay_ms))

    def delete(self, at_ms):
        return self.put(at_ms, Delete(self.uuid))

    def expire(self, at_ms):
        return self.put(at_ms, Expire(self.uuid))

    def fold(self) -> JobLog:
        return fold_job(self.job_id, self.commands)

    def view(self) -> LogView:
        return log_view(self.commands)


def forged(builder: JobLogBuilder, *events: str | tuple[str, bool]) -> JobLog:
    """The builder's commands as a broken core might have decided them: each accepted
    with the event named beside it (``(name, requeued)`` for a timeout), whatever the
    real core would say; None leaves a command rejected."""
    from tools.faults.logview import ACCEPTED, REJECTED, LogEntry

    entries = []
    for command, event in zip(builder.commands, events, strict=True):
        requeued = None
        if isinstance(event, tuple):
            event, requeued = event
        outcome = REJECTED if event is None else ACCEPTED
        entries.append(LogEntry(command.position, command.at_ms, command.command, outcome,
                                event, requeued))
    return JobLog(builder.job_id, tuple(entries))
