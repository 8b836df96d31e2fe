"""Recurring jobs (docs/workflows.md, "Recurring jobs"), pure: a recurrence's
definition and record, its slots, the id of each slot's job, and what ``recur``,
``unrecur`` and ``fire`` do to a record.

Slots. Slot n of a recurrence is due at n x every ms since the Unix epoch (UTC), so a
slot is one due time of one every, whatever the recurrence was doing meanwhile. Its
job's id hashes the recurrence's name, its every and n (``slot_job_id``): a slot fired
twice is one job (the second add is ``Duplicate job`` while the first lives).

The record. One per recurrence, in the partition its key ``recur:<name>`` hashes to
(commands.recurrence_key), kept beside the jobs under ``recurrence_table_key``: the
definition (the last ``recur``'s fields and broker time), ``first_slot`` (the first
slot, of the definition's every, allowed to fire), ``fired_ms`` (the due time of the
last slot fired, of whichever every: None before the first) and ``version``, the log
position of the last command applied to it, as a job's: a command at or below it was
applied already (a re-read tail).

The transitions (``decide``), each decided from (record, command, broker time,
position) alone, so every owner and every replay decides alike:

- ``recur`` at broker time t: the definition is the command's, created at t; the first
  slot is the first at or after t (t rounded up to a multiple of every) and, when a
  slot fired before, after that slot's due time: re-issuing replaces the definition
  without firing a slot twice, even when every changes.
- ``unrecur``: the record is gone (``-NOT-FOUND`` when there is none); the jobs it
  added stay. A later ``recur`` of the name starts afresh.
- ``fire`` of slot n at broker time t: the timer's word that slot n is due. Ignored
  when there is no record, when n is not after the last fired slot, or when n is not
  due yet by the broker's clock (t < n x every: the timer asks again). Otherwise the
  latest slot due at t fires, if it is one allowed (at or after ``first_slot`` and
  after the last fired): missed slots (nothing served, a partition moving) are skipped
  for good and only the latest fires. Firing records the slot and gives the slot's
  ``add`` as a follow-up for the job id's partition (docs/workflows.md, "Determinism"), which the
  processor writes before it commits the fire.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, replace
from typing import TypeAlias

from eventq.core._check import check_int
from eventq.core.commands import (
    Add,
    Fire,
    Recur,
    RecurrenceCommand,
    Unrecur,
    check_recurrence_fields,
)
from eventq.core.machine import ALREADY_APPLIED, Ignored, Rejected
from eventq.core.workflow import META_PREFIX
from eventq.errors import FORBIDDEN, ClientError, NotFound
from eventq.limits import MAX_OFFSET, MAX_TIME_MS, MIN_EVERY_MS, MIN_TIME_MS

# The table key of a recurrence's record: under the meta prefix every reader of jobs
# passes over (eventq/state/jobs_table.py), apart from the other meta keys.
RECURRENCE_TABLE_PREFIX = META_PREFIX + b"eventq.recur:"
MAX_SLOT = MAX_TIME_MS // MIN_EVERY_MS

# Reasons of Ignored outcomes of ``fire``.
NO_SUCH_RECURRENCE = "no such recurrence"  # a fire after unrecur (or before any recur)
FIRED_ALREADY = "slot fired already"  # a fire for a slot not after the last fired
SLOT_NOT_DUE = "slot not due"  # the process's clock ahead of the broker's: asked again
NO_SLOT_DUE = "no slot allowed is due"  # the latest due slot is before the first allowed


def recurrence_table_key(name: str) -> bytes:
    """Where a recurrence's record is kept in its partition's table."""
    return RECURRENCE_TABLE_PREFIX + name.encode()


def recurrence_name_of(table_key: bytes) -> str:
    """The recurrence named by a ``recurrence_table_key``."""
    if not table_key.startswith(RECURRENCE_TABLE_PREFIX):
        raise ValueError(f"not a recurrence's key: {table_key!r:.80}")
    return table_key[len(RECURRENCE_TABLE_PREFIX):].decode("ascii")


# ------------------------------------------------------------------------- slots


def slot_job_id(name: str, every_ms: int, slot: int) -> uuid.UUID:
    """The id of slot ``slot``'s job (docs/workflows.md, "recur"): the first 16 bytes of
    SHA-256("recur:<name>:<every-ms>:<n>"), numbers in decimal without leading zeros,
    made a version 4 variant 1 UUID."""
    digest = bytearray(hashlib.sha256(f"recur:{name}:{every_ms}:{slot}".encode("ascii")).digest())
    digest[6] = (digest[6] & 0x0F) | 0x40
    digest[8] = (digest[8] & 0x3F) | 0x80
    return uuid.UUID(bytes=bytes(digest[:16]))


def due_ms(every_ms: int, slot: int) -> int:
    """When slot ``slot`` is due: ``slot`` x every ms since the epoch."""
    return slot * every_ms


def first_slot_at(every_ms: int, at_ms: int) -> int:
    """The first slot due at or after ``at_ms`` (``at_ms`` rounded up to every)."""
    return -(-at_ms // every_ms)


def latest_slot_at(every_ms: int, at_ms: int) -> int:
    """The latest slot due at or before ``at_ms``."""
    return at_ms // every_ms


def first_slot_after(every_ms: int, when_ms: int) -> int:
    """The first slot due strictly after ``when_ms``."""
    return when_ms // every_ms + 1


# --------------------------------------------------------------------- the record


@dataclass(frozen=True, slots=True)
class Definition:
    """What ``recur`` defined: its fields and its broker time (``created_ms``)."""

    name: str
    job_name: str
    ttr_ms: int
    ttl_ms: int
    every_ms: int
    payload: bytes
    priority: int
    max_attempts: int
    max_fails: int
    backoff_ms: int
    tags: tuple[str, ...]
    created_ms: int

    def __post_init__(self) -> None:
        check_recurrence_fields(self)
        check_int("created_ms", self.created_ms, MIN_TIME_MS, MAX_TIME_MS)

    @classmethod
    def of(cls, command: Recur, at_ms: int) -> Definition:
        return cls(command.name, command.job_name, command.ttr_ms, command.ttl_ms,
                   command.every_ms, command.payload, command.priority, command.max_attempts,
                   command.max_fails, command.backoff_ms, command.tags, at_ms)


@dataclass(frozen=True, slots=True)
class Recurrence:
    """A recurrence's record (see the module docstring)."""

    definition: Definition
    first_slot: int  # of definition.every_ms: the first slot allowed to fire
    fired_ms: int | None  # the due time of the last slot fired (None: none yet)
    version: int  # the position of the last command applied

    def __post_init__(self) -> None:
        if not isinstance(self.definition, Definition):
            raise ValueError(f"definition must be a Definition, got {self.definition!r:.80}")
        check_int("first_slot", self.first_slot, 0, MAX_SLOT)
        if self.fired_ms is not None:
            check_int("fired_ms", self.fired_ms, 0, MAX_TIME_MS)
        check_int("version", self.version, 0, MAX_OFFSET)

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def every_ms(self) -> int:
        return self.definition.every_ms

    @property
    def next_slot(self) -> int:
        """The first slot that may still fire: at or after ``first_slot``, after the
        last fired."""
        if self.fired_ms is None:
            return self.first_slot
        return max(self.first_slot, first_slot_after(self.every_ms, self.fired_ms))

    @property
    def next_ms(self) -> int:
        """When the next slot is due (``inspect recurring``'s ``next``: in the past
        while a due slot waits for its timer)."""
        return due_ms(self.every_ms, self.next_slot)

    @property
    def fired_slot(self) -> int | None:
        """The last fired slot as a slot of the current every, when it is one."""
        if self.fired_ms is None or self.fired_ms % self.every_ms:
            return None
        return self.fired_ms // self.every_ms

    def slot_add(self, slot: int) -> Add:
        """The add that firing ``slot`` writes into the job id's partition: the
        definition's job, as ``add`` would (its TTL counts from its acceptance)."""
        d = self.definition
        return Add(slot_job_id(d.name, d.every_ms, slot), d.job_name, d.ttr_ms, d.ttl_ms,
                   d.payload, d.priority, d.max_attempts, d.max_fails, d.backoff_ms,
                   tags=d.tags)


