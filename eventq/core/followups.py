"""What applying a command asks beyond its job's record (pure): the workflows' follow-up
commands for other partitions and the records beside the jobs (docs/workflows.md, "Determinism";
the design's ARCHITECTURE.md, "Workflows").

``step`` (eventq/core/step.py) gives, with the outcome and the job's record:

- ``follow_ups``: commands to write into other partitions, each under its ``key`` (the
  job key of its ``job_id``): one ``Depend`` per upstream of an add or schedule with
  ``after``;
- ``side``: records beside the jobs to write (value) or delete (None): the input an
  upstream notice hands a dependent, or drops; a removed dependent's inputs;
- ``then``: what needs records the processor must read first, a ``Register`` (a
  ``depend`` applied: the one registration at ``Register.key``) or a ``Notify`` (a job
  ended, went or was retried: every registration under ``Notify.prefix``). The
  processor reads them and calls ``register`` or ``notify``, which give more
  follow-ups and side records (``Effects``).

A job's own state never depends on registrations, so a fold that writes nothing (a
replay of the command log) needs only ``step``. The processor writes every follow-up
before it commits the command that caused it, as it writes changelog records: a crash
repeats follow-ups at worst, and they apply idempotently. A repeated ``depend`` changes
nothing; a notice names the dependent's creation and the position of the upstream's
change, and is ignored unless that change is after the last applied from that upstream
(machine.py); the notice a finished upstream sends a late ``depend`` carries the
position of the change that finished it, the one its ending notice carried.

Registrations are deleted only where re-reading an older command cannot bring them
back (docs/architecture.md, "Positions and idempotency"): by an accepted change of the
upstream (its version then covers every earlier ``depend``), or by a timer's ``expire``
of an absent upstream, whose deletions move the partition's watermark like a tombstone
(``Effects.removes``). So an expired registration of a present upstream is skipped, not
notified, until the upstream's next ending or its removal, and one of an absent upstream
until a timer's ``expire`` of that id (the processor schedules one at the registration's
deadline) or the upstream's add and ending.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeAlias

from eventq.core.codec import encode_input, encode_registration
from eventq.core.commands import Add, Command, Depend, Expire, Upstream
from eventq.core.events import NOTICE_EVENTS, Event, Expired, Retried, UpstreamRetried
from eventq.core.job import (
    ENDED_UNCOMPLETED,
    FINAL_STATES,
    WITH_RESULT,
    Job,
    State,
    UpstreamOutcome,
    link_of,
)
from eventq.core.machine import NO_SUCH_JOB, REGISTERED, REGISTERED_FINISHED, Ignored, Outcome
from eventq.core.workflow import (
    Input,
    Registration,
    input_key,
    registration_key,
    registrations_prefix,
)

SideRecord: TypeAlias = tuple[bytes, bytes | None]  # (key, value); None: delete it


def command_key(command: Depend | Upstream | Add) -> bytes:
    """The Kafka key a follow-up is written under: its job's (the canonical lowercase
    UUID, eventq.core.partitioner.job_key), so it goes to that job's partition."""
    return str(command.job_id).encode()


@dataclass(frozen=True, slots=True)
class FollowUp:
    """A command to write into the partition of ``key`` (``job_key(command.job_id)``):
    a workflow's ``depend`` or ``upstream``, or the ``add`` of a recurrence's slot
    (eventq/core/recurrence.py)."""

    command: Depend | Upstream | Add

    @property
    def key(self) -> bytes:
        return command_key(self.command)


@dataclass(frozen=True, slots=True)
class Effects:
    """What ``register`` or ``notify`` makes of the records read: follow-ups, records to
    write or delete, and ``removes``: it deletes records under an absent job's key, so
    the partition's watermark moves to the command's position (as for a tombstone)."""

    follow_ups: tuple[FollowUp, ...] = ()
    side: tuple[SideRecord, ...] = ()
    removes: bool = False


NOTHING = Effects()


@dataclass(frozen=True, slots=True)
class Register:
    """A ``depend`` applied to its upstream (``Ignored`` as ``REGISTERED`` or
    ``REGISTERED_FINISHED``): read the registration at ``key`` and call ``register``.
    ``notice``: the upstream is COMPLETED or FAILED, and the dependent is told so."""

    depend: Depend
    at_ms: int
    notice: Upstream | None = None

    @property
    def key(self) -> bytes:
        return registration_key(self.depend.upstream, self.depend.dependent)


