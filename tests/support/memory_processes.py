"""eventq processes with no Kafka, for tests that go through the gateway (tests/gateway,
tests/observe): each ``Process`` is a ``Gateway`` over the processor of streams/memory.py
(a ``MemoryLog`` and its ``Driver``, live statistics on as a server with metrics has
them), requests are parsed from their bytes as a connection's are, and replies are
joined as the server writes them. ``two_processes`` makes two of them, each asking the
other through a real ``Cluster`` whose peers parse the encoded request and answer it in
peer form, checked to end where the reply's shape says
(eventq/protocol/reply_reader.py)."""

from __future__ import annotations

import asyncio
import contextvars
import uuid
from collections.abc import Callable, Iterator

from eventq.core import encode_command
from eventq.core.commands import command_key
from eventq.core.partitioner import job_key, partition_for_key
from eventq.gateway.cluster import Cluster
from eventq.gateway.cluster_answers import ClusterAnswers
from eventq.gateway.dispatch import Gateway
from eventq.gateway.handlers import LocalAnswers
from eventq.gateway.leasing import Handover, Leasing
from eventq.protocol.parser import Parser
from eventq.protocol.reply_reader import reply_end
from eventq.state import callers
from eventq.state.livestats import LiveStats
from eventq.state.offers import Offers
from streams.memory import Driver, MemoryLog
from streams.processor import Processor

START_MS = 1_704_067_200_000  # 2024-01-01T00:00:00Z, the spec example's created
PARTITIONS = 2


def job_id(partition: int, n: int) -> uuid.UUID:
    """The n-th v4 id (in a fixed sequence) whose job lives in ``partition``."""
    found = 0
    for i in range(1, 10_000):
        candidate = uuid.UUID(int=(0x1F << 120) + i * 0x9E3779B97F4A7C15, version=4)
        if partition_for_key(job_key(candidate), PARTITIONS) == partition:
            found += 1
            if found == n:
                return candidate
    raise AssertionError("no such id")


def with_stats(driver: Driver) -> Processor:
    """The memory driver's processor, counting as a server with metrics does."""
    return Processor(
        driver.store, driver.index, driver.waiters, driver.node, lambda deadline: None,
        driver.persist, clock_ms=lambda: driver.log.now_ms, follow_ups=driver.follow_up,
        stats=LiveStats(),
    )


class MemoryEngine:
    """The engine's surface the gateway uses (eventq/gateway/ports.py) over the memory
    processor: a command is appended to its job's partition with this process's request
    id, every record is applied, and the waiter has its outcome."""

    def __init__(self) -> None:
        self.log = MemoryLog(PARTITIONS, start_ms=START_MS)
        self.driver = Driver(self.log, make_processor=with_stats)
        self.index = self.driver.index
        self.waiters = self.driver.waiters
        self.offers = Offers()
        self.claimed: set[uuid.UUID] = set()
        self.ready = asyncio.Event()
        self.ready.set()
        self.started_ms = START_MS
        self.write_timeout_s = 1.0
        self.node = self.driver.node
        self._request_ids = 0

    async def submit(self, command, on_abandoned=None):
        self._request_ids += 1
        applied = self.waiters.expect(self._request_ids)
        record = encode_command(command, node=self.driver.node, request_id=self._request_ids,
                                issuer=callers.issuer())
        self.log.append_commands(self.log.partition_of_key(command_key(command)), [record])
        await self.driver.drain()
        return await applied

    async def submit_everywhere(self, command) -> None:
        self.log.append_everywhere(command)
        await self.driver.drain()

    async def append(self, command) -> None:
        self.log.append_command(command)

    async def wait_ready(self) -> None:
        pass

    def job(self, job_id: uuid.UUID):
        return self.driver.store.get(job_id)

    def pinned(self, job_ids):
        return self.driver.store.pinned(job_ids)

    def dependents(self, job_id: uuid.UUID, limit: int):
        return self.driver.store.dependents(job_id, limit)

    def recurrence(self, name: str):
        return self.driver.store.recurrence(name)


class Stats:
    active_clients = evicted_jobs = released = 0


def joined(reply: bytes | Handover | Iterator[bytes]) -> bytes:
    """The bytes a connection is written (a lease's hand-over: its reply)."""
    if isinstance(reply, Handover):
        return reply.reply
    return reply if isinstance(reply, bytes) else b"".join(reply)


class Process:
    """One eventq process: its engine and its gateway (alone, or with ``cluster``)."""

    def __init__(self, cluster: Callable[["Process"], Cluster] | None = None) -> None:
        self.engine = MemoryEngine()
        clock_ms = lambda: self.engine.log.now_ms  # noqa: E731
        leasing = Leasing(self.engine, Stats(), clock_ms)
        local = LocalAnswers(self.engine, Stats(), leasing, clock_ms)
        answers = None
        if cluster is not None:
            answers = ClusterAnswers(cluster=cluster(self), engine=self.engine, stats=Stats(),
                                     leasing=leasing, local=local, clock_ms=clock_ms)
        self.gateway = Gateway(local, leasing, answers)

    async def handle(self, data: bytes, peer: bool = False, caller=None) -> bytes:
        """The reply to ``data``, served for ``caller`` (eventq/state/callers.py: a token's
        name and prefix; None: a server without tokens), as a connection's task would."""
        parser = Parser(lambda: self.engine.log.now_ms)
        parser.feed(data)
        request = parser.next_event()
        assert request is not None and not isinstance(request, Exception), (data, request)
        context = contextvars.copy_context()
        context.run(callers.serve_as, caller)
        return joined(await asyncio.create_task(self.gateway.handle(request, peer=peer),
                                                context=context))


class Peers:
    """The connections to the other processes: the request's bytes parsed there and
    answered in peer form; the reply must end exactly where its shape says."""

    def __init__(self, processes: dict[str, Process]) -> None:
        self.processes = processes

    async def exchange(self, address: str, request: bytes, shape, timeout_s: float,
                       caller=None) -> bytes:
        """Served there for ``caller``, as a peer connection after ``as`` is."""
        reply = await self.processes[address].handle(request, peer=True, caller=caller)
        assert reply_end(reply, shape) == len(reply), (request, reply)
        return reply


def two_processes() -> tuple[Process, Process]:
    """a:1 owns partition 0, b:1 partition 1 (each applies only what it is sent)."""
    processes: dict[str, Process] = {}
    owners = ["a:1", "b:1"]

    def cluster(address: str) -> Callable[[Process], Cluster]:
        return lambda process: Cluster(
            self_address=address, partitions=PARTITIONS, owner_of=owners.__getitem__,
            members=lambda: owners, peers=Peers(processes), request_timeout_s=1.0)  # type: ignore[arg-type]

    processes["a:1"], processes["b:1"] = Process(cluster("a:1")), Process(cluster("b:1"))
    return processes["a:1"], processes["b:1"]


def run(coroutine):
    return asyncio.run(coroutine)


def add(id: uuid.UUID, name: str, flags: str = "", payload: bytes = b"{}") -> bytes:
    return (f"add {id} {name} 60000 86400000 {len(payload)}{flags}\r\n".encode()
            + payload + b"\r\n")


async def finish(process: Process, name: str, outcome: str, result: bytes) -> None:
    """Lease the best job of ``name`` and complete or fail it with ``result``."""
    leased = await process.handle(f"lease {name} 0\r\n".encode())
    leased_id = leased.split(b"\r\n")[1].split(b" ")[0].decode()
    reply = await process.handle(
        f"{outcome} {leased_id} {len(result)}\r\n".encode() + result + b"\r\n")
    assert reply == b"+OK\r\n", reply