# -------------------------------------------------------------------- transitions


@dataclass(frozen=True, slots=True)
class Changed:
    """The command is applied: ``record`` is the recurrence after it (None: removed),
    and ``fired`` the slot it fired, whose ``add`` is the follow-up."""

    record: Recurrence | None
    fired: int | None = None
    add: Add | None = None


RecurrenceOutcome: TypeAlias = Changed | Rejected | Ignored


def decide(record: Recurrence | None, command: RecurrenceCommand, at_ms: int,
           position: int) -> RecurrenceOutcome:
    """What ``command``, applied at broker time ``at_ms`` and log position ``position``,
    does to the recurrence's ``record`` (None: there is none)."""
    check_int("at_ms", at_ms, MIN_TIME_MS, MAX_TIME_MS)
    check_int("position", position, 0, MAX_OFFSET)
    if record is not None and position <= record.version:
        return Ignored(ALREADY_APPLIED)
    if isinstance(command, Fire):
        return _fire(record, command, at_ms, position)
    if not isinstance(command, (Recur, Unrecur)):
        raise ValueError(f"not a recurrence's command: {command!r:.100}")
    # [eventq] docs/security.md, "Queue-name prefixes": a recurrence whose queue is
    # outside the issuing token's prefix is absent to it (unrecur: -NOT-FOUND), and not
    # replaced by its recur of the same name (Forbidden: names are global, as ids are).
    outside = (record is not None and command.scope is not None
               and not record.definition.job_name.startswith(command.scope))
    if isinstance(command, Recur):
        if outside:
            return Rejected(ClientError(FORBIDDEN))
        return Changed(_recur(record, command, at_ms, position))
    return Rejected(NotFound()) if record is None or outside else Changed(None)


