"""The job: one immutable value holding everything the log says about a job.

A ``Job`` validates on construction: every combination of fields that the transition
rules (``machine.py``) can never produce raises ``ValueError``. Times are integer ms
since the Unix epoch (UTC), taken from the broker's clock of the command that set them.

[eventq] Workflows (docs/workflows.md, "Dependencies"): a job added with ``-after`` is a
*dependent*. It holds one ``Link`` per upstream, in -after order: what it knows of that
upstream (the latest outcome a notice applied, the position of the upstream's change
that carried it, the broker time of a completion). Everything else of a workflow lives
in records of its own beside the jobs (eventq/core/workflow.py). A job without
upstreams has none of these fields set, so its records and digest are what they were
before workflows existed.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from enum import IntEnum
from operator import attrgetter
from typing import Any

from eventq.core._check import (
    check_bool,
    check_bytes,
    check_int,
    check_name,
    check_opt_int,
    check_uuid,
)
from eventq.core.fields import (
    BACKOFF,
    TAGS,
    WORKQ_OPTIONS,
    check_declared,
    checker,
    with_no_ttl,
)
from eventq.limits import (
    MAX_AFTER_IDS,
    MAX_ATTEMPTS_LIMIT,
    MAX_BACKOFF_MS,
    MAX_DEADLINE_MS,
    MAX_OFFSET,
    MAX_PAYLOAD_BYTES,
    MAX_RETURNS,
    MAX_TIME_MS,
    MIN_TIME_MS,
)


class State(IntEnum):
    """Job states, numbered as the protocol shows them in ``inspect``."""

    NEW = 0
    COMPLETED = 1
    FAILED = 2
    PENDING = 3
    LEASED = 4
    WAITING = 5  # [eventq] a dependent waiting for its upstreams: never leased


FINAL_STATES = frozenset({State.COMPLETED, State.FAILED})
LEASABLE_STATES = frozenset({State.NEW, State.PENDING})  # may be leased once due


class UpstreamOutcome(IntEnum):
    """An upstream's outcome, as a dependent's ``Link`` keeps it and as an ``upstream``
    notice (commands.Upstream) carries it. ``UNFINISHED`` is only a link's (no notice
    yet, or the upstream was retried); ``RETRIED`` only a notice's (the upstream is
    unfinished again). The lowercase name is the protocol's word (``upstream <id>
    failed``)."""

    UNFINISHED = 0
    COMPLETED = 1
    FAILED = 2
    DELETED = 3
    EVICTED = 4
    RETRIED = 5

    @property
    def word(self) -> str:
        return self.name.lower()


LINK_OUTCOMES = frozenset(set(UpstreamOutcome) - {UpstreamOutcome.RETRIED})
NOTICE_OUTCOMES = frozenset(set(UpstreamOutcome) - {UpstreamOutcome.UNFINISHED})
# Outcomes that end a WAITING dependent (spec: "An upstream that ends without completing").
ENDED_UNCOMPLETED = frozenset(
    {UpstreamOutcome.FAILED, UpstreamOutcome.DELETED, UpstreamOutcome.EVICTED}
)
# Outcomes whose notice carries a result, copied to the dependent as an input.
WITH_RESULT = frozenset({UpstreamOutcome.COMPLETED, UpstreamOutcome.FAILED})
# [eventq] Failure groups (docs/workflows.md, "Failure groups and retry"): every
# FAILED job is in exactly one. ``failure_group`` gives a job's.
FAILED_GROUP = "failed"  # a final fail without -group (workq's only way to fail)
ATTEMPTS_EXHAUSTED_GROUP = "attempts-exhausted"  # its last attempt's TTR passed, or a lease found none left
UPSTREAM_FAILED_GROUP = "upstream-failed"  # the failure group of a dependent an upstream ended
# The groups workq's commands produce: the job block shows no ``group`` key for them.
BUILT_IN_GROUPS = frozenset({FAILED_GROUP, ATTEMPTS_EXHAUSTED_GROUP})


def upstream_failure(upstream: uuid.UUID, outcome: UpstreamOutcome) -> bytes:
    """The result of a dependent an upstream ended: ``upstream <id> <reason>``."""
    return b"upstream %s %s" % (str(upstream).encode(), outcome.word.encode())


def link_outcome(outcome: UpstreamOutcome) -> UpstreamOutcome:
    """What a link records of a notice's outcome (a retried upstream is unfinished)."""
    return UpstreamOutcome.UNFINISHED if outcome is UpstreamOutcome.RETRIED else outcome


