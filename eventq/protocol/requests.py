"""The requests of the workq protocol as values (docs/protocol.md, "Commands").

One frozen dataclass per request. Every field is already validated by the parser:
ids are ``uuid.UUID``, times and durations are integer milliseconds, payloads and
results are ``bytes``. ``Close`` is not a request but the event "close the connection
without a reply" (a line ending in a bare ``\\n``, docs/protocol.md, "Connections and framing").
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Union

from eventq.core.fields import (
    ADD_OPTIONS,
    AFTER,
    BACKOFF,
    MAX_ATTEMPTS,
    MAX_FAILS,
    NAME,
    PAYLOAD,
    PRIORITY,
    RECUR_OPTIONS,
    SCHEDULE_OPTIONS,
    TAGS,
    TTR,
    check_declared,
)


@dataclass(frozen=True, slots=True)
class Add:
    """``add <id> <name> <ttr> <ttl> <size> [flags]`` + payload."""

    id: uuid.UUID
    name: str
    ttr_ms: int
    ttl_ms: int
    payload: bytes
    priority: int = PRIORITY.default
    max_attempts: int = MAX_ATTEMPTS.default
    max_fails: int = MAX_FAILS.default
    backoff_ms: int = BACKOFF.default  # [eventq] -backoff
    # [eventq] -after (docs/workflows.md, "Dependencies"): the upstreams, in -after
    # order; empty for a job without upstreams (every workq add).
    after: tuple[uuid.UUID, ...] = AFTER.default
    # [eventq] -tags (docs/workflows.md, "Tags"): the job's tags, in -tags order;
    # empty for a job without (every workq add).
    tags: tuple[str, ...] = TAGS.default


@dataclass(frozen=True, slots=True)
class Schedule:
    """``schedule <id> <name> <ttr> <ttl> <time> <size> [flags]`` + payload."""

    id: uuid.UUID
    name: str
    ttr_ms: int
    ttl_ms: int
    time_ms: int
    payload: bytes
    priority: int = PRIORITY.default
    max_attempts: int = MAX_ATTEMPTS.default
    max_fails: int = MAX_FAILS.default
    backoff_ms: int = BACKOFF.default  # [eventq] -backoff
    after: tuple[uuid.UUID, ...] = AFTER.default  # [eventq] -after, as for Add
    tags: tuple[str, ...] = TAGS.default  # [eventq] -tags, as for Add


@dataclass(frozen=True, slots=True)
class Run:
    """``run <id> <name> <ttr> <wait-timeout> <size> [-priority=]`` + payload."""

    id: uuid.UUID
    name: str
    ttr_ms: int
    wait_timeout_ms: int
    payload: bytes
    priority: int = PRIORITY.default


@dataclass(frozen=True, slots=True)
class Result:
    """``result <id> <wait-timeout>``."""

    id: uuid.UUID
    wait_timeout_ms: int


@dataclass(frozen=True, slots=True)
class Lease:
    """``lease <name>... <wait-timeout>``: at least one name."""

    names: tuple[str, ...]
    wait_timeout_ms: int


@dataclass(frozen=True, slots=True)
class Complete:
    """``complete <id> <size>`` + result."""

    id: uuid.UUID
    result: bytes


@dataclass(frozen=True, slots=True)
class Fail:
    """``fail <id> <size> [-group=<group>]`` + result. [eventq] ``group``
    (docs/workflows.md, "Failure groups and retry"): the failure group the job is in
    if the fail is final (None: ``failed``)."""

    id: uuid.UUID
    result: bytes
    group: str | None = None


@dataclass(frozen=True, slots=True)
class Delete:
    """``delete <id>`` (any valid UUID; a non-v4 one is simply not found)."""

    id: uuid.UUID


@dataclass(frozen=True, slots=True)
class Touch:
    """``touch <id> [-ttr=<ms>]``: eventq extension, a worker's heartbeat. ``ttr_ms``
    None: the job's own TTR."""

    id: uuid.UUID
    ttr_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Pause:
    """``pause <name>``: eventq extension, the queue hands out no jobs."""

    name: str


@dataclass(frozen=True, slots=True)
class Resume:
    """``resume <name>``: eventq extension, the queue hands out jobs again."""

    name: str


