"""Workflow sections 1 and 2 through the gateway (spec/workflows.md, "1. Dependencies",
"2. Inputs", "Job and queue blocks"), byte for byte, with no Kafka: each process is a
``Gateway`` over the processor of streams/memory.py (a ``MemoryLog`` and its ``Driver``),
requests are parsed from their bytes as a connection's are, and the replies are joined
as the server writes them. With two processes, each asks the other through a real
``Cluster`` whose peers parse the encoded request and answer it in peer form, checked
to end where the reply's shape says (eventq/protocol/reply_reader.py)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator

from eventq.core import encode_command
from eventq.gateway.cluster import Cluster
from eventq.gateway.cluster_answers import ClusterAnswers
from eventq.gateway.dispatch import Gateway
from eventq.gateway.handlers import LocalAnswers
from eventq.gateway.leasing import Handover, Leasing
from eventq.kafka.partitioner import job_key, partition_for_key
from eventq.offers import Offers
from eventq.protocol.parser import Parser
from eventq.protocol.reply_reader import reply_end
from streams.memory import Driver, MemoryLog

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


U1, U2, D, PLAIN, SCHED = (job_id(0, n) for n in range(1, 6))
UB, DB = job_id(1, 1), job_id(1, 2)


class MemoryEngine:
    """The engine's surface the gateway uses (eventq/gateway/ports.py) over the memory
    processor: a command is appended to its job's partition with this process's request
    id, every record is applied, and the waiter has its outcome."""

    def __init__(self) -> None:
        self.log = MemoryLog(PARTITIONS, start_ms=START_MS)
        self.driver = Driver(self.log)
        self.index = self.driver.index
        self.waiters = self.driver.waiters
        self.offers = Offers()
        self.claimed: set[uuid.UUID] = set()
        self.ready = asyncio.Event()
        self.ready.set()
        self.started_ms = START_MS
        self.write_timeout_s = 1.0
        self._request_ids = 0

    async def submit(self, command, on_abandoned=None):
        self._request_ids += 1
        applied = self.waiters.expect(self._request_ids)
        record = encode_command(command, node=self.driver.node, request_id=self._request_ids)
        self.log.append_commands(self.log.partition_of(command.job_id), [record])
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

    async def handle(self, data: bytes, peer: bool = False) -> bytes:
        parser = Parser(lambda: self.engine.log.now_ms)
        parser.feed(data)
        request = parser.next_event()
        assert request is not None and not isinstance(request, Exception), (data, request)
        return joined(await self.gateway.handle(request, peer=peer))


class Peers:
    """The connections to the other processes: the request's bytes parsed there and
    answered in peer form; the reply must end exactly where its shape says."""

    def __init__(self, processes: dict[str, Process]) -> None:
        self.processes = processes

    async def exchange(self, address: str, request: bytes, shape, timeout_s: float) -> bytes:
        reply = await self.processes[address].handle(request, peer=True)
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


def waiting_block(id: uuid.UUID, waiting: int, state: int = 5, time: str = "") -> bytes:
    """The spec's example dependent (name etl, 2 upstreams), without its tags line."""
    keys = 14 + (1 if time else 0)
    return (
        f"{id} {keys}\r\nname etl\r\nttr 60000\r\nttl 86400000\r\npayload-size 2\r\n"
        f"payload {{}}\r\nmax-attempts 0\r\nattempts 0\r\nmax-fails 0\r\nfails 0\r\n"
        f"priority 0\r\nstate {state}\r\ncreated 2024-01-01T00:00:00Z\r\n"
        + (f"time {time}\r\n" if time else "")
        + f"after 2\r\nwaiting {waiting}\r\n"
    ).encode()


# --- one process ------------------------------------------------------------------