@dataclass(frozen=True, slots=True)
class Link:
    """What a dependent knows of upstream ``id``: the latest ``outcome`` applied, the
    position of the upstream's change that carried it (``change``; None: no notice yet),
    and the broker time of that change when it was a completion (``completed_ms``: the
    release time counts from it). A notice whose change is not after ``change`` is
    ignored (commands.Upstream)."""

    id: uuid.UUID
    outcome: UpstreamOutcome = UpstreamOutcome.UNFINISHED
    change: int | None = None
    completed_ms: int | None = None

    def __post_init__(self) -> None:
        check_uuid("upstream id", self.id)
        if type(self.outcome) is not UpstreamOutcome:
            if type(self.outcome) is not int or self.outcome not in LINK_OUTCOMES:
                raise ValueError(f"a link's outcome must be an UpstreamOutcome, got {self.outcome!r}")
            object.__setattr__(self, "outcome", UpstreamOutcome(self.outcome))
        if self.outcome not in LINK_OUTCOMES:
            raise ValueError(f"a link's outcome cannot be {self.outcome.name}")
        if self.change is None:
            if self.outcome is not UpstreamOutcome.UNFINISHED:
                raise ValueError("a link with an outcome has the position of its change")
        else:
            check_int("change", self.change, 0, MAX_OFFSET)
        if self.outcome is UpstreamOutcome.COMPLETED:
            check_int("completed_ms", self.completed_ms, MIN_TIME_MS, MAX_TIME_MS)
        elif self.completed_ms is not None:
            raise ValueError("completed_ms is set only for a COMPLETED upstream")


def deadline_after(start_ms: int, duration_ms: int) -> int:
    """``start_ms + duration_ms``, saturated at ``MAX_DEADLINE_MS`` (a TTL may be 2^64-1)."""
    end = start_ms + duration_ms
    return end if end <= MAX_DEADLINE_MS else MAX_DEADLINE_MS


# A job's options (eventq/core/fields.py) as it holds them: a TTL of 0 is none.
_check_options = checker(with_no_ttl(WORKQ_OPTIONS))


