"""What a workq command log means when replayed in order: a pure fold.

``replay(records, now_ns)`` rebuilds the jobs a workq server would hold after
replaying the log at time ``now_ns`` (Unix ns). It follows workq's job controller:

* add: skipped if ``created + ttl`` has passed at ``now_ns`` (strictly before now);
  schedule: skipped if ``time + ttl`` has passed (a schedule without a time counts as
  passed, as Go's zero time plus any ttl is long past);
* commands on an id that is not live are no-ops (it expired, was deleted, or its add
  was skipped);
* start-attempt (a successful lease): LEASED, attempts + 1;
* timeout-attempt (TTR passed): PENDING, or FAILED with an empty result when
  ``max_attempts > 0 and attempts >= max_attempts``; no-op on a finished job;
* complete: COMPLETED with the result; fail: FAILED with the result, fails + 1 (workq
  never retried failed jobs);
* delete, expire: the job is removed whatever its state.

Where workq's replay would stop with an error because the log contradicts itself,
the fold leaves the job as it is and counts the record as ``rejected``: an add or
schedule of an id that is already live, complete/fail of a job that is already
COMPLETED or FAILED, start-attempt of a job that is LEASED or finished. A
start-attempt beyond max-attempts (or workq's hard cap of 255) marks the job FAILED
without a result, as workq's controller does, and is counted as rejected too.
workq's input validation (name pattern, ttr/ttl ranges, UUID version) is not
repeated here. An add keeps no ``time`` (workq writes the zero time there; a
job with a ``time_ns`` is a scheduled one). Schedule wake-ups and ``run`` jobs are not in the log.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import IntEnum

from .commands import (
    COMMAND_NAMES,
    Command,
    WqAdd,
    WqComplete,
    WqDelete,
    WqExpire,
    WqFail,
    WqSchedule,
    WqStartAttempt,
    WqTimeoutAttempt,
)

NS_PER_MS = 1_000_000
MAX_HARD_ATTEMPTS = 255  # workq's cap on attempts when max-attempts is 0 (unlimited)


class WorkqState(IntEnum):
    """workq's run-record states, with workq's numbers."""

    NEW = 0
    COMPLETED = 1
    FAILED = 2
    PENDING = 3
    LEASED = 4


@dataclass(slots=True)
class WorkqJob:
    """A live job after replay. ``time_ns`` is ``None`` for jobs that were added
    (not scheduled). ``result`` is ``None`` until one is written; ``result_ok`` is
    True only for COMPLETED."""

    id: uuid.UUID
    name: str
    ttr_ms: int
    ttl_ms: int
    priority: int
    max_attempts: int
    max_fails: int
    payload: bytes
    time_ns: int | None
    created_ns: int
    attempts: int = 0
    fails: int = 0
    state: WorkqState = WorkqState.NEW
    result: bytes | None = None
    result_ok: bool = False

    @property
    def expires_ns(self) -> int:
        """When workq's TTL removes the job (from time if scheduled, else created)."""
        base = self.time_ns if self.time_ns is not None else self.created_ns
        return base + self.ttl_ms * NS_PER_MS

    @property
    def finished(self) -> bool:
        return self.state in (WorkqState.COMPLETED, WorkqState.FAILED)


@dataclass
class ReplaySummary:
    """Counts for a dry run. ``by_type`` is keyed by command name ("add", ...)."""

    records: int = 0
    by_type: Counter[str] = field(default_factory=Counter)
    skipped_expired: int = 0  # add/schedule records skipped because the TTL had passed
    unknown_id: int = 0  # commands on an id that was not live (no-ops)
    rejected: int = 0  # contradictory records (see module doc)
    live_by_state: Counter[str] = field(default_factory=Counter)  # e.g. {"PENDING": 3}

    @property
    def live(self) -> int:
        return sum(self.live_by_state.values())


def _command_of(item: object) -> Command:
    # Accept bare commands or tuples ending with one, as yielded by iter_commands.
    return item[-1] if isinstance(item, tuple) else item  # type: ignore[return-value]  # a Command or a tuple ending in one


