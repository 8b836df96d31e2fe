"""The records of workflows kept beside the jobs, and their table keys (pure).

The design (docs/architecture.md, "Workflows") keeps two kinds of records apart from the
job records, each of its own so that no record holds more than one payload and one result
(docs/workflows.md, "Inputs"), and fan-out has no bound (docs/workflows.md, "Command
types"):

- a ``Registration``, in the *upstream's* partition, one per (upstream id, dependent
  id): the dependent registered by a ``depend`` (commands.Depend), the position of its
  add and its TTL deadline. It outlives the upstream's ending (a retried upstream tells
  its dependents again) and goes when the upstream is removed (delete, TTL) or, for an
  absent upstream, when the dependent's deadline has passed (eventq/core/followups.py).
- an ``Input``, in the *dependent's* partition, one per (dependent id, upstream id): the
  result an upstream handed its dependent when it finished (``completed`` False: its
  fail result), so that it outlives the upstream (``inputs <id>``). It exists exactly
  while the dependent's link to that upstream is COMPLETED or FAILED.

Keys. Both live in the partition's table (RocksDB, and the `eventq.jobs` changelog)
beside the job records, whose keys are canonical lowercase UUIDs (36 bytes,
eventq.core.partitioner.job_key). Every other key of the table starts with the meta
prefix ``\\x00`` (eventq/state/jobs_table.py: readers of jobs pass over them), and so do these:

    registration  \\x00eventq.reg:<upstream-uuid>:<dependent-uuid>      (12 + 73 bytes)
    input         \\x00eventq.input:<dependent-uuid>:<upstream-uuid>    (14 + 73 bytes)

UUIDs in their canonical lowercase spelling (so a key reads like the job's). They sort
apart from job keys (``\\x00`` is below every UUID character) and from each other and
the other meta keys (``eventq.reg:``, ``eventq.input:``, ``eventq.paused:``,
``eventq.watermark``, ``eventq.bulk.`` differ before either ends). A job's
registrations are one prefix scan (``registrations_prefix``), in dependent id order; a
dependent's inputs are keyed by its links, read in -after order (``input_key``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from eventq.core._check import check_bool, check_bytes, check_int, check_name, check_uuid
from eventq.limits import MAX_DEADLINE_MS, MAX_OFFSET, MAX_RESULT_BYTES, MIN_TIME_MS

META_PREFIX = b"\x00"  # eventq.kafka.logreader.META_KEY_PREFIX (tests hold them equal)
REGISTRATION_KEY_PREFIX = META_PREFIX + b"eventq.reg:"
INPUT_KEY_PREFIX = META_PREFIX + b"eventq.input:"
_UUID_CHARS = 36


@dataclass(frozen=True, slots=True)
class Registration:
    """A dependent registered with an upstream (the upstream is the key's): the position
    of the dependent's add (``dependent_created``), its TTL deadline (None: none) and
    its ``scope`` (docs/security.md, "Queue-name prefixes": its token's prefix, None:
    none; an upstream whose queue is outside it never tells it anything)."""

    dependent: uuid.UUID
    dependent_created: int
    deadline_ms: int | None
    scope: str | None = None

    def __post_init__(self) -> None:
        check_uuid("dependent", self.dependent)
        check_int("dependent_created", self.dependent_created, 0, MAX_OFFSET)
        if self.deadline_ms is not None:
            check_int("deadline_ms", self.deadline_ms, MIN_TIME_MS, MAX_DEADLINE_MS)
        if self.scope is not None:
            check_name("scope", self.scope)

    def sees(self, name: str | None) -> bool:
        """Whether an upstream in queue ``name`` is inside its dependent's scope."""
        return self.scope is None or (name is not None and name.startswith(self.scope))

    def expired(self, at_ms: int) -> bool:
        """Its dependent's TTL has passed at broker time ``at_ms``: it is told nothing."""
        return self.deadline_ms is not None and self.deadline_ms <= at_ms


@dataclass(frozen=True, slots=True)
class Input:
    """An upstream's result, handed to a dependent: ``completed`` (the protocol's 1) or
    failed (0, the fail result)."""

    completed: bool
    result: bytes

    def __post_init__(self) -> None:
        check_bool("completed", self.completed)
        check_bytes("result", self.result, MAX_RESULT_BYTES)


def _pair(prefix: bytes, first: uuid.UUID, second: uuid.UUID) -> bytes:
    return b"%s%s:%s" % (prefix, str(first).encode(), str(second).encode())


def registration_key(upstream: uuid.UUID, dependent: uuid.UUID) -> bytes:
    """The key of ``dependent``'s registration with ``upstream`` (upstream's partition)."""
    return _pair(REGISTRATION_KEY_PREFIX, upstream, dependent)


def registrations_prefix(upstream: uuid.UUID) -> bytes:
    """The prefix of every registration with ``upstream``: scan it for all of them."""
    return b"%s%s:" % (REGISTRATION_KEY_PREFIX, str(upstream).encode())


def input_key(dependent: uuid.UUID, upstream: uuid.UUID) -> bytes:
    """The key of ``upstream``'s input to ``dependent`` (the dependent's partition)."""
    return _pair(INPUT_KEY_PREFIX, dependent, upstream)


def inputs_prefix(dependent: uuid.UUID) -> bytes:
    """The prefix of every input of ``dependent``."""
    return b"%s%s:" % (INPUT_KEY_PREFIX, str(dependent).encode())


def _split(prefix: bytes, key: bytes) -> tuple[uuid.UUID, uuid.UUID]:
    if not key.startswith(prefix) or len(key) != len(prefix) + 2 * _UUID_CHARS + 1:
        raise ValueError(f"not a key under {prefix!r}: {key!r:.120}")
    rest = key[len(prefix):]
    if rest[_UUID_CHARS : _UUID_CHARS + 1] != b":":
        raise ValueError(f"not a key under {prefix!r}: {key!r:.120}")
    first, second = rest[:_UUID_CHARS].decode("ascii"), rest[_UUID_CHARS + 1 :].decode("ascii")
    ids = uuid.UUID(first), uuid.UUID(second)
    if (str(ids[0]), str(ids[1])) != (first, second):  # canonical spelling only
        raise ValueError(f"not a canonical key: {key!r:.120}")
    return ids


def registration_ids(key: bytes) -> tuple[uuid.UUID, uuid.UUID]:
    """(upstream, dependent) of a registration key; ``ValueError`` if it is none."""
    return _split(REGISTRATION_KEY_PREFIX, key)


def input_ids(key: bytes) -> tuple[uuid.UUID, uuid.UUID]:
    """(dependent, upstream) of an input key; ``ValueError`` if it is none."""
    return _split(INPUT_KEY_PREFIX, key)