@dataclass(frozen=True, slots=True)
class Job:
    """A job's full state.

    - ``ttl_ms`` 0 means no TTL (a ``run`` job); then ``expires_ms`` is None.
    - ``scheduled_ms`` is the ``schedule`` time (None for ``add``/``run``); the job is
      not ready before it. ``expires_ms`` counts from it, else from ``created_ms``.
    - ``lease_deadline_ms`` is set exactly while LEASED (the current attempt's TTR end).
    - ``result``/``result_ok`` are set exactly in the final states (COMPLETED: ok True;
      FAILED: ok False, result empty when attempts ran out).
    - ``version`` is the log position of the last command applied to this job
      (record offset and index in the record, eventq/core/batch.py).
    - [eventq] ``backoff_ms`` (``-backoff``, 0 = workq's behaviour), ``returns`` (how
      often the job went back to PENDING) and ``retry_ms`` (when its last return's wait
      ends; set only with a backoff, and kept once set, docs/protocol.md, "eventq extensions"): while set,
      it is the job's ``time`` (``ready_time_ms``), not ``scheduled_ms``.
    - [eventq] workflows, all unset for a job without upstreams: ``upstreams`` (its
      links, in -after order); ``added_at``, the position of the add that created it
      (the notices for it name it, so that one for an earlier job of the same id is
      ignored); ``released_ms``, when its last upstream completed: max(schedule time,
      latest upstream completion), its ``time`` from then on; ``finished_at`` and
      ``finished_ms``, the position and broker time of the change that made it
      COMPLETED or FAILED (a notice to a dependent registered later carries them:
      its version moves on with the notices it records); ``group``, the failure group
      of a FAILED job when it is not the one its fields give (``failure_group``: None
      is ``failed`` or ``attempts-exhausted``, so a workq job's record has no group).
      WAITING: a dependent not released, never leased, neither ready nor scheduled.
    - [eventq] ``tags`` (docs/workflows.md, "Tags"): its ``-tags`` in the order given,
      kept for the job's life (no command changes them); () for a job without.
    - [eventq] retry (docs/workflows.md, "retry"), unset until a job is retried:
      ``delayed_ms``, the time a ``retry -delay`` set (now + delay), its ``time`` from
      then on (under a backoff's wait; a dependent released later is released no
      earlier); ``early``, a retry without delay found its time still ahead: it is
      ready at once, and its ``time`` (and place in lease order) stays.
    - [eventq] ``scope`` (docs/security.md, "Queue-name prefixes"): a dependent's add's
      token prefix (None: none, and always for a job without upstreams): its ``depend``s
      carry it, the first ones and those a retry sends, so an upstream outside it never
      tells it.

    A FAILED job's failure time is the broker time of the command that made it FAILED:
    ``finished_ms`` for a dependent; for a job without upstreams, which nothing changes
    once FAILED, the time of the event its state record holds (``failure_time_ms``).
    """

    id: uuid.UUID
    name: str
    ttr_ms: int
    ttl_ms: int
    payload: bytes
    priority: int
    max_attempts: int
    max_fails: int
    attempts: int
    fails: int
    state: State
    created_ms: int
    scheduled_ms: int | None
    expires_ms: int | None
    lease_deadline_ms: int | None
    result: bytes | None
    result_ok: bool | None
    version: int
    backoff_ms: int = BACKOFF.default
    returns: int = 0
    retry_ms: int | None = None
    upstreams: tuple[Link, ...] = ()
    added_at: int | None = None
    released_ms: int | None = None
    finished_at: int | None = None
    finished_ms: int | None = None
    group: str | None = None
    tags: tuple[str, ...] = TAGS.default
    delayed_ms: int | None = None
    early: bool = False
    scope: str | None = None

    def __post_init__(self) -> None:
        # Each check is an inline test, with the (slower) checker that builds the error
        # called only when the fast test fails: jobs are built once per applied command
        # (its options' too: fields.checker makes them so).
        if type(self.id) is not uuid.UUID:
            check_uuid("id", self.id)
        _check_options(self)  # name, ttr, ttl, payload, priority, max-attempts, max-fails
        ttl, max_attempts, max_fails = self.ttl_ms, self.max_attempts, self.max_fails
        state = self.state
        if type(state) is not State:
            if not isinstance(state, int) or isinstance(state, bool):
                raise ValueError(f"state must be a State, got {state!r}")
            try:
                state = State(state)
            except ValueError:
                raise ValueError(f"state must be a State, got {state!r}") from None
            object.__setattr__(self, "state", state)
        final = state in FINAL_STATES
        attempts, limit = self.attempts, max_attempts or MAX_ATTEMPTS_LIMIT
        if type(attempts) is not int or not 0 <= attempts <= limit:
            check_int("attempts", attempts, 0, limit)
        # fail on a non-final job makes fails+1; it stays non-final only while
        # fails < max_fails, so a live job has fails < max(max_fails, 1).
        fails_cap = max_fails if max_fails > 1 else 1
        if not final:
            fails_cap -= 1
        if type(self.fails) is not int or not 0 <= self.fails <= fails_cap:
            check_int("fails", self.fails, 0, fails_cap)
        created, scheduled = self.created_ms, self.scheduled_ms
        if type(created) is not int or not MIN_TIME_MS <= created <= MAX_TIME_MS:
            check_int("created_ms", created, MIN_TIME_MS, MAX_TIME_MS)
        if scheduled is not None and (
            type(scheduled) is not int or not MIN_TIME_MS <= scheduled <= MAX_TIME_MS
        ):
            check_int("scheduled_ms", scheduled, MIN_TIME_MS, MAX_TIME_MS)
        if ttl == 0:
            if self.expires_ms is not None:
                raise ValueError("a job without TTL (ttl_ms 0) has expires_ms None")
            if scheduled is not None:
                raise ValueError("a scheduled job always has a TTL")
        else:
            expected = deadline_after(created if scheduled is None else scheduled, ttl)
            if self.expires_ms != expected or type(self.expires_ms) is not int:
                raise ValueError(
                    f"expires_ms must be {expected} (TTL counted from "
                    f"{'created_ms' if scheduled is None else 'scheduled_ms'}),"
                    f" got {self.expires_ms!r}"
                )
            if expected <= created:
                raise ValueError("a job's TTL must end after its creation")
        deadline = self.lease_deadline_ms
        if state is State.LEASED:
            if type(deadline) is not int or not MIN_TIME_MS <= deadline <= MAX_DEADLINE_MS:
                check_int("lease_deadline_ms", deadline, MIN_TIME_MS, MAX_DEADLINE_MS)
            if attempts < 1:
                raise ValueError("a LEASED job has attempts >= 1")
        elif deadline is not None:
            raise ValueError(f"lease_deadline_ms is set only while LEASED, not {state.name}")
        if final:
            result = self.result
            if type(result) is not bytes or len(result) > MAX_PAYLOAD_BYTES:
                check_bytes("result", result, MAX_PAYLOAD_BYTES)
            if self.result_ok is not (state is State.COMPLETED):
                check_bool("result_ok", self.result_ok)
                raise ValueError(
                    f"result_ok of a {state.name} job must be {state is State.COMPLETED}"
                )
        elif self.result is not None or self.result_ok is not None:
            raise ValueError(f"result and result_ok are set only in final states, not {state.name}")
        if type(self.version) is not int or not 0 <= self.version <= MAX_OFFSET:
            check_int("version", self.version, 0, MAX_OFFSET)
        if self.backoff_ms or self.returns or self.retry_ms is not None:
            self._check_backoff()
        if (
            self.upstreams or state is State.WAITING or self.added_at is not None
            or self.released_ms is not None or self.finished_at is not None
            or self.finished_ms is not None or self.group is not None
            or self.scope is not None
        ):  # fmt: skip
            self._check_workflow(final)
        tags = self.tags
        if type(tags) is not tuple or tags:
            TAGS.check(tags)
        if self.delayed_ms is not None or self.early is not False:
            check_opt_int("delayed_ms", self.delayed_ms, MIN_TIME_MS, MAX_TIME_MS)
            check_bool("early", self.early)

    def _check_workflow(self, final: bool) -> None:
        upstreams, state = self.upstreams, self.state
        if type(upstreams) is not tuple:
            raise ValueError(f"upstreams must be a tuple, got {type(upstreams).__name__}")
        if len(upstreams) > MAX_AFTER_IDS:
            raise ValueError(f"a job has at most {MAX_AFTER_IDS} upstreams, not {len(upstreams)}")
        seen = set()
        for link in upstreams:
            if type(link) is not Link:
                raise ValueError(f"an upstream must be a Link, got {type(link).__name__}")
            if link.id == self.id:
                raise ValueError("a job is not its own upstream")
            if link.id in seen:
                raise ValueError(f"upstream {link.id} is named twice")
            seen.add(link.id)
        if self.group is not None:
            check_name("group", self.group)
            if state is not State.FAILED:
                raise ValueError(f"group is set only in FAILED, not {state.name}")
            if self.group == default_group(self):  # one spelling of each job's group
                raise ValueError(f"group {self.group!r} is the job's default: None")
        if self.scope is not None:
            check_name("scope", self.scope)
            if not upstreams:
                raise ValueError("scope is set only for a job with upstreams")
            if not self.name.startswith(self.scope):
                raise ValueError(f"queue {self.name!r} is outside the scope {self.scope!r}")
        if not upstreams:
            if state is State.WAITING:
                raise ValueError("a WAITING job has upstreams")
            for name in ("added_at", "released_ms", "finished_at", "finished_ms"):
                if getattr(self, name) is not None:
                    raise ValueError(f"{name} is set only for a job with upstreams")
            return
        check_int("added_at", self.added_at, 0, self.version)
        if self.released_ms is not None:
            check_int("released_ms", self.released_ms, MIN_TIME_MS, MAX_TIME_MS)
            if state is State.WAITING:
                raise ValueError("a WAITING job is not released")
        if final:
            check_int("finished_at", self.finished_at, self.added_at or 0, self.version)
            check_int("finished_ms", self.finished_ms, MIN_TIME_MS, MAX_TIME_MS)
        elif self.finished_at is not None or self.finished_ms is not None:
            raise ValueError(f"finished_at and finished_ms are set only in final states, not {state.name}")

    def _check_backoff(self) -> None:
        BACKOFF.check(self.backoff_ms)
        check_int("returns", self.returns, 0, MAX_RETURNS)
        if self.retry_ms is not None:
            check_int("retry_ms", self.retry_ms, MIN_TIME_MS, MAX_TIME_MS)
            if not self.backoff_ms or not self.returns:
                raise ValueError("retry_ms is set only after a return with a backoff")


