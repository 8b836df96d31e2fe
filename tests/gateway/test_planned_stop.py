"""A planned stop answers what it took (docs/operations.md, "Planned restarts"): the
server's stop lets a request in progress finish and its reply reach the client, ends a
waiting lease with -TIMEOUT, closes idle connections at once and reads nothing after;
the gateway asks a request refused with "nothing happened" again while partitions move,
never one that may have written; a lease whose claim moved goes on; a peer that cannot
be reached was sent nothing."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

import pytest

from eventq import core
from eventq.core import State
from eventq.errors import NotWritten, PartitionMoved, Unserved
from eventq.gateway.dispatch import REDISPATCH_FOR_S, Gateway
from eventq.gateway.leasing import Leasing
from eventq.gateway.peers import Peers, PeerUnreachable
from eventq.gateway.server import STOP_GRACE_S, STOPPING, GatewayServer, GatewayStats
from eventq.protocol import requests as rq
from eventq.protocol.reply_reader import Shape
from eventq.state.indexes import JobIndex
from support.jobs import NOW, job
from support.lease_engine import ScriptedEngine, Stats
from support.memory_processes import Process, add, run
from tools.servers import free_port

TTR_MS = 60_000
DELETE = f"delete {uuid.uuid4()}\r\n".encode()  # any request the gateway is handed


class HeldGateway:
    """Answers ``+OK`` to every request, once ``release`` is set."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started = asyncio.Event()
        self.stopped = False
        self.handled = 0

    async def handle(self, request, peer=False):
        self.started.set()
        await self.release.wait()
        self.handled += 1
        return b"+OK\r\n"

    def stopping(self) -> None:
        self.stopped = True


async def serving(gateway) -> tuple[GatewayServer, int]:
    port = free_port()
    server = GatewayServer(gateway, GatewayStats(lambda: 0, timed=False), "127.0.0.1", port,
                           lambda: NOW)
    await server.start()
    return server, port


async def read_all(reader: asyncio.StreamReader) -> bytes:
    return await asyncio.wait_for(reader.read(), 10)


def test_a_request_in_progress_is_answered_and_what_was_pipelined_with_it_too():
    async def scenario():
        gateway = HeldGateway()
        server, port = await serving(gateway)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(DELETE + DELETE)  # two, sent before the stop
        await gateway.started.wait()
        stop = asyncio.create_task(server.stop())
        await asyncio.sleep(0.05)
        assert gateway.stopped and not stop.done()  # it waits for the reply
        gateway.release.set()
        await stop
        assert await read_all(reader) == b"+OK\r\n+OK\r\n"  # then EOF
        writer.close()

    run(scenario())


def test_past_the_grace_a_request_is_refused_as_retryable_and_its_connection_closed():
    async def scenario():
        gateway = HeldGateway()
        server, port = await serving(gateway)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(DELETE + DELETE)
        await gateway.started.wait()
        stop = asyncio.create_task(server.stop())
        await asyncio.sleep(STOP_GRACE_S + 0.2)
        gateway.release.set()  # the first is answered; the second, not begun in the grace, is not
        await stop
        assert await read_all(reader) == b"+OK\r\n" + NotWritten(STOPPING).reply
        assert gateway.handled == 1
        writer.close()

    run(scenario())


def test_another_processes_requests_are_served_until_the_clients_are_done():
    async def scenario():
        gateway = HeldGateway()
        gateway.release.set()
        server, port = await serving(gateway)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"peer\r\n")
        assert await asyncio.wait_for(reader.readline(), 10) == b"+OK\r\n"
        client_reader, client_writer = await asyncio.open_connection("127.0.0.1", port)
        gateway.release.clear()
        client_writer.write(DELETE)  # a client's request in progress holds the stop
        await gateway.started.wait()
        stop = asyncio.create_task(server.stop())
        await asyncio.sleep(STOP_GRACE_S + 0.2)
        writer.write(DELETE)  # a peer's, past the grace: served, not refused
        gateway.release.set()
        assert await asyncio.wait_for(reader.readline(), 10) == b"+OK\r\n"
        await stop  # the client's answered and the peer's idle: done
        assert await read_all(client_reader) == b"+OK\r\n"
        assert await read_all(reader) == b""
        client_writer.close()
        writer.close()

    run(scenario())


def test_an_idle_connection_is_closed_at_once_and_a_request_after_the_stop_is_not_read():
    async def scenario():
        gateway = HeldGateway()
        gateway.release.set()
        server, port = await serving(gateway)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(DELETE)
        assert await asyncio.wait_for(reader.readline(), 10) == b"+OK\r\n"
        await server.stop(drain_s=30)  # returns long before the drain's bound
        assert await read_all(reader) == b""
        assert gateway.handled == 1
        with pytest.raises(ConnectionError):
            await asyncio.open_connection("127.0.0.1", port)

    run(scenario())


