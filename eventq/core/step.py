"""One command applied to one job, with everything that can go wrong contained.

``step`` is what the processor (streams/processor.py) and every replay of the command
log (eventq/run/replay.py) do per command: ``decide``, ``evolve``, and encode the state
record that will be stored. It is pure (no I/O, no clock), so a replay decides exactly
as the processor did, rejections included.

A command that cannot be applied is decided once and for all (docs/architecture.md,
"Hostile inputs"): whatever goes wrong (the core raises, or the job's state record would
exceed the record limit, so it could never be written) becomes
``Rejected(ServerError(reason))``. Nothing is stored, the issuer is told
``-SERVER-ERROR <reason>``, and the processor moves on. A poison command must never stop
the processor: after a restart the same command would be read again, and a crash would
repeat forever.

Workflows (docs/workflows.md, "Determinism"): a step also gives what the command asks
beyond its job's record (eventq/core/followups.py): ``follow_ups`` to write into other
partitions, each under its key, ``side`` records to write or delete beside the jobs, and
``then``, the registrations to read before ``followups.register`` or ``followups.notify``
give the rest. The processor writes all of them with the batch, before it commits it.
"""

from __future__ import annotations

from dataclasses import dataclass

from eventq.core import recurrence
from eventq.core.codec import encode_recurrence, encode_state
from eventq.core.commands import Command, RecurrenceCommand
from eventq.core.followups import NONE, FollowUp, SideRecord, Then, derive
from eventq.core.job import Job
from eventq.core.machine import Accepted, Outcome, Rejected, decide, evolve
from eventq.core.recurrence import Changed, Recurrence, RecurrenceOutcome
from eventq.errors import ServerError
from eventq.limits import MAX_STATE_RECORD_BYTES

MAX_REASON_CHARS = 300  # a reason ends up in one reply line


@dataclass(frozen=True, slots=True)
class Step:
    """What applying one command does: the outcome, the job after it (the job as it was
    when nothing changes; None when absent or gone), and whether to store a record;
    then what it asks beyond the job's record (eventq/core/followups.py)."""

    outcome: Outcome
    job: Job | None
    record: bytes | None = None  # the state record to store (Accepted, job alive)
    removes: bool = False  # Accepted and the job is gone: store a tombstone
    follow_ups: tuple[FollowUp, ...] = ()  # commands for other partitions, each with its key
    side: tuple[SideRecord, ...] = ()  # records beside the jobs: (key, value or None)
    then: Then | None = None  # registrations to read, then followups.register / notify


def unappliable(reason: str) -> Rejected:
    """The rejection of a command that cannot be applied, as its issuer will see it."""
    line = " ".join(reason.split())  # one reply line: no CR/LF inside
    if len(line) > MAX_REASON_CHARS:
        line = line[: MAX_REASON_CHARS - 3] + "..."
    return Rejected(ServerError(f"the command cannot be applied: {line}"))


def step(
    job: Job | None,
    command: Command,
    at_ms: int,
    offset: int,
    max_state_record_bytes: int = MAX_STATE_RECORD_BYTES,
) -> Step:
    """Apply ``command`` (at broker time ``at_ms``, log position ``offset``) to ``job``."""
    try:
        outcome = decide(job, command, at_ms, offset)
        if not isinstance(outcome, Accepted):
            derived = derive(job, command, outcome, None, job, at_ms, offset)
            return Step(outcome, job) if derived is NONE else Step(outcome, job, then=derived.then)
        after = evolve(job, outcome.event)
        derived = derive(job, command, outcome, outcome.event, after, at_ms, offset)
        if after is None:
            return Step(outcome, None, removes=True, follow_ups=derived.follow_ups,
                        side=derived.side, then=derived.then)
        record = encode_state(outcome.event, after)
    except Exception as error:  # a bug or an impossible value: contain it
        return Step(unappliable(f"{type(error).__name__}: {error}"), job)
    if len(record) > max_state_record_bytes:
        return Step(
            unappliable(
                f"the job's state record would be {len(record):,} bytes, over the "
                f"limit of {max_state_record_bytes:,}"
            ),
            job,
        )
    return Step(outcome, after, record, follow_ups=derived.follow_ups, side=derived.side,
                then=derived.then)


@dataclass(frozen=True, slots=True)
class RecurrenceStep:
    """What applying a recurrence's command does (docs/workflows.md, "Recurring jobs";
    eventq/core/recurrence.py): the outcome, the record after it (as it was
    when nothing changes), its encoded value to store (``Changed``, record alive) or a
    removal, and the follow-up: the add of the slot a ``fire`` fired, for the job id's
    partition."""

    outcome: RecurrenceOutcome
    record: Recurrence | None
    value: bytes | None = None
    removes: bool = False
    follow_ups: tuple[FollowUp, ...] = ()


def step_recurrence(record: Recurrence | None, command: RecurrenceCommand, at_ms: int,
                    offset: int) -> RecurrenceStep:
    """Apply a recurrence's ``command`` to its ``record``, failures contained as
    ``step``'s are: a command that cannot be applied is rejected once and for all."""
    try:
        outcome = recurrence.decide(record, command, at_ms, offset)
        if not isinstance(outcome, Changed):
            return RecurrenceStep(outcome, record)
        follow_ups = () if outcome.add is None else (FollowUp(outcome.add),)
        if outcome.record is None:
            return RecurrenceStep(outcome, None, removes=True)
        return RecurrenceStep(outcome, outcome.record, encode_recurrence(outcome.record),
                              follow_ups=follow_ups)
    except Exception as error:  # a bug or an impossible value: contain it
        return RecurrenceStep(unappliable(f"{type(error).__name__}: {error}"), record)
