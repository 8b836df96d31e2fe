"""When a job waited and ran: the one rule for wait and run times (pure).

Both ``eventq spark stats`` (folding the command log, eventq/core/fold.py) and the
processor's live statistics (eventq/state/livestats.py) measure with this rule, so
their histograms agree:

    wait = lease time (attempt started) - when the job became ready to lease: its add
           (or its scheduled time, if later), or the fail / TTR timeout that requeued it,
           or for a dependent its release time (docs/workflows.md, "Dependencies"), or
           the retry that made it NEW again (or the end of its -delay)
    run  = complete / fail time - the start of that attempt (timed-out attempts and
           attempts given back before reaching a client have none)

A job's times are ``Since(ready_ms, leased_ms)``; ``advance`` gives the next ones and
the samples an accepted event yields. All times are broker times (LogAppendTime).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from eventq.core.events import EventType
from eventq.core.job import Job, State, ready_time_ms, wake_time_ms


class Since(NamedTuple):
    ready_ms: int | None = None  # since when the job waits to be leased
    leased_ms: int | None = None  # start of the current attempt


class Samples(NamedTuple):
    since: Since
    wait_ms: int | None = None
    run_ms: int | None = None
    attempt: int | None = None  # the attempt a sample (or a timeout) belongs to


NOTHING = Since()
_ENDS_ATTEMPT = frozenset({EventType.COMPLETED, EventType.FAILED, EventType.FAIL_RETRIED})


def ready_from_state(job: Job) -> int:
    """When a job nobody requeued became ready: created, or scheduled if later."""
    return max(job.created_ms, job.scheduled_ms or job.created_ms)


def advance(since: Since, event: Any, before: Job | None, after: Job | None, at_ms: int) -> Samples:
    """The job's times after the accepted ``event`` (at ``at_ms``), and its samples.

    ``event`` is an ``Event``, typed Any: this branches on ``event.type``, by which
    mypy does not narrow the union."""
    kind = event.type
    if kind is EventType.ADDED or kind is EventType.IMPORTED:
        assert after is not None
        if after.state is State.WAITING:  # not ready until released
            return Samples(NOTHING)
        leased = at_ms if after.state is State.LEASED else None
        return Samples(Since(ready_from_state(after), leased))
    if kind is EventType.RELEASED:
        assert after is not None
        return Samples(Since(ready_time_ms(after), None))
    if kind is EventType.RETRIED or kind is EventType.UPSTREAM_RETRIED:
        # [eventq] retried (docs/workflows.md, "retry"): ready from the retry (or its
        # delay), or WAITING again until released; still FAILED (a cascade that names
        # another).
        assert after is not None
        if after.state is not State.NEW:
            return Samples(NOTHING)
        wake = wake_time_ms(after)
        return Samples(Since(at_ms if wake is None else max(at_ms, wake), None))
    if kind is EventType.ATTEMPT_STARTED:
        wait = None if since.ready_ms is None else at_ms - since.ready_ms
        return Samples(Since(since.ready_ms, at_ms), wait_ms=wait, attempt=event.attempt)
    if kind in _ENDS_ATTEMPT:
        run = attempt = None
        if before is not None and before.state is State.LEASED:
            attempt = before.attempts
            if since.leased_ms is not None:
                run = at_ms - since.leased_ms
        ready = at_ms if kind is EventType.FAIL_RETRIED else since.ready_ms
        return Samples(Since(ready, None), run_ms=run, attempt=attempt)
    if kind is EventType.ATTEMPT_RELEASED:  # never reached a client: not a run
        return Samples(Since(since.ready_ms, None))
    if kind is EventType.ATTEMPT_TIMED_OUT:
        ready = at_ms if event.requeued else None
        return Samples(Since(ready, None), attempt=event.attempt)
    if after is None:  # deleted or expired
        return Samples(NOTHING)
    return Samples(since)