@dataclass(frozen=True, slots=True)
class Inputs:
    """``inputs <id>``: eventq extension (docs/workflows.md, "Inputs"), the results
    of a job's finished upstreams. Any valid v4 UUID; whether the job exists is the
    server's lookup."""

    id: uuid.UUID


@dataclass(frozen=True, slots=True)
class Auth:
    """``auth <token>``: eventq extension (docs/security.md, "Tokens and roles"). The
    token is one word; whether it is configured is the server's to say. Never shown
    (``repr``): tokens appear in no log."""

    token: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class As:
    """``as <name> [-prefix=<prefix>]``: eventq extension, internal, on a ``peer``
    connection of an admin token without a prefix (docs/architecture.md, "Scaling out"):
    the requests that follow on this connection are served for the client a peer forwards
    them for, the token named ``name`` (its audit name, never the token) with queue-name
    ``prefix`` (None: none), until another ``as``. So the process owning a job applies
    the client's scope and writes its name, and a plain workq request keeps its bytes."""

    name: str
    prefix: str | None = None


@dataclass(frozen=True, slots=True)
class Retry:
    """``retry <id> [-delay=<ms>]``: eventq extension (docs/workflows.md, "Failure groups and
    retry"), a FAILED job runs again under its id, ready at once or after
    ``delay_ms``."""

    id: uuid.UUID
    delay_ms: int = 0


@dataclass(frozen=True, slots=True)
class RetryGroup:
    """``retry-group <group> <count>``: eventq extension, retry up to ``count`` FAILED
    jobs of a failure group, oldest failure first."""

    group: str
    count: int


@dataclass(frozen=True, slots=True)
class InspectServer:
    """``inspect server``."""


@dataclass(frozen=True, slots=True)
class InspectQueues:
    """``inspect queues <offset> <limit>``."""

    offset: int
    limit: int


@dataclass(frozen=True, slots=True)
class InspectQueue:
    """``inspect queue <name>``."""

    name: str


@dataclass(frozen=True, slots=True)
class InspectJobs:
    """``inspect jobs <name> <offset> <limit>``: ready jobs in lease order."""

    name: str
    offset: int
    limit: int


@dataclass(frozen=True, slots=True)
class InspectScheduledJobs:
    """``inspect scheduled-jobs <name> <offset> <limit>``: jobs not yet woken."""

    name: str
    offset: int
    limit: int


@dataclass(frozen=True, slots=True)
class InspectWaitingJobs:
    """``inspect waiting-jobs <name> <offset> <limit>``: eventq extension
    (docs/workflows.md, "Dependencies"), WAITING jobs in lease order."""

    name: str
    offset: int
    limit: int


@dataclass(frozen=True, slots=True)
class InspectTagged:
    """``inspect tagged <tag> <offset> <limit>``: eventq extension (docs/workflows.md, "Tags"),
    live jobs with the tag in any state, by created time, then id."""

    tag: str
    offset: int
    limit: int


@dataclass(frozen=True, slots=True)
class InspectFailed:
    """``inspect failed <offset> <limit>``: eventq extension (docs/workflows.md, "Failure groups
    and retry"), the failure groups with FAILED jobs, by name bytewise."""

    offset: int
    limit: int


@dataclass(frozen=True, slots=True)
class InspectFailedJobs:
    """``inspect failed-jobs <group> <offset> <limit>``: eventq extension, a group's
    FAILED jobs, oldest failure first (failure time, then id)."""

    group: str
    offset: int
    limit: int


@dataclass(frozen=True, slots=True)
class InspectJob:
    """``inspect job <id>`` (any valid UUID)."""

    id: uuid.UUID


@dataclass(frozen=True, slots=True)
class InspectDigest:
    """``inspect digest``: eventq extension, a digest of the whole job state."""


@dataclass(frozen=True, slots=True)
class InspectBulk:
    """``inspect bulk``: eventq extension, the bulk lane's backlog per partition."""


@dataclass(frozen=True, slots=True)
class Peer:
    """``peer``: eventq extension, internal. The connection comes from another eventq
    process (docs/architecture.md, "Scaling out"): its requests are answered from this
    process's own partitions, never forwarded, and some replies take their peer form
    (eventq/gateway/peers.py)."""