JOB_FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in dataclass_fields(Job))
check_declared(Job, WORKQ_OPTIONS, defaults=False)
check_declared(Job, (BACKOFF, TAGS))
_field_values = attrgetter(*JOB_FIELD_NAMES)  # a job's values, in that order
_FIELD_INDEX = {name: index for index, name in enumerate(JOB_FIELD_NAMES)}


def make_job(fields: Mapping[str, Any]) -> Job:
    """The one place eventq/core builds a ``Job``: from its fields by name, never by
    position (a field added to ``Job`` would shift every positional argument after it;
    a field left out here takes its default)."""
    return Job(**fields)


def job_with(job: Job, **changes: Any) -> Job:
    """``job`` with ``changes``, every other field as it was (a new, validated ``Job``).
    A transition names only what it changes, so a field added to ``Job`` is carried
    through all of them."""
    # Positionally, in the order JOB_FIELD_NAMES derives from the dataclass itself (so
    # still no hand-written order): keywords cost ~1 us more per transition.
    values = list(_field_values(job))
    for name, value in changes.items():
        index = _FIELD_INDEX.get(name)
        if index is None:
            raise TypeError(f"a Job has no field {name!r}")
        values[index] = value
    return Job(*values)


# The fields of workflows, failure groups and retry: all unset on a job without
# upstreams that was never retried nor failed into a named group (its records and
# digest are those of a job before workflows), never in an import's snapshot. ``tags``
# come between ``group`` and the retry's fields and are in a snapshot (an imported job
# may have tags).
WORKFLOW_FIELD_NAMES = (
    "upstreams", "added_at", "released_ms", "finished_at", "finished_ms", "group",
    "delayed_ms", "early", "scope",
)  # fmt: skip
assert set(WORKFLOW_FIELD_NAMES) <= set(JOB_FIELD_NAMES)


