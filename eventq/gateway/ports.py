"""What the gateway asks of the rest of its process, as types: exactly the members it
uses, no more.

- ``Engine``: the event-sourced core (streams/engine.py, ``Engine``): write a command
  and wait until it is applied, read the jobs and indexes of the partitions this
  process owns (docs/architecture.md, "The gateway");
- ``Stats``: the gateway's own figures (eventq/gateway/server.py, ``GatewayStats``);
- ``Cluster``: the other processes of the group, and asking them
  (eventq/gateway/cluster.py, ``Cluster``; docs/architecture.md, "Scaling out").

The gateway never imports streams (tests/test_layers.py); the wiring (eventq/run/serve.py)
hands it the real ones, and tests/gateway/test_ports.py checks that they have every
member named here.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Protocol, runtime_checkable

from eventq.core import Command, Input, Job, QueueCommand
from eventq.core.commands import RecurrenceCommand
from eventq.core.digest import StateDigest
from eventq.core.recurrence import Recurrence
from eventq.protocol.reply_reader import Block
from eventq.state.indexes import JobIndex
from eventq.state.offers import Offers
from eventq.state.waiters import Applied, Waiters


class PinnedJobs(Protocol):
    """Jobs as they were at one moment, for a reply written over many event-loop turns
    (streams/store.py, ``PinnedJobs``)."""

    def has(self, job_id: uuid.UUID) -> bool: ...

    def get(self, job_id: uuid.UUID) -> Job | None: ...

    def inputs(self, job: Job) -> tuple[int, Iterator[tuple[uuid.UUID, Input]]]:
        """[eventq] A dependent's inputs as they were at the same moment: how many, then
        (upstream id, what it handed on) per finished upstream, in -after order, each
        read when the reply reaches it."""
        ...


@runtime_checkable
class Engine(Protocol):
    index: JobIndex  # the indexes of the owned partitions' jobs
    waiters: Waiters  # where requests wait for the processor
    offers: Offers  # claims made for other processes' leases, until confirmed
    claimed: set[uuid.UUID]  # jobs a lease is claiming right now
    ready: asyncio.Event  # set once the owned partitions are recovered
    started_ms: int
    write_timeout_s: float
    node: str  # this run's name on the commands it writes

    async def submit(
        self, command: Command | RecurrenceCommand,
        on_abandoned: Callable[[int], None] | None = None,
    ) -> Applied:
        """Write ``command`` and wait until it is applied (``on_abandoned``: called with
        its log position if it is given up on once Kafka has it)."""
        ...

    async def submit_everywhere(self, command: QueueCommand) -> None:
        """Write a queue command to every partition; applied in the owned ones."""
        ...

    def append(self, command: Command) -> Awaitable[None]:
        """Queue a compensation now; the result waits for Kafka to take it."""
        ...

    async def wait_ready(self) -> None: ...

    def job(self, job_id: uuid.UUID) -> Job | None: ...

    def pinned(self, job_ids: Sequence[uuid.UUID]) -> PinnedJobs: ...

    def recurrence(self, name: str) -> Recurrence | None:
        """[eventq] Recurrence ``name``'s record, from its owned partition."""
        ...

    def dependents(self, job_id: uuid.UUID, limit: int) -> Sequence[uuid.UUID]:
        """[eventq] Up to ``limit`` dependents registered with the job (present or not)."""
        ...

    async def digest(self) -> str: ...

    async def digest_part(self) -> tuple[StateDigest, Sequence[int]]:
        """The digest of the owned partitions' jobs, and those partitions."""
        ...


@runtime_checkable
class Stats(Protocol):
    active_clients: int
    released: int  # leases given back because no client received them

    @property
    def evicted_jobs(self) -> int: ...


@runtime_checkable
class Cluster(Protocol):
    partitions: int

    def others(self) -> list[str]:
        """The other processes, by gateway address."""
        ...

    def remote_owner(self, job_id: uuid.UUID) -> str | None:
        """The other process owning the job's partition (None: this one, or nobody)."""
        ...

    def remote_owner_of_key(self, key: bytes) -> str | None:
        """The same for any Kafka key ([eventq] a recurrence's ``recur:<name>``)."""
        ...

    def remote_owner_of_partition(self, partition: int) -> str | None:
        """The other process owning ``partition`` (None: this one, or nobody)."""
        ...

    async def ask(self, address: str, request: object) -> bytes: ...

    async def ask_others(self, request: object) -> list[bytes]: ...

    async def pages_of_others(
        self, page: Callable[[int, int], object], upto: int
    ) -> list[list[Block] | None]: ...
