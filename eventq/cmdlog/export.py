"""Writing live jobs as a workq command log that rebuilds them when replayed.

Per job, in the order given: an add record (or schedule, when the job has a
``time_ns``) carrying its created time, then the records that bring it to its state:

* NEW:        nothing more;
* PENDING:    (start-attempt, timeout-attempt) x attempts (one timeout-attempt
              alone when attempts is 0);
* LEASED:     (start-attempt, timeout-attempt) x (attempts - 1), start-attempt;
* COMPLETED:  the attempts as for LEASED (none when attempts is 0), then complete
              with the result;
* FAILED:     the same, then fail with the result; or, for a job that workq failed
              itself on a TTR timeout after its last allowed attempt (max_attempts > 0,
              attempts == max_attempts, fails 0, empty result), the attempts as for
              PENDING, whose last timeout-attempt fails it.

What cannot round-trip exactly (workq has no record for it):

* ``fails``: only a fail record increments it, and that record also finishes the
  job; so a job that is not FAILED with fails > 0, or a FAILED one with fails > 1,
  comes back with fails 0 or 1;
* a finished job with ``result is None`` (written with an empty result), and one
  whose attempts workq's start-attempt would refuse (over max_attempts or 255);
* a NEW job with attempts > 0 (comes back with attempts 0: workq only leaves NEW
  through a lease or a timeout);
* a job whose TTL has passed at ``now_ns`` (replay would skip its add);
* a ``result_ok`` that disagrees with the state (it follows the state).

``write_jobs`` computes these by replaying what it wrote in memory and comparing;
the jobs that differ are listed in the returned ``ExportReport.inexact``.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from .commands import (
    Command,
    WqAdd,
    WqComplete,
    WqFail,
    WqSchedule,
    WqStartAttempt,
    WqTimeoutAttempt,
)
from .replay import WorkqJob, WorkqState, replay
from .segments import DEFAULT_MAX_SEGMENT_BYTES, SegmentWriter, list_segments


@dataclass
class ExportReport:
    """``paths``: segment files written; ``inexact``: ``(job id, what differs)`` for
    each job that replays differently from what was passed in."""

    records: int = 0
    jobs: int = 0
    paths: list[str] = field(default_factory=list)
    inexact: list[tuple[uuid.UUID, str]] = field(default_factory=list)


def job_commands(job: WorkqJob) -> list[Command]:
    """The records that recreate one job (see module doc)."""
    kind = WqSchedule if job.time_ns is not None else WqAdd
    cmds: list[Command] = [kind(
        id=job.id,
        name=job.name,
        ttr_ms=job.ttr_ms,
        ttl_ms=job.ttl_ms,
        priority=job.priority,
        max_attempts=job.max_attempts,
        max_fails=job.max_fails,
        payload=job.payload,
        time_ns=job.time_ns,
        created_ns=job.created_ns,
    )]
    start = WqStartAttempt(job.id)
    timeout = WqTimeoutAttempt(job.id)
    state = WorkqState(job.state)

    def leased_cycles(n: int) -> list[Command]:
        # n starts; each but the last followed by a timeout, leaving the job LEASED.
        out: list[Command] = []
        for i in range(n):
            if i:
                out.append(timeout)
            out.append(start)
        return out

    if state == WorkqState.NEW:
        pass
    elif state == WorkqState.PENDING:
        cmds += [start, timeout] * job.attempts if job.attempts else [timeout]
    elif state == WorkqState.LEASED:
        cmds += leased_cycles(job.attempts)
    elif state == WorkqState.COMPLETED:
        cmds += leased_cycles(job.attempts)
        cmds.append(WqComplete(job.id, job.result or b""))
    elif state == WorkqState.FAILED:
        if (
            job.max_attempts > 0
            and job.attempts == job.max_attempts
            and job.fails == 0
            and job.result == b""
        ):
            cmds += [start, timeout] * job.attempts
        else:
            cmds += leased_cycles(job.attempts)
            cmds.append(WqFail(job.id, job.result or b""))
    return cmds


def iter_export_commands(jobs: Iterable[WorkqJob]) -> Iterator[Command]:
    for job in jobs:
        yield from job_commands(job)


def _describe_difference(want: WorkqJob, got: WorkqJob | None) -> str:
    if got is None:
        return "not live after replay (its TTL has passed or its records were refused)"
    diffs = [
        f"{name}: {getattr(want, name)!r} -> {getattr(got, name)!r}"
        for name in WorkqJob.__slots__
        if getattr(want, name) != getattr(got, name)
    ]
    return "; ".join(diffs)


def write_jobs(
    dirpath: str | os.PathLike[str],
    jobs: Iterable[WorkqJob],
    *,
    now_ns: int | None = None,
    max_segment_bytes: int = DEFAULT_MAX_SEGMENT_BYTES,
) -> ExportReport:
    """Write ``jobs`` as a command log in ``dirpath`` (created if missing; must hold
    no segment files). Records are stamped with ``now_ns`` (default: now), which is
    also the time at which the round trip is checked. Job ids must be unique."""
    jobs = list(jobs)
    now = time.time_ns() if now_ns is None else now_ns
    seen: set[uuid.UUID] = set()
    for job in jobs:
        if job.id in seen:
            raise ValueError(f"duplicate job id {job.id}")
        seen.add(job.id)
    if os.path.isdir(dirpath) and list_segments(dirpath):
        raise FileExistsError(f"{os.fspath(dirpath)} already holds segment files")

    report = ExportReport(jobs=len(jobs))
    with SegmentWriter(dirpath, max_segment_bytes) as w:
        for job in jobs:
            for cmd in job_commands(job):
                w.append_command(cmd, now)
        report.records = w.records_written
        report.paths = list(w.paths)

    rebuilt = replay(iter_export_commands(jobs), now)
    for job in jobs:
        got = rebuilt.get(job.id)
        if got != job:
            report.inexact.append((job.id, _describe_difference(job, got)))
    return report