@dataclass(frozen=True, slots=True)
class Notify:
    """Job ``upstream`` ended, went or was retried at position ``change`` (broker time
    ``at_ms``): read its registrations (every record under ``prefix``) and call
    ``notify``. Each registration whose dependent's deadline has not passed at ``at_ms``
    is told ``outcome`` (None: nobody is told, e.g. a COMPLETED upstream deleted),
    unless the upstream's queue ``name`` is outside the dependent's scope
    (docs/security.md, "Queue-name prefixes": absent to it); the others are dropped, and
    all of them when the job is ``removed``. ``absent``: a timer's ``expire`` of an
    absent job, which only drops what expired."""

    upstream: uuid.UUID
    outcome: UpstreamOutcome | None
    change: int
    at_ms: int
    result: bytes | None = None
    removed: bool = False
    absent: bool = False
    name: str | None = None

    @property
    def prefix(self) -> bytes:
        return registrations_prefix(self.upstream)


Then: TypeAlias = Register | Notify


def register(pending: Register, existing: Registration | None) -> Effects:
    """A depend's effects, given the registration stored at ``pending.key`` (or None).

    Stored unless a registration of a later job of the dependent's id stands there, or
    the dependent's deadline has passed (then nothing at all: it is never notified, and
    one stored is left to its upstream's next ending or removal, see the module). A
    repeat stores nothing new. A finished upstream's notice goes with every depend that
    is not for an older job of that id: a repeat's is a duplicate its dependent ignores.
    """
    d = pending.depend
    if existing is not None and existing.dependent_created > d.dependent_created:
        return NOTHING  # an older job of the dependent's id registers late
    wanted = Registration(d.dependent, d.dependent_created, d.dependent_deadline_ms, d.scope)
    if wanted.expired(pending.at_ms):
        return NOTHING
    side = () if existing == wanted else ((pending.key, encode_registration(wanted)),)
    follow_ups = () if pending.notice is None else (FollowUp(pending.notice),)
    return Effects(follow_ups, side)


def notify(pending: Notify, registrations: Iterable[Registration]) -> Effects:
    """An ending's effects, given the upstream's registrations (as stored under
    ``pending.prefix``, in key order: the follow-ups keep it)."""
    follow_ups: list[FollowUp] = []
    side: list[SideRecord] = []
    for r in registrations:
        key = registration_key(pending.upstream, r.dependent)
        if r.expired(pending.at_ms):
            side.append((key, None))
            continue
        if pending.outcome is not None and not pending.absent and r.sees(pending.name):
            notice = Upstream(
                r.dependent, r.dependent_created, pending.upstream, pending.outcome,
                pending.change, pending.at_ms, pending.result,
            )  # fmt: skip
            follow_ups.append(FollowUp(notice))
        if pending.removed:
            side.append((key, None))
    return Effects(tuple(follow_ups), tuple(side), removes=pending.absent and bool(side))


# ------------------------------------------------------------- what step derives


def depends(job: Job) -> tuple[FollowUp, ...]:
    """The ``depend`` of a just added dependent to each of its upstreams, in -after order."""
    assert job.added_at is not None or not job.upstreams
    return tuple(
        FollowUp(Depend(link.id, job.id, job.added_at, job.expires_ms, job.scope))  # type: ignore[arg-type]  # added_at is set: a dependent's
        for link in job.upstreams
    )


def asked_again(before: Job, after: Job) -> Derived:
    """A retried dependent asks again each upstream it knew ended
    (workflow_transitions.asked_again): a ``depend`` to each (a registration dropped by
    the upstream's removal is made anew; a FAILED one answers at once), and the input a
    FAILED one handed it goes until it answers again (spec: a retried upstream drops out
    of ``inputs``)."""
    ended = [link for link in before.upstreams if link.outcome in ENDED_UNCOMPLETED]
    follow_ups = tuple(
        FollowUp(Depend(link.id, after.id, after.added_at, after.expires_ms, after.scope))  # type: ignore[arg-type]  # added_at is set: a dependent's
        for link in ended
    )
    side = tuple((input_key(after.id, link.id), None) for link in ended if link.outcome in WITH_RESULT)
    return Derived(follow_ups, side)


def finished_notice(upstream: Job, d: Depend, at_ms: int) -> Upstream:
    """What a finished upstream tells a dependent registering late: the outcome, with
    the position of the change that finished it (its ``finished_at``; for a job without
    upstreams its ``version``, as nothing changes a finished job's record but a notice
    to a dependent) and its broker time when the job kept it (a dependent's
    ``finished_ms``), else the depend's own (``at_ms``: a job without upstreams keeps no
    finish time, and its record stays as it was before workflows)."""
    outcome = (
        UpstreamOutcome.COMPLETED if upstream.state is State.COMPLETED else UpstreamOutcome.FAILED
    )
    change = upstream.version if upstream.finished_at is None else upstream.finished_at
    when = at_ms if upstream.finished_ms is None else upstream.finished_ms
    return Upstream(d.dependent, d.dependent_created, d.upstream, outcome, change, when,
                    upstream.result)


