"""Workflows' transitions (the table of docs/workflows.md, "Job and queue blocks"): how
``depend``, ``upstream`` notices, ``retry`` and a WAITING job's ``fail`` are decided, and
how their events change a job (the entries of eventq/core/machine.py's tables, which
alone name them: hence their leading underscore).

Workflows (docs/workflows.md, "Dependencies"). An add or schedule with ``after`` makes a
WAITING job (state 5), never leased; ``complete`` and ``fail`` apply to it as to any
non-final job, but a fail with fails left keeps it WAITING (``FailCounted``, no backoff
wait); touch is ``-NOT-FOUND``. The workflow commands are rows of the table too:
``Depend`` (69) never changes the upstream it is applied to: it is ``Ignored`` as
``REGISTERED`` (or ``REGISTERED_FINISHED`` when the upstream is COMPLETED or FAILED,
which it is told at once), and the registration beside the job is what
eventq/core/followups.py makes of it. ``Upstream`` (70) is applied to the dependent
it names, created at ``dependent_created`` (its ``added_at``), and only when its
``change`` is after the last change applied from that upstream (else
``STALE_NOTICE``): recorded in the link (``UpstreamNoted``), releasing a WAITING job
whose last upstream completed (``Released``: NEW), or failing one whose upstream ended
without completing (``UpstreamFailed``). Positions of an upstream's changes grow (one
upstream's commands are all in one partition), so a repeated notice is ignored.

Failure groups and retry (docs/workflows.md, "Failure groups and retry"). A final
``fail`` puts the job in its ``-group`` (``Failed.group``; the job's ``group`` keeps it
unless it is the one its fields give, job.failure_group). ``Retry`` (71) applies to a
FAILED job only (``-NOT-FOUND`` otherwise): ``Retried`` makes it NEW, or WAITING while an
upstream is not COMPLETED, asking again the upstreams it knew ended (``asked_again``).
A notice that the upstream which failed a FAILED dependent was retried retries the
dependent too (``UpstreamRetried``), and its own retry tells its dependents in turn.
"""

from __future__ import annotations

import uuid
from typing import Any

from eventq.core.commands import Depend, Fail, Retry, Upstream
from eventq.core.events import (
    FailCounted,
    Failed,
    Released,
    Retried,
    UpstreamFailed,
    UpstreamNoted,
    UpstreamRetried,
)
from eventq.core.job import (
    ENDED_UNCOMPLETED,
    UPSTREAM_FAILED_GROUP,
    Job,
    Link,
    State,
    UpstreamOutcome,
    job_with,
    link_of,
    link_outcome,
    ready_time_ms,
    upstream_failure,
)
from eventq.core.outcomes import (
    REGISTERED,
    REGISTERED_FINISHED,
    STALE_NOTICE,
    Accepted,
    Ignored,
    Outcome,
)
from eventq.limits import MAX_TIME_MS

# ------------------------------------------------------------------- decide handlers

_REGISTERED, _REGISTERED_FINISHED = Ignored(REGISTERED), Ignored(REGISTERED_FINISHED)


def _fail_waiting(job: Job | None, c: Fail, at_ms: int, offset: int) -> Outcome:
    """A WAITING job's fail: with fails left it stays WAITING, counted (spec)."""
    assert job is not None
    if job.fails + 1 < job.max_fails:
        return Accepted(FailCounted(c.job_id, at_ms, offset))
    return Accepted(Failed(c.job_id, at_ms, offset, c.result, c.group))


def _retry(job: Job | None, c: Retry, at_ms: int, offset: int) -> Outcome:
    """retry of a FAILED job (any other state is ``-NOT-FOUND``: the grid)."""
    return Accepted(Retried(c.job_id, at_ms, offset, c.delay_ms))


def _stale_notice(job: Job, c: Upstream) -> bool:
    """A notice for another job of this id, or not after the last from its upstream."""
    if job.added_at != c.dependent_created:
        return True
    link = link_of(job, c.upstream)
    return link is None or (link.change is not None and c.change <= link.change)