def has_workflow(job: Job) -> bool:
    """Whether any workflow field is set (a dependent, or a job in a failure group)."""
    return bool(job.upstreams) or job.group is not None


def was_retried(job: Job) -> bool:
    """Whether a retry left a field of its own set (``delayed_ms``, ``early``)."""
    return job.delayed_ms is not None or job.early


def default_group(job: Job) -> str:
    """The group a FAILED job is in when no other is named (``group`` None): a final
    fail counted one fail more than its fails allowed (fails >= max(max-fails, 1)),
    where running out of attempts counted none (fails below it): ``failed``, else
    ``attempts-exhausted``. So a workq job needs no group in its record."""
    return FAILED_GROUP if job.fails >= max(job.max_fails, 1) else ATTEMPTS_EXHAUSTED_GROUP


def failure_group(job: Job) -> str | None:
    """The failure group of a FAILED job (None for any other state)."""
    if job.state is not State.FAILED:
        return None
    return job.group if job.group is not None else default_group(job)


def stored_group(job: Job, group: str | None) -> str | None:
    """What ``Job.group`` holds for ``group`` (a fail's -group) once ``job`` is FAILED:
    None when it is the group the job's fields give anyway."""
    if group is None or group == default_group(job):
        return None
    return group


def shown_group(job: Job) -> str | None:
    """The job block's ``group`` (spec: only for a FAILED job whose group is neither
    ``failed`` nor ``attempts-exhausted``, so workq jobs keep their blocks)."""
    group = failure_group(job)
    return None if group is None or group in BUILT_IN_GROUPS else group


def failure_time_ms(job: Job, record_ms: int) -> int | None:
    """A FAILED job's failure time, given ``record_ms``, the broker time of the event
    its state record holds (None for any other state): a dependent keeps it
    (``finished_ms``: notices change its record later); nothing changes the record of a
    FAILED job without upstreams, so the event that made it FAILED is its record's."""
    if job.state is not State.FAILED:
        return None
    return record_ms if job.finished_ms is None else job.finished_ms


