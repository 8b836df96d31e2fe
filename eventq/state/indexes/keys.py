"""Fields packed into integers whose order is the order an index needs.

Memory per job is the design constraint (docs/architecture.md, "Memory and restores"):
a job's place in a queue, a deadline heap, a tag's list or a failure group is one
``int``, never a tuple. Each key packs its fields most significant first and a job's
128-bit id in the low bits, so ``key & ID_MASK`` finds the job again and two keys
compare as their tuples would.
"""

from __future__ import annotations

import uuid

from eventq.core.ids import uuid_of_int
from eventq.limits import MAX_PRIORITY, MIN_TIME_MS

# A deadline past this (a saturated TTL of 2^64-1 ms) is held as this: 292 million years.
NEVER_MS = 2**63 - 1

TIME_BITS = 50  # MIN_TIME_MS..MAX_TIME_MS spans 2^48.2 ms
ID_BITS = 128
ID_MASK = (1 << ID_BITS) - 1
ORDER_BITS = 32 + 1 + TIME_BITS + TIME_BITS + ID_BITS  # an ``order_key``
ORDER_MASK = (1 << ORDER_BITS) - 1
KIND_SHIFT = ID_BITS  # a deadline item's kind bit
DEADLINE_SHIFT = ID_BITS + 1  # a deadline item's time

TTL = "ttl"  # a job's time-to-live ends: expire(id)
TTR = "ttr"  # a lease's time-to-run ends: timeout-attempt(id, attempts)
KIND_BITS = {TTL: 0, TTR: 1}  # the old tuples sorted "ttl" before "ttr"
KINDS = (TTL, TTR)


def order_key(priority: int, scheduled_ms: int | None, created_ms: int, id_int: int) -> int:
    """``eventq.core.job.lease_order_key`` as one integer with the same order: priority
    descending, unscheduled first, scheduled time, creation time, id bytes."""
    key = MAX_PRIORITY - priority
    key = (key << 1) | (scheduled_ms is not None)
    key = (key << TIME_BITS) | ((scheduled_ms or 0) - MIN_TIME_MS)
    key = (key << TIME_BITS) | (created_ms - MIN_TIME_MS)
    return (key << ID_BITS) | id_int


def scheduled_key(scheduled_ms: int, order: int) -> int:
    """(scheduled time, lease order): a queue's not-yet-due jobs, soonest first;
    ``key & ORDER_MASK`` is the job's ``order_key``."""
    return ((scheduled_ms - MIN_TIME_MS) << ORDER_BITS) | order


def due_below(now_ms: int, shift: int) -> int:
    """The least key, of keys holding a time above ``shift`` bits, not yet due at
    ``now_ms``: every key below it is due."""
    return (now_ms - MIN_TIME_MS + 1) << shift


def time_of(key: int, shift: int) -> int:
    """The time held above ``shift`` bits of a key."""
    return (key >> shift) + MIN_TIME_MS


def failed_key(failed_ms: int, id_int: int) -> int:
    """(failure time, id): a failure group's FAILED jobs, oldest failure first."""
    return ((failed_ms - MIN_TIME_MS) << ID_BITS) | id_int


def tagged_key(created_ms: int, id_int: int) -> int:
    """A tagged job's place among its tag's jobs: created time, then id (docs/workflows.md,
    "Tags"); the same in every process, so pages merge by it."""
    return ((created_ms - MIN_TIME_MS) << ID_BITS) | id_int


def deadline_item(deadline_ms: int, kind: str, id_int: int) -> int:
    """(deadline, kind, id): one item of the TTR and TTL heap."""
    return ((deadline_ms - MIN_TIME_MS) << DEADLINE_SHIFT) | (KIND_BITS[kind] << KIND_SHIFT) | id_int


def registration_item(deadline_ms: int, id_int: int) -> int:
    """(deadline, upstream id): one item of the registrations' heap."""
    return ((min(deadline_ms, NEVER_MS) - MIN_TIME_MS) << ID_BITS) | id_int


def clamp(deadline_ms: int | None) -> int | None:
    """A deadline as the indexes hold it: at most ``NEVER_MS``."""
    return deadline_ms if deadline_ms is None or deadline_ms <= NEVER_MS else NEVER_MS


def id_of(key: int) -> uuid.UUID:
    """The job id in a key's low bits."""
    return uuid_of_int(key & ID_MASK)