class Replayer:
    """The fold as an object: ``apply`` commands in log order, read ``jobs``."""

    def __init__(self, now_ns: int) -> None:
        self.now_ns = now_ns
        self.jobs: dict[uuid.UUID, WorkqJob] = {}
        self.summary = ReplaySummary()

    def apply(self, cmd: Command) -> None:
        s = self.summary
        s.records += 1
        s.by_type[COMMAND_NAMES[cmd.TYPE]] += 1
        jobs = self.jobs
        if isinstance(cmd, (WqAdd, WqSchedule)):
            if isinstance(cmd, WqAdd):
                expiry = cmd.created_ns + cmd.ttl_ms * NS_PER_MS
            elif cmd.time_ns is None:
                expiry = None
            else:
                expiry = cmd.time_ns + cmd.ttl_ms * NS_PER_MS
            if expiry is None or self.now_ns > expiry:
                s.skipped_expired += 1
                return
            if cmd.id in jobs:
                s.rejected += 1
                return
            jobs[cmd.id] = WorkqJob(
                id=cmd.id,
                name=cmd.name,
                ttr_ms=cmd.ttr_ms,
                ttl_ms=cmd.ttl_ms,
                priority=cmd.priority,
                max_attempts=cmd.max_attempts,
                max_fails=cmd.max_fails,
                payload=cmd.payload,
                time_ns=cmd.time_ns if isinstance(cmd, WqSchedule) else None,
                created_ns=cmd.created_ns,
            )
            return
        job = jobs.get(cmd.id)
        if job is None:
            s.unknown_id += 1
            return
        if isinstance(cmd, (WqDelete, WqExpire)):
            del jobs[cmd.id]
        elif isinstance(cmd, WqStartAttempt):
            if job.state == WorkqState.LEASED or job.finished:
                s.rejected += 1
            elif (
                job.max_attempts != 0 and job.attempts >= job.max_attempts
            ) or job.attempts >= MAX_HARD_ATTEMPTS:
                job.state = WorkqState.FAILED
                s.rejected += 1
            else:
                job.state = WorkqState.LEASED
                job.attempts += 1
        elif isinstance(cmd, WqTimeoutAttempt):
            if job.finished:
                return
            if job.max_attempts > 0 and job.attempts >= job.max_attempts:
                job.state = WorkqState.FAILED
                job.result = b""
                job.result_ok = False
            else:
                job.state = WorkqState.PENDING
        elif isinstance(cmd, (WqComplete, WqFail)):
            if job.finished or job.result is not None:
                s.rejected += 1
                return
            job.result = cmd.result
            if isinstance(cmd, WqComplete):
                job.state = WorkqState.COMPLETED
                job.result_ok = True
            else:
                job.state = WorkqState.FAILED
                job.result_ok = False
                job.fails += 1
        else:  # pragma: no cover - exhaustive over Command
            raise TypeError(f"not a workq command: {type(cmd).__name__}")

    def apply_all(self, records: Iterable[object]) -> None:
        for item in records:
            self.apply(_command_of(item))

    def finish_summary(self) -> ReplaySummary:
        """The summary with ``live_by_state`` filled in from the current jobs."""
        self.summary.live_by_state = Counter(job.state.name for job in self.jobs.values())
        return self.summary


def replay(records: Iterable[object], now_ns: int) -> dict[uuid.UUID, WorkqJob]:
    """Replay commands in log order; return the live jobs by id.

    ``records`` holds commands, or tuples whose last item is a command (such as the
    ``(path, offset, time_ns, command)`` tuples of ``segments.iter_commands``).
    """
    r = Replayer(now_ns)
    r.apply_all(records)
    return r.jobs


def replay_with_summary(
    records: Iterable[object], now_ns: int
) -> tuple[dict[uuid.UUID, WorkqJob], ReplaySummary]:
    """``replay`` plus the dry-run counts."""
    r = Replayer(now_ns)
    r.apply_all(records)
    return r.jobs, r.finish_summary()


def dry_run(records: Iterable[object], now_ns: int) -> ReplaySummary:
    """Replay without keeping the jobs: records read, per type, skipped as expired,
    no-ops on unknown ids, rejected, and live jobs by state."""
    return replay_with_summary(records, now_ns)[1]