def ending(before: Job | None, event: Event, after: Job | None) -> Notify | None:
    """Whom an accepted event concerns beyond its job: its dependents, when it ends the
    job (COMPLETED or FAILED, from any other state), removes it (deleted or evicted
    while not finished: those words; finished: nobody is told), makes it unfinished
    again (retried), or changes the result of a FAILED one (a retried upstream's
    dependent that stays FAILED naming another:
    workflow_transitions._upstream_retried)."""
    was_final = before is not None and before.state in FINAL_STATES
    if isinstance(event, UpstreamRetried) and after is not None and after.state is State.FAILED:
        # Still FAILED, its result now naming another ended upstream: its dependents'
        # copies of its result (their inputs) are told the new one.
        return Notify(after.id, UpstreamOutcome.FAILED, event.offset, event.at_ms, after.result,
                      name=after.name)
    if after is None:
        if before is None:
            return None
        if was_final:
            outcome = None
        elif isinstance(event, Expired):
            outcome = UpstreamOutcome.EVICTED
        else:
            outcome = UpstreamOutcome.DELETED
        return Notify(before.id, outcome, event.offset, event.at_ms, removed=True,
                      name=before.name)
    if after.state in FINAL_STATES and not was_final:
        outcome = (
            UpstreamOutcome.COMPLETED if after.state is State.COMPLETED else UpstreamOutcome.FAILED
        )
        return Notify(after.id, outcome, event.offset, event.at_ms, after.result,
                      name=after.name)
    if was_final and after.state not in FINAL_STATES:
        return Notify(after.id, UpstreamOutcome.RETRIED, event.offset, event.at_ms,
                      name=after.name)
    return None


def inputs_of_notice(before: Job, notice: Upstream) -> tuple[SideRecord, ...]:
    """The dependent's input from an accepted notice: the upstream's result when it
    finished (1 completed, 0 failed), else none (dropped if it had one)."""
    key = input_key(notice.dependent, notice.upstream)
    if notice.outcome in WITH_RESULT:
        assert notice.result is not None
        value = Input(notice.outcome is UpstreamOutcome.COMPLETED, notice.result)
        return ((key, encode_input(value)),)
    link = link_of(before, notice.upstream)
    if link is not None and link.outcome in WITH_RESULT:
        return ((key, None),)
    return ()


def inputs_of(job: Job) -> tuple[bytes, ...]:
    """The keys of a dependent's inputs (its finished upstreams', in -after order)."""
    return tuple(input_key(job.id, link.id) for link in job.upstreams if link.outcome in WITH_RESULT)


@dataclass(frozen=True, slots=True)
class Derived:
    """What ``step`` derives beyond the job's record (see the module docstring)."""

    follow_ups: tuple[FollowUp, ...] = ()
    side: tuple[SideRecord, ...] = ()
    then: Then | None = None


NONE = Derived()


def derive(
    before: Job | None, command: Command, outcome: Outcome, event: Event | None,
    after: Job | None, at_ms: int, offset: int,
) -> Derived:  # fmt: skip
    """The follow-ups, side records and pending reads of one applied command
    (``event``, None unless accepted, and ``after`` as ``machine.apply`` gives them)."""
    if event is None:
        if not isinstance(outcome, Ignored):
            return NONE
        if isinstance(command, Depend) and outcome.reason in (REGISTERED, REGISTERED_FINISHED):
            finished = outcome.reason == REGISTERED_FINISHED
            assert not finished or before is not None
            notice = finished_notice(before, command, at_ms) if finished else None  # type: ignore[arg-type]  # finished: before is the upstream
            return Derived(then=Register(command, at_ms, notice))
        if isinstance(command, Expire) and outcome.reason == NO_SUCH_JOB and before is None:
            return Derived(then=Notify(command.job_id, None, offset, at_ms, absent=True))
        return NONE
    follow_ups: tuple[FollowUp, ...] = ()
    side: tuple[SideRecord, ...] = ()
    if before is None and after is not None and after.upstreams:
        follow_ups = depends(after)
    if isinstance(event, NOTICE_EVENTS):
        assert before is not None and isinstance(command, Upstream)
        side = inputs_of_notice(before, command)
    if isinstance(event, Retried) and before is not None and after is not None:
        again = asked_again(before, after)
        follow_ups, side = again.follow_ups, again.side
    if after is None and before is not None:
        side = tuple((key, None) for key in inputs_of(before))
    return Derived(follow_ups, side, ending(before, event, after))