def _upstream_noted(job: Job | None, c: Upstream, at_ms: int, offset: int) -> Outcome:
    assert job is not None
    if _stale_notice(job, c):
        return Ignored(STALE_NOTICE)
    return Accepted(UpstreamNoted(c.dependent, at_ms, offset, c.upstream, c.outcome, c.change,
                                  c.at_ms))


def _failed_by(job: Job, upstream: uuid.UUID) -> bool:
    """The job is FAILED in ``upstream-failed`` because ``upstream`` failed (its result
    names it): a retry of that upstream retries it too (docs/workflows.md, "retry")."""
    link = link_of(job, upstream)
    return (
        job.group == UPSTREAM_FAILED_GROUP and link is not None
        and link.outcome is UpstreamOutcome.FAILED
        and job.result == upstream_failure(upstream, link.outcome)
    )  # fmt: skip


def _upstream_final(job: Job | None, c: Upstream, at_ms: int, offset: int) -> Outcome:
    """A notice to a FAILED dependent: the upstream that failed it was retried (it is
    retried too: ``UpstreamRetried``), or any other (recorded)."""
    assert job is not None
    if _stale_notice(job, c):
        return Ignored(STALE_NOTICE)
    fields = (c.dependent, at_ms, offset, c.upstream, c.outcome, c.change, c.at_ms)
    if c.outcome is UpstreamOutcome.RETRIED and _failed_by(job, c.upstream):
        return Accepted(UpstreamRetried(*fields))
    return Accepted(UpstreamNoted(*fields))


def _upstream_waiting(job: Job | None, c: Upstream, at_ms: int, offset: int) -> Outcome:
    assert job is not None
    if _stale_notice(job, c):
        return Ignored(STALE_NOTICE)
    fields = (c.dependent, at_ms, offset, c.upstream, c.outcome, c.change, c.at_ms)
    if c.outcome in ENDED_UNCOMPLETED:
        return Accepted(UpstreamFailed(*fields))
    if c.outcome is UpstreamOutcome.COMPLETED and all(
        link.outcome is UpstreamOutcome.COMPLETED for link in job.upstreams if link.id != c.upstream
    ):
        return Accepted(Released(*fields))
    return Accepted(UpstreamNoted(*fields))


def _registered_finished(job: Job | None, c: Depend, at_ms: int, offset: int) -> Outcome:
    """A depend on a finished upstream, told at once of its end, unless the upstream's
    queue is outside the dependent's scope (docs/security.md, "Queue-name prefixes": such
    an upstream is absent to it, so it is registered as if unfinished and never told: the
    dependent waits, deterministically, as every replay decides here)."""
    assert job is not None
    if c.scope is not None and not job.name.startswith(c.scope):
        return _REGISTERED
    return _REGISTERED_FINISHED


# -------------------------------------------------------------------- evolve functions


def _fail_counted(job: Job, e: FailCounted) -> Job:
    return job_with(job, fails=job.fails + 1, version=e.offset)


def _links_after(
    job: Job, e: UpstreamNoted | Released | UpstreamFailed | UpstreamRetried
) -> tuple[Link, ...]:
    """The job's links with the notice of ``e`` recorded in its upstream's."""
    if link_of(job, e.upstream) is None:
        raise ValueError(f"{e.upstream} is not an upstream of job {job.id}")
    outcome = link_outcome(e.outcome)
    completed = e.change_ms if outcome is UpstreamOutcome.COMPLETED else None
    noted = Link(e.upstream, outcome, e.change, completed)
    return tuple(noted if link.id == e.upstream else link for link in job.upstreams)


def _noted(job: Job, e: UpstreamNoted) -> Job:
    return job_with(job, upstreams=_links_after(job, e), version=e.offset)


