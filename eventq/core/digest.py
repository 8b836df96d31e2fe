"""Order-independent digests of job state, to compare states built different ways.

A processor's table, a replay of the state log and a fold of the command log hold the
same jobs when their digests are equal. ``version`` is left out: it is a log offset, so
the same state imported into another log has other versions, and so are left out the
other positions a dependent keeps (its links' changes, ``added_at``, ``finished_at``).

The state digest is the sum modulo 2^256 of per-job SHA-256 hashes, together with the
number of jobs, hashed once more. A sum is independent of order and can be kept up to
date incrementally (``StateDigest.add`` / ``discard`` as jobs change).

Workflows' inputs (docs/workflows.md, "Determinism": the digest covers "upstreams and
their outcomes, inputs, tags and groups") are records of their own beside the jobs, each
an upstream's result copied to a dependent: each adds its own hash to the sum (a
different domain, so no input hashes as a job), and is not counted as a job. A state
without inputs digests as it did before workflows, and a job without tags as it did
before tags.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Iterator, Mapping

import msgpack

from eventq.core.job import Job, has_workflow, was_retried
from eventq.core.workflow import Input

DIGEST_VERSION = 1
_MODULUS = 1 << 256
_DOMAIN = b"eventq.state-digest.v%d" % DIGEST_VERSION
_INPUT_TAG = "input"  # a job's array starts with its id's bytes, never with a str
_TAGS_MARK = "tags"  # heads a job's tags in its array (docs/workflows.md, "Tags")

InputEntry = tuple[uuid.UUID, uuid.UUID, Input]  # (dependent, upstream, what it hands on)


def job_digest_bytes(job: Job) -> bytes:
    """The canonical bytes of a job's observable state (every field but ``version``)."""
    return msgpack.packb(  # type: ignore[no-any-return]  # msgpack is untyped
        (
            DIGEST_VERSION,
            job.id.bytes,
            job.name,
            job.ttr_ms,
            job.ttl_ms,
            job.payload,
            job.priority,
            job.max_attempts,
            job.max_fails,
            job.attempts,
            job.fails,
            int(job.state),
            job.created_ms,
            job.scheduled_ms,
            job.expires_ms,
            job.lease_deadline_ms,
            job.result,
            job.result_ok,
            # The backoff fields only when set: a job without one digests as it did
            # before backoffs existed.
            *((job.backoff_ms, job.returns, job.retry_ms) if job.backoff_ms else ()),
            # The workflow's fields only when set, likewise, as one array (so that no
            # job of one shape digests as a job of another).
            *((_workflow(job),) if has_workflow(job) else ()),
            # Its tags only when set, likewise, as one array that starts with a str
            # (a workflow's array starts with an array, the backoff's fields are ints).
            *(((_TAGS_MARK, *job.tags),) if job.tags else ()),
            # A retry's time, only once a retry set it (an array of two: no job of
            # another shape digests as this one).
            *(((job.delayed_ms, job.early),) if was_retried(job) else ()),
        ),
        use_bin_type=True,
    )


def _workflow(job: Job) -> tuple[object, ...]:
    """Upstreams and their outcomes, and the group: a FAILED job's group is ``group`` or
    the one its fails give (job.failure_group), both digested; [eventq] a dependent's
    scope (docs/security.md, "Queue-name prefixes") only when set, so a dependent without
    one digests as it did before scopes."""
    links = tuple((link.id.bytes, int(link.outcome), link.completed_ms) for link in job.upstreams)
    scope = () if job.scope is None else (job.scope,)
    return (links, job.released_ms, job.finished_ms, job.group, *scope)


def input_digest_bytes(dependent: uuid.UUID, upstream: uuid.UUID, entry: Input) -> bytes:
    """The canonical bytes of one input: whose, from whom, and what it hands on."""
    return msgpack.packb(  # type: ignore[no-any-return]  # msgpack is untyped
        (DIGEST_VERSION, _INPUT_TAG, dependent.bytes, upstream.bytes, entry.completed,
         entry.result),
        use_bin_type=True,
    )


def input_hash(dependent: uuid.UUID, upstream: uuid.UUID, entry: Input) -> int:
    return int.from_bytes(hashlib.sha256(input_digest_bytes(dependent, upstream, entry)).digest(),
                          "big")


def job_hash(job: Job) -> int:
    """SHA-256 of ``job_digest_bytes`` as an int (the summand of a state digest)."""
    return int.from_bytes(hashlib.sha256(job_digest_bytes(job)).digest(), "big")


class StateDigest:
    """An incrementally maintained digest of a set of jobs."""

    __slots__ = ("_sum", "_count")

    def __init__(self, jobs: Iterable[Job] = (), inputs: Iterable[InputEntry] = ()) -> None:
        self._sum = 0
        self._count = 0
        for job in jobs:
            self.add(job)
        for dependent, upstream, entry in inputs:
            self.add_input(dependent, upstream, entry)

    def add(self, job: Job) -> None:
        self._sum = (self._sum + job_hash(job)) % _MODULUS
        self._count += 1

    def discard(self, job: Job) -> None:
        """Remove a job previously added (the very same state)."""
        if self._count == 0:
            raise ValueError("discard from an empty digest")
        self._sum = (self._sum - job_hash(job)) % _MODULUS
        self._count -= 1

    def add_input(self, dependent: uuid.UUID, upstream: uuid.UUID, entry: Input) -> None:
        """One input kept beside a dependent (not a job: the count is unchanged)."""
        self._sum = (self._sum + input_hash(dependent, upstream, entry)) % _MODULUS

    def replace(self, old: Job | None, new: Job | None) -> None:
        """Account for one job changing from ``old`` to ``new`` (None: absent)."""
        if old is not None:
            self.discard(old)
        if new is not None:
            self.add(new)

    @property
    def count(self) -> int:
        return self._count

    @property
    def sum(self) -> int:
        """The sum of the job hashes: digests of disjoint sets of jobs (the partitions
        of several processes: docs/architecture.md, "Scaling out") combine by adding
        sums and counts."""
        return self._sum

    @classmethod
    def combined(cls, parts: Iterable[tuple[int, int]]) -> "StateDigest":
        """The digest of the union of disjoint sets given as (sum, count) pairs."""
        digest = cls()
        for part_sum, part_count in parts:
            digest._sum = (digest._sum + part_sum) % _MODULUS
            digest._count += part_count
        return digest

    def hexdigest(self) -> str:
        data = _DOMAIN + self._count.to_bytes(8, "big") + self._sum.to_bytes(32, "big")
        return hashlib.sha256(data).hexdigest()


def input_entries(inputs: Mapping[tuple[uuid.UUID, uuid.UUID], Input]) -> Iterator[InputEntry]:
    """Inputs kept as (dependent, upstream) -> input, as the digest takes them."""
    return ((dependent, upstream, entry) for (dependent, upstream), entry in inputs.items())


def state_digest(jobs: Iterable[Job], inputs: Iterable[InputEntry] = ()) -> str:
    """Hex digest of a whole state; equal jobs (and inputs) give equal digests in any
    order."""
    return StateDigest(jobs, inputs).hexdigest()