def test_a_dependent_waits_shows_its_upstreams_and_is_released_by_the_last() -> None:
    async def scenario() -> None:
        p = Process()
        assert await p.handle(add(U1, "extract")) == b"+OK\r\n"
        assert await p.handle(add(U2, "extract")) == b"+OK\r\n"
        assert await p.handle(add(D, "etl", f" -after={U1},{U2}")) == b"+OK\r\n"
        inspect_d = f"inspect job {D}\r\n".encode()
        assert await p.handle(inspect_d) == b"+OK 1\r\n" + waiting_block(D, 2)

        await finish(p, "extract", "complete", b"r1")
        # spec/workflows.md's example: a WAITING dependent of 2 upstreams, one COMPLETED
        assert await p.handle(inspect_d) == (
            b"+OK 1\r\n" + f"{D} 14\r\n".encode()
            + b"name etl\r\nttr 60000\r\nttl 86400000\r\npayload-size 2\r\npayload {}\r\n"
            b"max-attempts 0\r\nattempts 0\r\nmax-fails 0\r\nfails 0\r\npriority 0\r\n"
            b"state 5\r\ncreated 2024-01-01T00:00:00Z\r\nafter 2\r\nwaiting 1\r\n")
        assert await p.handle(b"inspect queue etl\r\n") == (
            b"+OK 1\r\netl 3\r\nready-len 0\r\nscheduled-len 0\r\nwaiting-len 1\r\n")
        assert await p.handle(b"inspect queues 0 10\r\n") == (
            b"+OK 2\r\netl 3\r\nready-len 0\r\nscheduled-len 0\r\nwaiting-len 1\r\n"
            b"extract 2\r\nready-len 1\r\nscheduled-len 0\r\n")
        assert await p.handle(b"inspect jobs etl 0 10\r\n") == b"+OK 0\r\n"
        assert await p.handle(b"inspect scheduled-jobs etl 0 10\r\n") == b"+OK 0\r\n"
        assert await p.handle(b"inspect waiting-jobs etl 0 10\r\n") == (
            b"+OK 1\r\n" + waiting_block(D, 1))
        assert await p.handle(b"inspect waiting-jobs etl 1 10\r\n") == b"+OK 0\r\n"
        assert await p.handle(b"inspect waiting-jobs extract 0 10\r\n") == b"+OK 0\r\n"
        assert await p.handle(f"inputs {D}\r\n".encode()) == f"+OK 1\r\n{U1} 1 2\r\nr1\r\n".encode()

        p.engine.log.advance(5000)
        await finish(p, "extract", "complete", b"result two")
        released = "2024-01-01T00:00:05Z"  # the last upstream's complete
        assert await p.handle(inspect_d) == (
            b"+OK 1\r\n" + waiting_block(D, 0, state=0, time=released))
        assert await p.handle(b"inspect queue etl\r\n") == (
            b"+OK 1\r\netl 2\r\nready-len 1\r\nscheduled-len 0\r\n")
        assert await p.handle(b"inspect waiting-jobs etl 0 10\r\n") == b"+OK 0\r\n"
        assert await p.handle(b"inspect jobs etl 0 10\r\n") == (
            b"+OK 1\r\n" + waiting_block(D, 0, state=0, time=released))
        assert await p.handle(f"inputs {D}\r\n".encode()) == (
            f"+OK 2\r\n{U1} 1 2\r\nr1\r\n{U2} 1 10\r\nresult two\r\n".encode())

    run(scenario())


def test_a_failed_upstream_is_an_input_with_0_and_fails_its_dependent() -> None:
    async def scenario() -> None:
        p = Process()
        await p.handle(add(U1, "extract", " -max-fails=1"))
        await p.handle(add(U2, "extract"))
        assert await p.handle(add(D, "etl", f" -after={U2},{U1}")) == b"+OK\r\n"
        await finish(p, "extract", "fail", b"bad")  # U1 first: added first
        assert await p.handle(f"inputs {D}\r\n".encode()) == f"+OK 1\r\n{U1} 0 3\r\nbad\r\n".encode()
        block = await p.handle(f"inspect job {D}\r\n".encode())
        assert b"state 2\r\n" in block and block.endswith(b"after 2\r\nwaiting 2\r\n")
        assert await p.handle(b"inspect queue etl\r\n") == (
            b"+OK 1\r\netl 2\r\nready-len 0\r\nscheduled-len 0\r\n")

    run(scenario())


def test_a_scheduled_dependent_keeps_its_time_and_upstreams() -> None:
    async def scenario() -> None:
        p = Process()
        line = f"schedule {SCHED} etl 60000 86400000 2024-01-02T00:00:00Z 2 -after={U1},{U2}"
        assert await p.handle(line.encode() + b"\r\n{}\r\n") == b"+OK\r\n"
        assert await p.handle(f"inspect job {SCHED}\r\n".encode()) == (
            b"+OK 1\r\n" + waiting_block(SCHED, 2, time="2024-01-02T00:00:00Z"))
        assert await p.handle(b"inspect scheduled-jobs etl 0 10\r\n") == b"+OK 0\r\n"
        assert await p.handle(b"inspect waiting-jobs etl 0 10\r\n") == (
            b"+OK 1\r\n" + waiting_block(SCHED, 2, time="2024-01-02T00:00:00Z"))
        assert await p.handle(f"inputs {SCHED}\r\n".encode()) == b"+OK 0\r\n"

    run(scenario())


