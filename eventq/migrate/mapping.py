"""The pure mapping between workq's replayed jobs and eventq's job model.

Import: ``import_command(WorkqJob) -> Import`` (eventq.core, type 64), a complete
snapshot, so the job keeps its created time, TTL deadline, scheduled time, attempts,
fails, state and result. Export: ``workq_job(Job) -> WorkqJob`` for
``eventq.cmdlog.write_jobs``.

Rules (import):

* Times: workq logs Unix nanoseconds, eventq keeps Unix milliseconds. A time is
  rounded down to its millisecond (floor division, which is truncation for every time
  after 1970): ``created_ms = created_ns // 1_000_000``, likewise ``scheduled_ms``.
  The TTL deadline is recomputed as eventq defines it (``created_ms`` or
  ``scheduled_ms`` + ``ttl_ms``), so it can be up to 1 ms earlier than workq's.
* LEASED becomes PENDING: the worker that held the lease belongs to the old server and
  is gone, and workq's log has no lease deadline. ``attempts`` is kept, so the next
  lease is attempt ``attempts + 1`` (and a job already at its attempt limit fails on
  that lease, as workq would have failed it when its TTR passed).
* FAILED without a result (workq's start-attempt beyond max-attempts fails the job
  without writing one) gets the empty result, as eventq's AttemptsExhausted does.
  ``result_ok`` follows the state (True only for COMPLETED).
* A job eventq cannot represent (name outside ``[A-Za-z0-9_.-]{1,255}``, TTR, TTL,
  priority, attempt or fail limits or payload outside the protocol's ranges, a time
  outside years 1..9999, a TTL ending before creation) raises ``Unimportable`` with
  the reason; the importer reports and skips it.

Export: the reverse (ms times become ns exactly). What the workq format cannot carry is
reported by ``export_notes`` (and ``write_jobs`` reports every job that does not replay to
exactly the ``WorkqJob`` given): a job without TTL (a ``run`` job, never logged by workq)
is not exported at all; a LEASED job's lease deadline is lost (it replays as LEASED in
workq, and comes back PENDING when imported into eventq); fails of a job that is not
FAILED, or above 1, are lost (workq's fail record finishes a job). eventq's own flags are
lost too: -backoff, and -after (docs/workflows.md, "Dependencies": workq has no
dependencies, so a job's upstreams are not written, and a WAITING job is written as NEW,
its schedule time kept: ready when due rather than when its upstreams complete), a failure
group other than the two workq's commands produce and a retry's time
(docs/workflows.md, "Failure groups and retry": workq has no groups and no retry).
"""

from __future__ import annotations

import uuid
from typing import Any

from eventq.cmdlog import WorkqJob, WorkqState
from eventq.core import Import, Job, State
from eventq.core.fields import WORKQ_OPTIONS
from eventq.core.job import deadline_after, was_retried
from eventq.core.partitioner import job_key, partition_for_key

NS_PER_MS = 1_000_000


class Unimportable(ValueError):
    """A live workq job that eventq's job model cannot hold; ``job_id`` and ``reason``."""

    def __init__(self, job_id: uuid.UUID, reason: str) -> None:
        super().__init__(f"job {job_id}: {reason}")
        self.job_id = job_id
        self.reason = reason


def shared_options(job: WorkqJob | Job) -> dict[str, Any]:
    """The options a workq job and an eventq job both hold, by the same names (name, TTR,
    TTL, payload, priority, max-attempts, max-fails: eventq/core/fields.py's workq
    options), as they are: each side checks them (``Import`` refuses what eventq's job
    cannot hold)."""
    return {option.attr: getattr(job, option.attr) for option in WORKQ_OPTIONS}


def ns_to_ms(ns: int) -> int:
    """Unix ns -> Unix ms, rounded down (truncation for times after 1970)."""
    return ns // NS_PER_MS


def ms_to_ns(ms: int) -> int:
    return ms * NS_PER_MS


_STATES = {
    WorkqState.NEW: State.NEW,
    WorkqState.PENDING: State.PENDING,
    WorkqState.LEASED: State.PENDING,  # the lease's worker is gone (module doc)
    WorkqState.COMPLETED: State.COMPLETED,
    WorkqState.FAILED: State.FAILED,
}