def _released(job: Job, e: Released) -> Job:
    links = _links_after(job, e)
    times = [link.completed_ms for link in links]
    if None in times:
        raise ValueError(f"job {job.id} is released with an upstream not COMPLETED")
    if job.scheduled_ms is not None:
        times.append(job.scheduled_ms)
    if job.delayed_ms is not None:  # a retry -delay: released no earlier than its time
        times.append(job.delayed_ms)
    return job_with(job, upstreams=links, state=State.NEW, released_ms=max(times),  # type: ignore[type-var]  # None is not in times: checked
                    version=e.offset)


def _upstream_failed(job: Job, e: UpstreamFailed) -> Job:
    return job_with(
        job, upstreams=_links_after(job, e), state=State.FAILED,
        result=upstream_failure(e.upstream, e.outcome), result_ok=False,
        group=UPSTREAM_FAILED_GROUP, finished_at=e.offset, finished_ms=e.at_ms, version=e.offset,
    )  # fmt: skip


def _retry_fields(offset: int) -> dict[str, Any]:
    """What every retry clears (spec: attempts, fails and backoff returns 0; result,
    group and failure time cleared; the TTL deadline does not change)."""
    return dict(
        attempts=0, fails=0, returns=0, retry_ms=None, lease_deadline_ms=None, result=None,
        result_ok=None, group=None, finished_at=None, finished_ms=None, version=offset,
    )  # fmt: skip


def asked_again(link: Link) -> Link:
    """A retried dependent's link to an upstream it knew ended: unfinished again and
    asked again (eventq/core/followups.py writes it a ``depend``). For a FAILED one, the
    last change applied goes back to just before the one that failed it, so that the
    upstream's answer, that change again while it is still FAILED, applies once more
    (and fails the dependent again); any older notice stays stale. A deleted or
    evicted one is waited for (an absent upstream): its next life's changes come later."""
    if link.outcome is UpstreamOutcome.FAILED:
        assert link.change is not None
        return Link(link.id, UpstreamOutcome.UNFINISHED, link.change - 1 if link.change else None)
    if link.outcome in ENDED_UNCOMPLETED:
        return Link(link.id, UpstreamOutcome.UNFINISHED, link.change)
    return link


def _retried(job: Job, e: Retried) -> Job:
    """A FAILED job retried (docs/workflows.md, "retry"): NEW when every upstream is
    COMPLETED (or it has none), at its old place in lease order, or at now + delay;
    else WAITING, its ended upstreams asked again (``asked_again``)."""
    links = tuple(map(asked_again, job.upstreams))
    delayed = min(e.at_ms + e.delay_ms, MAX_TIME_MS) if e.delay_ms else None
    common = _retry_fields(e.offset)
    if any(link.outcome is not UpstreamOutcome.COMPLETED for link in links):
        return job_with(job, state=State.WAITING, upstreams=links, released_ms=None,
                        delayed_ms=delayed, early=False, **common)
    released = None
    if links:  # released again at once: as a release would, no earlier than the delay
        times = [link.completed_ms for link in links]
        times += [t for t in (job.scheduled_ms, delayed) if t is not None]
        released = max(times)  # type: ignore[type-var]  # every link is COMPLETED: no None
    retried = job_with(job, state=State.NEW, released_ms=released, delayed_ms=delayed,
                       early=False, **common)
    time_ms = ready_time_ms(retried)
    if delayed is None and time_ms is not None and time_ms > e.at_ms:
        return job_with(retried, early=True)  # ready at once; its time stays (spec)
    return retried


def _upstream_retried(job: Job, e: UpstreamRetried) -> Job:
    """The upstream that failed the job was retried: the job is retried too, as by
    ``retry`` without delay (WAITING, for that upstream at least), unless another of
    its upstreams has ended too: then it stays FAILED (same group and failure time), its
    result naming that one (the first in -after order)."""
    links = _links_after(job, e)
    for link in links:
        if link.outcome in ENDED_UNCOMPLETED:
            return job_with(job, upstreams=links, result=upstream_failure(link.id, link.outcome),
                            version=e.offset)
    return job_with(job, state=State.WAITING, upstreams=links, released_ms=None,
                    delayed_ms=None, early=False, **_retry_fields(e.offset))
