"""What the client hands back: typed values, never raw reply bytes."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Job:
    """A leased job: what a worker runs. ``payload`` is bytes; ``text`` and ``json()``
    decode it."""

    id: uuid.UUID
    name: str
    ttr_ms: int
    payload: bytes

    @property
    def text(self) -> str:
        return self.payload.decode("utf-8")

    def json(self) -> Any:
        return json.loads(self.payload)


@dataclass(frozen=True, slots=True)
class Result:
    """A finished job's outcome (``result``, ``run``): ``ok`` is True when completed,
    False when failed (``data`` empty when it ran out of attempts)."""

    id: uuid.UUID
    ok: bool
    data: bytes

    @property
    def text(self) -> str:
        return self.data.decode("utf-8")


STATE_NAMES = {0: "new", 1: "completed", 2: "failed", 3: "pending", 4: "leased",
               5: "waiting"}  # 5: eventq, a job with upstreams (docs/workflows.md, "Dependencies")


@dataclass(frozen=True, slots=True)
class JobInfo:
    """``inspect job``: a job in any state. ``time`` is its schedule (or backoff retry,
    or release) time as the server prints it, None when it has none. eventq: ``after``
    is its number of upstreams (-after), ``waiting`` how many are not completed yet,
    ``tags`` its tags in -tags order."""

    id: uuid.UUID
    name: str
    ttr_ms: int
    ttl_ms: int
    payload: bytes
    max_attempts: int
    attempts: int
    max_fails: int
    fails: int
    priority: int
    state: str  # new, completed, failed, pending, leased, waiting
    created: str
    time: str | None = None
    after: int = 0
    waiting: int = 0
    tags: tuple[str, ...] = ()
    # eventq: a FAILED job's failure group, when the block shows one (neither failed nor
    # attempts-exhausted: docs/workflows.md, "Failure groups and retry")
    group: str | None = None


@dataclass(frozen=True, slots=True)
class FailedGroup:
    """eventq, ``inspect failed``: a failure group and how many FAILED jobs it holds."""

    name: str
    failed: int


@dataclass(frozen=True, slots=True)
class JobEdges:
    """eventq, internal (``edges``): a job's upstreams in -after order, each with the
    outcome the job holds of it (unfinished, completed, failed, deleted, evicted), and
    dependents registered with it, in id order."""

    upstreams: tuple[tuple[uuid.UUID, str], ...]
    dependents: tuple[uuid.UUID, ...]


@dataclass(frozen=True, slots=True)
class QueueInfo:
    """``inspect queue(s)``: ready and scheduled counts, whether it is paused, and
    (eventq) how many of its jobs wait for upstreams."""

    name: str
    ready: int
    scheduled: int
    paused: bool = False
    waiting: int = 0


@dataclass(frozen=True, slots=True)
class RecurrenceInfo:
    """eventq: ``inspect recurring``'s view of one recurrence (docs/workflows.md, "Recurring
    jobs"): what it adds to ``queue`` every ``every_ms``, when it was defined
    (``created``) and when its next slot is due (``next``, UTC text)."""

    name: str
    queue: str
    ttr_ms: int
    ttl_ms: int
    every_ms: int
    payload: bytes
    max_attempts: int
    max_fails: int
    priority: int
    created: str
    next: str
    backoff_ms: int = 0
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ServerInfo:
    active_clients: int
    evicted_jobs: int
    started: str


@dataclass(frozen=True, slots=True)
class NewJob:
    """A job to add (``add_many``); the id is generated when None."""

    name: str
    payload: bytes | str
    ttr_ms: int = 60_000
    ttl_ms: int = 86_400_000
    id: uuid.UUID | None = None
    priority: int = 0
    max_attempts: int = 0
    max_fails: int = 0
    backoff_ms: int = 0
    after: tuple[uuid.UUID, ...] = ()  # eventq: the upstreams it waits for
    tags: tuple[str, ...] = ()  # eventq: its tags (inspect_tagged finds it by them)