def link_of(job: Job, upstream: uuid.UUID) -> Link | None:
    """The job's link to ``upstream`` (None: not one of its upstreams)."""
    for link in job.upstreams:
        if link.id == upstream:
            return link
    return None


def after_ids(job: Job) -> tuple[uuid.UUID, ...]:
    """The job's upstream ids, in -after order."""
    return tuple(link.id for link in job.upstreams)


def waiting_count(job: Job) -> int:
    """The protocol's ``waiting``: its upstreams not COMPLETED, 0 once it is released."""
    if job.released_ms is not None:
        return 0
    return sum(1 for link in job.upstreams if link.outcome is not UpstreamOutcome.COMPLETED)


def is_final(job: Job) -> bool:
    """COMPLETED or FAILED: only delete or TTL expiry changes it now."""
    return job.state in FINAL_STATES


def ready_time_ms(job: Job) -> int | None:
    """The job's ``time``: when it is ready (None: at once). A retry's backoff wait
    (``retry_ms``) replaces the schedule time (docs/protocol.md, "-backoff"), and so does
    a dependent's release time (docs/workflows.md, "Dependencies": never earlier than its
    schedule time) and the time a ``retry -delay`` set (docs/workflows.md, "retry")."""
    if job.retry_ms is not None:
        return job.retry_ms
    if job.released_ms is not None:
        return job.released_ms
    return job.scheduled_ms if job.delayed_ms is None else job.delayed_ms


def wake_time_ms(job: Job) -> int | None:
    """When the job may be leased (None: at once): its ``time``, but for a job a retry
    without delay made ready at once (``early``, until a backoff's wait)."""
    if job.early and job.retry_ms is None:
        return None
    return ready_time_ms(job)


def is_ready(job: Job, now_ms: int) -> bool:
    """NEW or PENDING and not due in the future: a lease may take it now (if its TTL
    has not passed: ``within_ttl``)."""
    time_ms = wake_time_ms(job)
    return job.state in LEASABLE_STATES and (time_ms is None or time_ms <= now_ms)


def within_ttl(job: Job, now_ms: int) -> bool:
    """Whether the job's TTL has not passed at ``now_ms``. A job exists for its TTL only
    (docs/protocol.md, "Job states"): once it passed, the job is not leased, even before
    its expiry is in the log (the timer's command comes after the TTL's end, later still
    while its partition moves)."""
    return job.expires_ms is None or now_ms < job.expires_ms


def is_scheduled_waiting(job: Job, now_ms: int) -> bool:
    """NEW or PENDING and due in the future (listed by ``inspect scheduled-jobs``)."""
    time_ms = wake_time_ms(job)
    return job.state in LEASABLE_STATES and time_ms is not None and time_ms > now_ms


def retry_wait_ms(backoff_ms: int, returns: int) -> int:
    """The wait of return number ``returns`` (1-based): backoff x 2^(r-1), capped at
    ``MAX_BACKOFF_MS`` (docs/protocol.md, "eventq extensions", -backoff)."""
    if not backoff_ms:
        return 0
    if returns - 1 >= MAX_BACKOFF_MS.bit_length():  # the product is over the cap anyway
        return MAX_BACKOFF_MS
    return min(backoff_ms << (returns - 1), MAX_BACKOFF_MS)


def attempt_limit(job: Job) -> int:
    """The most attempts the job may have: ``max_attempts``, or the hard cap when 0."""
    return job.max_attempts or MAX_ATTEMPTS_LIMIT


def lease_order_key(job: Job) -> tuple[int, bool, int, int, bytes]:
    """Sort key of lease order within a queue name (smallest leases first).

    Priority descending, then scheduled time ascending with unscheduled jobs first,
    then creation time ascending (FIFO), then id bytes. It depends only on fields that
    never change after creation, so a timed-out or retried job returns to its old place
    (unless it waits out a backoff: then its retry time is its time).
    """
    scheduled = ready_time_ms(job)
    return (
        -job.priority,
        scheduled is not None,
        0 if scheduled is None else scheduled,
        job.created_ms,
        job.id.bytes,
    )
