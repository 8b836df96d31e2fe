"""What the command log says happened to each job of a run, in log time.

The client's clock says when an op was invoked and answered; only the log says in what
order a job's commands were applied and which of them took effect. This module turns
``eventq.commands`` into pure records: ``LogCommand`` (one command as written, its
partition, its position and the broker's LogAppendTime, docs/architecture.md,
"Batches"), and ``JobLog`` (one job's commands folded with the real core,
``eventq.core.step``, exactly as the processor and ``eventq replay`` fold them, so each
``LogEntry`` says whether the command was accepted and with which event).

``read_log`` is the one function that reads Kafka; ``commands_of_records`` (the bulk
lane's second copies skipped as eventq/run/replay.py ``Derived.feed`` skips them) and
``fold_job`` / ``log_view`` are pure. A job's commands all go to one partition (keyed by
its id), so their positions order them totally.

The log-time rules over these records are in logrules.py.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from eventq.core import CodecError, decode_command
from eventq.core.batch import NOTHING_ADMITTED, admits, position, read_record
from eventq.core.commands import NO_JOB_COMMANDS, Command, Schedule
from eventq.core.events import EventType
from eventq.core.job import Job
from eventq.core.machine import Accepted, Ignored, Rejected
from eventq.core.step import step
from eventq.kafka.logreader import Record

ACCEPTED, REJECTED, IGNORED = "accepted", "rejected", "ignored"


@dataclass(frozen=True)
class LogCommand:
    """One job command of the log: where it is and when the broker stamped it."""

    job_id: str
    partition: int
    position: int
    at_ms: int
    command: Command

    def __post_init__(self) -> None:
        if self.position < 0 or self.at_ms < 0:
            raise ValueError(f"a log command has no negative position or time: {self!r:.120}")


@dataclass(frozen=True)
class LogEntry:
    """One command of a job after the fold: the command's type name (``START_ATTEMPT``),
    its ``attempt`` when it names one, what the core decided (``accepted``, ``rejected``
    or ``ignored``), the event when accepted (``ATTEMPT_STARTED``, ...), and the job as
    it was after it (None: absent or gone)."""

    position: int
    at_ms: int
    command: Command
    outcome: str
    event: str | None = None
    requeued: bool | None = None  # an accepted timeout's: the job is ready again
    job_after: Job | None = None

    @property
    def kind(self) -> str:
        return self.command.type.name

    @property
    def attempt(self) -> int | None:
        return getattr(self.command, "attempt", None)

    @property
    def result(self) -> bytes | None:
        """The bytes a complete or fail sent (they name the op that sent them)."""
        return getattr(self.command, "result", None)

    @property
    def accepted(self) -> bool:
        return self.outcome == ACCEPTED


@dataclass(frozen=True)
class JobLog:
    """One job's commands in log order, folded (``fold_job``)."""

    job_id: str
    entries: tuple[LogEntry, ...] = ()

    @property
    def created(self) -> LogEntry | None:
        """The accepted add or schedule that made the job (None: none in the log)."""
        return next((e for e in self.entries if e.event == EventType.ADDED.name), None)

    @property
    def scheduled_ms(self) -> int | None:
        made = self.created
        return made.command.time_ms if made and isinstance(made.command, Schedule) else None

    def accepted(self, *events: str) -> list[LogEntry]:
        return [e for e in self.entries if e.accepted and e.event in events]


@dataclass(frozen=True)
class LogView:
    """Every job's ``JobLog`` (by the job id's text), as read to the log's end.
    ``asked``: the jobs it was read for (None: every job of the log); a job outside
    them has no log here, which says nothing about the log."""

    jobs: Mapping[str, JobLog] = field(default_factory=dict)
    asked: frozenset[str] | None = None

    def job(self, job_id: str) -> JobLog:
        return self.jobs.get(job_id, JobLog(job_id))

    def covers(self, job_id: str) -> bool:
        """Whether the view was read for the job (its commands are all here)."""
        return self.asked is None or job_id in self.asked or job_id in self.jobs


def commands_of_records(records: Iterable[Record]) -> list[LogCommand]:
    """The job commands of ``records`` (one partition's in offset order; partitions may
    interleave), with a bulk slice admitted twice skipped as the processor skips it.
    Undecodable records and queue or recurrence commands name no job: left out."""
    admitted: dict[int, int] = {}
    found = []
    for record in records:
        if record.value is None:
            continue
        try:
            source, items = read_record(record.value)
        except CodecError:
            continue
        if source is not None:
            before = admitted.get(record.partition, NOTHING_ADMITTED)
            if source.partition != record.partition or not admits(source, before):
                continue
            admitted[record.partition] = source.end
        for index, data in enumerate(items):
            try:
                command = decode_command(data).command
            except CodecError:
                continue
            if isinstance(command, NO_JOB_COMMANDS):
                continue
            found.append(LogCommand(str(command.job_id), record.partition,
                                    position(record.offset, index), record.timestamp_ms,
                                    command))
    return found


def _entry(job: Job | None, command: LogCommand) -> tuple[LogEntry, Job | None]:
    result = step(job, command.command, command.at_ms, command.position)
    outcome = result.outcome
    if isinstance(outcome, Accepted):
        event = outcome.event
        after = None if result.removes else result.job
        return LogEntry(command.position, command.at_ms, command.command, ACCEPTED,
                        event.type.name, getattr(event, "requeued", None), after), after
    assert isinstance(outcome, (Rejected, Ignored))
    kind = REJECTED if isinstance(outcome, Rejected) else IGNORED
    return LogEntry(command.position, command.at_ms, command.command, kind,
                    job_after=job), job


def fold_job(job_id: str, commands: Sequence[LogCommand]) -> JobLog:
    """One job's commands folded in position order with the processor's ``step``."""
    job: Job | None = None
    entries = []
    for command in sorted(commands, key=lambda c: c.position):
        if command.job_id != job_id:
            raise ValueError(f"command of job {command.job_id} folded into job {job_id}")
        entry, job = _entry(job, command)
        entries.append(entry)
    return JobLog(job_id, tuple(entries))


def log_view(commands: Iterable[LogCommand], job_ids: Iterable[str] | None = None) -> LogView:
    """Every job's fold (only ``job_ids``' when given: a run's own jobs)."""
    wanted = None if job_ids is None else {str(uuid.UUID(j)) for j in job_ids}
    by_job: dict[str, list[LogCommand]] = defaultdict(list)
    for command in commands:
        if wanted is None or command.job_id in wanted:
            by_job[command.job_id].append(command)
    return LogView({job_id: fold_job(job_id, cmds) for job_id, cmds in by_job.items()},
                   None if wanted is None else frozenset(wanted))


def read_log(bootstrap: str, commands_topic: str,
             job_ids: Iterable[str] | None = None) -> LogView:
    """The log view of ``commands_topic`` read from its start to its end (Kafka)."""
    from eventq.kafka.logreader import read_topic

    return log_view(commands_of_records(read_topic(bootstrap, commands_topic)), job_ids)


__all__ = ["ACCEPTED", "REJECTED", "IGNORED", "LogCommand", "LogEntry", "JobLog", "LogView",
           "commands_of_records", "fold_job", "log_view", "read_log"]