def _recur(record: Recurrence | None, c: Recur, at_ms: int, position: int) -> Recurrence:
    first = first_slot_at(c.every_ms, at_ms)
    fired_ms = None if record is None else record.fired_ms
    if fired_ms is not None:  # never a slot due at or before the last fired one
        first = max(first, first_slot_after(c.every_ms, fired_ms))
    return Recurrence(Definition.of(c, at_ms), first, fired_ms, position)


def _fire(record: Recurrence | None, c: Fire, at_ms: int, position: int) -> RecurrenceOutcome:
    if record is None:
        return Ignored(NO_SUCH_RECURRENCE)
    every = record.every_ms
    if record.fired_ms is not None and due_ms(every, c.slot) <= record.fired_ms:
        return Ignored(FIRED_ALREADY)
    if due_ms(every, c.slot) > at_ms:
        return Ignored(SLOT_NOT_DUE)
    latest = latest_slot_at(every, at_ms)
    if latest < record.next_slot:
        return Ignored(NO_SLOT_DUE)
    after = replace(record, fired_ms=due_ms(every, latest), version=position)
    return Changed(after, latest, record.slot_add(latest))


def apply(record: Recurrence | None, command: RecurrenceCommand, at_ms: int,
          position: int) -> tuple[RecurrenceOutcome, Recurrence | None]:
    """``decide``, and the record after it (as it was unless ``Changed``)."""
    outcome = decide(record, command, at_ms, position)
    return outcome, outcome.record if isinstance(outcome, Changed) else record


def due_fire(record: Recurrence, now_ms: int) -> Fire | None:
    """The ``fire`` a timer sends at ``now_ms`` (its clock): the latest slot due by
    then, if it is one that may still fire; None when none is due yet."""
    latest = latest_slot_at(record.every_ms, now_ms)
    return Fire(record.name, latest) if latest >= record.next_slot else None