def import_command(job: WorkqJob) -> Import:
    """The Import command that recreates a replayed workq job in eventq (module doc)."""
    state = _STATES[WorkqState(job.state)]
    created_ms = ns_to_ms(job.created_ns)
    scheduled_ms = None if job.time_ns is None else ns_to_ms(job.time_ns)
    expires_ms = None  # ttl 0: no TTL (Import refuses it for a scheduled job)
    if job.ttl_ms:
        start = created_ms if scheduled_ms is None else scheduled_ms
        expires_ms = deadline_after(start, job.ttl_ms)
    final = state in (State.COMPLETED, State.FAILED)
    if final:
        result: bytes | None = b"" if job.result is None else job.result
        result_ok: bool | None = state is State.COMPLETED
    else:
        result = result_ok = None
    try:
        return Import(
            job_id=job.id,
            **shared_options(job),
            attempts=job.attempts,
            fails=job.fails,
            state=state,
            created_ms=created_ms,
            scheduled_ms=scheduled_ms,
            expires_ms=expires_ms,
            lease_deadline_ms=None,
            result=result,
            result_ok=result_ok,
        )
    except ValueError as error:
        raise Unimportable(job.id, str(error)) from None


def placement(job_id: uuid.UUID, partitions: int) -> tuple[bytes, int]:
    """(key, partition) of a job's commands: murmur2 of the key, as every producer."""
    key = job_key(job_id)
    return key, partition_for_key(key, partitions)


# ------------------------------------------------------------------------ export


def workq_state(state: State) -> WorkqState:
    """workq's state of an eventq state: the same number, but WAITING (workq has no
    dependencies, so a waiting job is written as NEW: module doc)."""
    return WorkqState.NEW if state is State.WAITING else WorkqState(int(state))


def workq_job(job: Job) -> WorkqJob:
    """The workq job that ``job`` is, for ``eventq.cmdlog.write_jobs``."""
    return WorkqJob(
        id=job.id,
        **shared_options(job),
        time_ns=None if job.scheduled_ms is None else ms_to_ns(job.scheduled_ms),
        created_ns=ms_to_ns(job.created_ms),
        attempts=job.attempts,
        fails=job.fails,
        state=workq_state(job.state),
        result=job.result,
        result_ok=bool(job.result_ok),
    )


NO_TTL = "no TTL (a run job): workq's log cannot hold it, not exported"
LEASE_LOST = "LEASED: the lease deadline is not in workq's format; imports back as PENDING"
BACKOFF_LOST = ("-backoff: workq has no retry backoff; imports back without it (a job "
                "waiting out one is ready at once)")
# docs/workflows.md, "Dependencies": -after. One note per job with upstreams, WAITING or
# not.
WAITING_LOST = ("WAITING (-after): workq has no dependencies; written as NEW, so it is ready "
                "at once instead of waiting for its upstreams, and imports back without them")
AFTER_LOST = "-after: workq has no dependencies; imports back without its upstreams"
# docs/workflows.md, "Tags": -tags.
TAGS_LOST = "-tags: workq has no tags; imports back without them"
# docs/workflows.md, "Failure groups and retry".
GROUP_LOST = ("a failure group (fail -group=, upstream-failed): workq has none; imports back "
              "in failed or attempts-exhausted")
RETRY_LOST = ("retried with -delay, or ready before its schedule time by a retry: workq has "
              "no retry; imports back at its schedule time")
# What a job keeps in workq's log but loses on the way back: listed with the jobs that do
# not replay exactly (eventq/migrate/exporter.py).
REPLAY_LOSSES = (BACKOFF_LOST, WAITING_LOST, AFTER_LOST, TAGS_LOST, GROUP_LOST, RETRY_LOST)


def exportable(job: Job) -> bool:
    """False for jobs the workq format cannot hold at all (no TTL)."""
    return job.ttl_ms != 0


def export_notes(job: Job) -> list[str]:
    """What of ``job`` does not survive export and re-import into eventq, beyond what
    ``write_jobs`` itself detects by replaying (fails, attempts, results)."""
    notes = []
    if not exportable(job):
        notes.append(NO_TTL)
    elif job.state is State.LEASED:
        notes.append(LEASE_LOST)
    if exportable(job) and job.backoff_ms:
        notes.append(BACKOFF_LOST)
    if exportable(job) and job.upstreams:
        notes.append(WAITING_LOST if job.state is State.WAITING else AFTER_LOST)
    if exportable(job) and job.tags:
        notes.append(TAGS_LOST)
    if exportable(job) and job.group is not None:
        notes.append(GROUP_LOST)
    if exportable(job) and was_retried(job):
        notes.append(RETRY_LOST)
    return notes