def test_jobs_without_upstreams_keep_workqs_blocks_and_have_no_inputs() -> None:
    async def scenario() -> None:
        p = Process()
        assert await p.handle(add(PLAIN, "q")) == b"+OK\r\n"
        assert await p.handle(f"inspect job {PLAIN}\r\n".encode()) == (
            f"+OK 1\r\n{PLAIN} 12\r\n".encode()
            + b"name q\r\nttr 60000\r\nttl 86400000\r\npayload-size 2\r\npayload {}\r\n"
            b"max-attempts 0\r\nattempts 0\r\nmax-fails 0\r\nfails 0\r\npriority 0\r\n"
            b"state 0\r\ncreated 2024-01-01T00:00:00Z\r\n")
        assert await p.handle(b"inspect queue q\r\n") == (
            b"+OK 1\r\nq 2\r\nready-len 1\r\nscheduled-len 0\r\n")
        assert await p.handle(f"inputs {PLAIN}\r\n".encode()) == b"+OK 0\r\n"
        assert await p.handle(f"inputs {D}\r\n".encode()) == b"-NOT-FOUND\r\n"
        assert await p.handle(b"inspect waiting-jobs nosuch 0 10\r\n") == b"-NOT-FOUND\r\n"

    run(scenario())


# --- two processes ----------------------------------------------------------------


def test_across_processes_waiting_is_summed_merged_and_inputs_forwarded() -> None:
    async def scenario() -> None:
        a, b = two_processes()
        # Each process's log holds only what it was sent, so a depend between them
        # never arrives (DB waits for U1 as for an absent upstream); every request
        # goes to a, which forwards b's jobs' to b.
        assert await a.handle(add(U1, "extract")) == b"+OK\r\n"
        assert await a.handle(add(D, "etl", f" -after={U1},{U2}")) == b"+OK\r\n"
        b.engine.log.advance(1000)
        assert await a.handle(add(UB, "other")) == b"+OK\r\n"
        assert await a.handle(add(DB, "etl", f" -after={UB},{U1}")) == b"+OK\r\n"
        assert b.engine.job(DB) is not None and a.engine.job(DB) is None

        assert await a.handle(b"inspect queue etl\r\n") == (
            b"+OK 1\r\netl 3\r\nready-len 0\r\nscheduled-len 0\r\nwaiting-len 2\r\n")
        assert await a.handle(b"inspect queue other\r\n") == (
            b"+OK 1\r\nother 2\r\nready-len 1\r\nscheduled-len 0\r\n")
        assert await a.handle(b"inspect queues 0 10\r\n") == (
            b"+OK 3\r\netl 3\r\nready-len 0\r\nscheduled-len 0\r\nwaiting-len 2\r\n"
            b"extract 2\r\nready-len 1\r\nscheduled-len 0\r\n"
            b"other 2\r\nready-len 1\r\nscheduled-len 0\r\n")

        # lease order: the same keys in every process (DB was added a second later)
        keys = sorted(a.engine.index.waiting_page_keys("etl", 0, 10)
                      + b.engine.index.waiting_page_keys("etl", 0, 10))
        assert [job for _, job in keys] == [D, DB]
        db_block = (await a.handle(f"inspect job {DB}\r\n".encode()))[len(b"+OK 1\r\n"):]
        assert db_block.endswith(b"created 2024-01-01T00:00:01Z\r\nafter 2\r\nwaiting 2\r\n")
        assert await a.handle(b"inspect waiting-jobs etl 0 10\r\n") == (
            b"+OK 2\r\n" + waiting_block(D, 2) + db_block)
        assert await a.handle(b"inspect waiting-jobs etl 1 1\r\n") == b"+OK 1\r\n" + db_block
        assert await a.handle(b"inspect waiting-jobs other 0 10\r\n") == b"+OK 0\r\n"
        assert await a.handle(b"inspect waiting-jobs nosuch 0 10\r\n") == b"-NOT-FOUND\r\n"

        await finish(b, "other", "complete", b"from b")
        assert await a.handle(f"inputs {DB}\r\n".encode()) == (
            f"+OK 1\r\n{UB} 1 6\r\nfrom b\r\n".encode())
        assert await a.handle(f"inputs {D}\r\n".encode()) == b"+OK 0\r\n"
        assert await a.handle(f"inputs {job_id(1, 9)}\r\n".encode()) == b"-NOT-FOUND\r\n"
        assert await a.handle(b"inspect queue etl\r\n") == (
            b"+OK 1\r\netl 3\r\nready-len 0\r\nscheduled-len 0\r\nwaiting-len 2\r\n")

    run(scenario())