def test_a_waiting_lease_ends_with_timeout_and_takes_nothing():
    async def scenario():
        process = Process()
        server, port = await serving(process.gateway)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"lease q 600000\r\n")
        await asyncio.sleep(0.2)  # parsed, and waiting: no job is ready
        await server.stop()
        assert await read_all(reader) == b"-TIMEOUT\r\n"
        job_id = uuid.uuid4()
        assert await process.handle(add(job_id, "q")) == b"+OK\r\n"
        assert process.engine.job(job_id).state == State.NEW  # nobody took it
        writer.close()

    run(scenario())


def test_a_waiting_result_ends_with_timeout():
    async def scenario():
        process = Process()
        job_id = uuid.uuid4()
        assert await process.handle(add(job_id, "q")) == b"+OK\r\n"
        server, port = await serving(process.gateway)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"result {job_id} 600000\r\n".encode())
        await asyncio.sleep(0.2)  # parsed, and waiting: the job is not finished
        await server.stop()
        assert await read_all(reader) == b"-TIMEOUT\r\n"
        writer.close()

    run(scenario())


class Answers:
    """Every request answered by ``answer``, which is called with the attempt number."""

    def __init__(self, answer) -> None:
        self.calls = 0
        self._answer = answer

    def __getattr__(self, name):
        async def handler(request):
            self.calls += 1
            return self._answer(self.calls)
        return handler


def refused_once(calls: int) -> bytes:
    if calls == 1:
        raise Unserved("partition 1 of this job is moving; retry")
    return b"+OK\r\n"


def leasing() -> Leasing:
    return Leasing(ScriptedEngine(JobIndex(), []), Stats(), lambda: NOW)


def test_a_request_refused_with_nothing_happened_is_asked_again():
    answers = Answers(refused_once)
    gateway = Gateway(answers, leasing())  # type: ignore[arg-type]
    request = rq.Add(uuid.uuid4(), "q", TTR_MS, 60_000, b"{}")
    assert run(gateway.handle(request)) == b"+OK\r\n"
    assert answers.calls == 2


def test_a_write_kafka_did_not_take_in_time_is_answered_at_once():
    """The write timeout is the user's deadline (docs/operations.md, "When Kafka is slow
    or gone"): its refusal is not asked again."""

    def not_taken(calls: int) -> bytes:
        raise NotWritten("the add was not written: Kafka did not take it within 2s")

    answers = Answers(not_taken)
    gateway = Gateway(answers, leasing())  # type: ignore[arg-type]
    refused = run(gateway.handle(rq.Add(uuid.uuid4(), "q", TTR_MS, 60_000, b"{}")))
    assert refused.startswith(b"-SERVER-ERROR the add was not written") and answers.calls == 1


def test_a_run_is_never_asked_again_nor_anything_while_stopping():
    answers = Answers(lambda calls: refused_once(1))  # refused every time
    gateway = Gateway(answers, leasing())  # type: ignore[arg-type]
    refused = run(gateway.handle(rq.Run(uuid.uuid4(), "q", TTR_MS, 1000, b"{}")))
    assert refused.startswith(b"-SERVER-ERROR") and answers.calls == 1
    gateway.stopping()
    refused = run(gateway.handle(rq.Add(uuid.uuid4(), "q", TTR_MS, 60_000, b"{}")))
    assert refused.startswith(b"-SERVER-ERROR") and answers.calls == 2


def test_asking_again_ends_with_the_refusal_after_its_bound(monkeypatch):
    monkeypatch.setattr("eventq.gateway.dispatch.REDISPATCH_FOR_S", 0.3)
    answers = Answers(lambda calls: refused_once(1))
    gateway = Gateway(answers, leasing())  # type: ignore[arg-type]
    refused = run(gateway.handle(rq.InspectJob(uuid.uuid4())))
    assert refused.startswith(b"-SERVER-ERROR partition 1")
    assert 1 < answers.calls < 0.3 / 0.1 + 2 < REDISPATCH_FOR_S / 0.1


def test_a_lease_whose_claim_moved_gives_it_back_and_goes_on():
    index = JobIndex()
    first, second = job(name="q"), job(name="q")
    index.put(first, 0, NOW)
    index.put(second, 0, NOW)
    engine = ScriptedEngine(index, [PartitionMoved("moved"), SimpleNamespace(outcome=None)])
    claimed = run(Leasing(engine, Stats(), lambda: NOW).claim_one(["q"]))
    assert claimed is None  # the second claim was refused (None): no job, no error
    starts = [c for c in engine.lane if isinstance(c, core.StartAttempt)]
    releases = [c for c in engine.lane if isinstance(c, core.ReleaseAttempt)]
    assert len(starts) == 2 and {s.job_id for s in starts} == {first.id, second.id}
    assert [(r.job_id, r.claim) for r in releases] == [(starts[0].job_id, 1)]


def test_a_peer_that_cannot_be_reached_was_sent_nothing():
    async def scenario():
        with pytest.raises(PeerUnreachable) as raised:
            await Peers().exchange(f"127.0.0.1:{free_port()}", b"inspect queues\r\n",
                                   Shape.STATUS, timeout_s=5)
        assert isinstance(raised.value, Unserved)

    run(scenario())