@dataclass(frozen=True, slots=True)
class Peek:
    """``peek <name>...``: eventq extension, internal. For each name with a
    ready job here, ``<name> <key>``: the place of its best one in lease order, so the
    asking gateway leases the best job of the whole cluster."""

    names: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Confirm:
    """``confirm <id> <claim>``: eventq extension, internal (docs/fencing.md, "A claim
    made for another process: offered, then confirmed"), peer connections only. The
    asking process takes the job this process claimed for its lease, the start-attempt
    at log position ``claim`` (eventq/state/offers.py): ``+OK``, or ``-NOT-FOUND`` if the
    offer was withdrawn (then the job was given back)."""

    id: uuid.UUID
    claim: int


@dataclass(frozen=True, slots=True)
class Outcome:
    """``outcome <node> <request-id> <wait-timeout>``: eventq extension, internal
    (docs/architecture.md, "Abandoned commands"), peer connections only. The reply this
    process, the new owner of a partition, gave the command that process ``node`` wrote
    as its request ``request_id`` and lost the partition of before it applied it, as
    that process would have sent it (``+OK`` or the error line); waits up to
    ``wait_ms`` for this process to apply it, then ``-TIMEOUT``."""

    node: str
    request_id: int
    wait_ms: int


@dataclass(frozen=True, slots=True)
class Edges:
    """``edges <id> <limit>``: eventq extension, internal (the dashboard's job page,
    docs/architecture.md, "Metrics and the dashboard"). A job's edges as the owner of its
    partition knows them: its upstreams from its record, with the outcome it holds of each
    (in -after order; none when the job is absent), then up to ``limit`` of the dependents
    registered with it (in id order; an absent job has those waiting for it). Any valid
    UUID, as ``inspect job``."""

    id: uuid.UUID
    limit: int


@dataclass(frozen=True, slots=True)
class Recur:
    """``recur <recurrence-name> <job-name> <ttr> <ttl> <every-ms> <size> [flags]`` +
    payload: eventq extension (docs/workflows.md, "Recurring jobs"). ``tags`` empty:
    no -tags."""

    name: str
    job_name: str
    ttr_ms: int
    ttl_ms: int
    every_ms: int
    payload: bytes
    priority: int = PRIORITY.default
    max_attempts: int = MAX_ATTEMPTS.default
    max_fails: int = MAX_FAILS.default
    backoff_ms: int = BACKOFF.default
    tags: tuple[str, ...] = TAGS.default


@dataclass(frozen=True, slots=True)
class Unrecur:
    """``unrecur <recurrence-name>``: eventq extension, the recurrence is gone."""

    name: str


@dataclass(frozen=True, slots=True)
class InspectRecurring:
    """``inspect recurring <offset> <limit>``: eventq extension, the recurrences by
    name (bytewise)."""

    offset: int
    limit: int


@dataclass(frozen=True, slots=True)
class Close:
    """Close the connection without a reply (a line ended in a bare ``\\n``)."""


Request = Union[
    Add,
    Schedule,
    Run,
    Result,
    Lease,
    Complete,
    Fail,
    Delete,
    Touch,
    Pause,
    Resume,
    Inputs,
    Auth,
    As,
    Retry,
    RetryGroup,
    InspectFailed,
    InspectFailedJobs,
    InspectServer,
    InspectQueues,
    InspectQueue,
    InspectJobs,
    InspectScheduledJobs,
    InspectWaitingJobs,
    InspectTagged,
    InspectJob,
    InspectDigest,
    InspectBulk,
    Peer,
    Peek,
    Confirm,
    Outcome,
    Edges,
    Recur,
    Unrecur,
    InspectRecurring,
]

# A job's options (eventq/core/fields.py): the requests that carry them hold each, with
# its default (a request that disagrees with the table does not load).
for _request, _options in ((Add, ADD_OPTIONS), (Schedule, SCHEDULE_OPTIONS),
                           (Run, (NAME, TTR, PAYLOAD, PRIORITY)), (Recur, RECUR_OPTIONS)):
    check_declared(_request, _options)
