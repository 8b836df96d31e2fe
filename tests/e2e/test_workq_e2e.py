"""Every command and reply of the spec against a real broker and a running server."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from eventq.client.raw import RawClient as Client
from eventq.errors import ClientError, NotFound, Timeout
from support.shared import shared
from tools.servers import raw_exchange

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]
# ``server`` takes the cluster itself, for the module: tests/support/shared.py, ``uses``
SHARED_FIXTURES = ("eventq_cluster", "kafka_cluster")


@pytest.fixture(scope="module", params=["one process", "three processes"])
def server(request):
    """Every test runs against one process, then against the first of three processes
    of one app whose partitions (and so the test's jobs) are spread over all three:
    each request about a job owned elsewhere is forwarded (docs/architecture.md,
    "Scaling out")."""
    if request.param == "one process":
        return request.getfixturevalue("one_server")
    return shared(request.config, "eventq_cluster").get()[0]  # (a module's: not the fixture)


def run(coro):
    return asyncio.run(coro)


async def client(server) -> Client:
    return await Client.connect(port=server.port)


def utc(seconds_from_now: float) -> str:
    return utc_text(datetime.now(timezone.utc) + timedelta(seconds=seconds_from_now))


def utc_text(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


# Timing is checked as what it is for, not how fast it went (a busy machine is slow):
# a wait happened (at least its length), an end came at its own deadline (before a
# later one's), a wake came from the event and not from a wait far longer.
LONG_WAIT_MS = 60_000
CLOCK_STEP = timedelta(milliseconds=1)  # the protocol's times are whole milliseconds
TIMER_SLACK_S = 0.005  # the event loop's clock and timers are per millisecond


def new_name(request) -> str:
    return "q-" + uuid.uuid4().hex[:12]


async def wait_for_state(c: Client, job, state: bytes, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while (await c.inspect_job(job))["state"] != state:
        assert time.monotonic() < deadline, f"job never reached state {state!r}"
        await asyncio.sleep(0.05)


@pytest.fixture
def name(request):
    return new_name(request)


def test_add_lease_complete_result_exact_bytes(server, name):
    job = uuid.uuid4()
    reply = raw_exchange(server.port, f"add {job} {name} 5000 60000 4\r\nping\r\n".encode())
    assert reply == b"+OK\r\n"
    reply = raw_exchange(server.port, f"lease {name} 1000\r\n".encode(),
                         until=lambda d: d.endswith(b"ping\r\n"))
    assert reply == f"+OK 1\r\n{job} {name} 5000 4\r\nping\r\n".encode()
    reply = raw_exchange(server.port, f"complete {job} 4\r\npong\r\n".encode())
    assert reply == b"+OK\r\n"
    reply = raw_exchange(server.port, f"result {job} 0\r\n".encode(),
                         until=lambda d: d.endswith(b"pong\r\n"))
    assert reply == f"+OK 1\r\n{job} 1 4\r\npong\r\n".encode()
    reply = raw_exchange(server.port, f"complete {job} 1\r\nx\r\n".encode())
    assert reply == b"-CLIENT-ERROR Duplicate result\r\n"


def test_inspect_job_block_exact(server, name):
    job = uuid.uuid4()
    raw_exchange(server.port,
                 f"add {job} {name} 1000 60000 4 -priority=7 -max-attempts=3\r\nping\r\n".encode())
    reply = raw_exchange(server.port, f"inspect job {job}\r\n".encode(),
                         until=lambda d: d.count(b"\r\n") >= 14)
    lines = reply.split(b"\r\n")
    assert lines[:12] == [
        b"+OK 1", f"{job} 12".encode(), f"name {name}".encode(), b"ttr 1000", b"ttl 60000",
        b"payload-size 4", b"payload ping", b"max-attempts 3", b"attempts 0",
        b"max-fails 0", b"fails 0", b"priority 7",
    ]
    assert lines[12] == b"state 0"
    created = datetime.strptime(lines[13].decode(), "created %Y-%m-%dT%H:%M:%SZ")
    assert abs(created.replace(tzinfo=timezone.utc) - datetime.now(timezone.utc)) < timedelta(seconds=10)
    assert raw_exchange(server.port, f"inspect job {uuid.uuid4()}\r\n".encode()) == b"-NOT-FOUND\r\n"


def test_duplicates_and_not_found(server, name):
    async def scenario():
        async with await client(server) as c:
            job = uuid.uuid4()
            await c.add(job, name, 1000, 60000, b"a")
            with pytest.raises(ClientError, match="Duplicate job"):
                await c.add(job, name, 1000, 60000, b"a")
            for call in (c.complete(uuid.uuid4(), b""), c.fail(uuid.uuid4(), b""),
                         c.delete(uuid.uuid4()), c.result(uuid.uuid4(), 0)):
                with pytest.raises(NotFound):
                    await call
            await c.delete(job)
            with pytest.raises(NotFound):
                await c.inspect_job(job)
            await c.add(job, name, 1000, 60000, b"again")  # a deleted id is free again
            assert (await c.inspect_job(job))["payload"] == b"again"
    run(scenario())
    # [eventq] a valid non-v4 UUID is -NOT-FOUND for delete
    assert raw_exchange(server.port, b"delete 6ba7b810-9dad-11d1-80b4-00c04fd430c4\r\n") == b"-NOT-FOUND\r\n"


def test_priority_then_fifo_order(server, name):
    async def scenario():
        async with await client(server) as c:
            low, high1, high2, mid = (uuid.uuid4() for _ in range(4))
            await c.add(low, name, 5000, 60000, b"low", priority=-5)
            await c.add(high1, name, 5000, 60000, b"high1", priority=10)
            await asyncio.sleep(0.01)  # FIFO is by creation time (broker ms)
            await c.add(high2, name, 5000, 60000, b"high2", priority=10)
            await c.add(mid, name, 5000, 60000, b"mid")
            listed = await c.inspect_jobs(name)
            assert [uuid.UUID(head) for head, _ in listed] == [high1, high2, mid, low]
            leased = [(await c.lease(name, 1000)).payload for _ in range(4)]
            assert leased == [b"high1", b"high2", b"mid", b"low"]
    run(scenario())


def test_ttr_timeout_requeues_at_old_position_then_max_attempts_fails(server, name):
    async def scenario():
        async with await client(server) as c:
            job, later = uuid.uuid4(), uuid.uuid4()
            await c.add(job, name, 300, 60000, b"first", max_attempts=2)
            await asyncio.sleep(0.01)
            await c.add(later, name, 300, 60000, b"second", max_attempts=1)
            assert (await c.lease(name, 1000)).id == job
            assert (await c.inspect_job(job))["state"] == b"4"  # LEASED
            # TTR passes: back to PENDING, ahead of `later` (its old position).
            await wait_for_state(c, job, b"3")
            again = await c.lease(name, 3000)
            assert again.id == job
            info = await c.inspect_job(job)
            assert info["attempts"] == b"2" and info["state"] == b"4"
            # Second TTR passes with max-attempts=2 used up: FAILED, empty result.
            result = await c.result(job, 3000)
            assert (result.success, result.result) == (False, b"")
            assert (await c.inspect_job(job))["state"] == b"2"
            assert (await c.lease(name, 1000)).id == later
    run(scenario())


def test_failed_by_attempts_result_bytes(server, name):
    job = uuid.uuid4()
    async def scenario():
        async with await client(server) as c:
            await c.add(job, name, 200, 60000, b"x", max_attempts=1)
            await c.lease(name, 1000)
            await c.result(job, 3000)
    run(scenario())
    reply = raw_exchange(server.port, f"result {job} 0\r\n".encode(),
                         until=lambda d: d.count(b"\r\n") >= 3)
    assert reply == f"+OK 1\r\n{job} 0 0\r\n\r\n".encode()


def test_max_fails_retries_then_fails(server, name):
    async def scenario():
        async with await client(server) as c:
            job = uuid.uuid4()
            await c.add(job, name, 5000, 60000, b"x", max_fails=2)
            await c.lease(name, 1000)
            await c.fail(job, b"oops1")
            info = await c.inspect_job(job)
            assert (info["state"], info["fails"]) == (b"3", b"1")  # PENDING, retried
            assert (await c.lease(name, 1000)).id == job
            await c.fail(job, b"oops2")
            info = await c.inspect_job(job)
            assert (info["state"], info["fails"]) == (b"2", b"2")  # FAILED
            result = await c.result(job, 0)
            assert (result.success, result.result) == (False, b"oops2")
            with pytest.raises(ClientError, match="Duplicate result"):
                await c.fail(job, b"again")
    run(scenario())


def test_ttl_expiry_counts_evicted_jobs(server, name):
    async def scenario():
        async with await client(server) as c:
            before = int((await c.inspect_server())["evicted-jobs"])
            done, pending = uuid.uuid4(), uuid.uuid4()
            await c.add(done, name, 5000, 800, b"done")
            await c.add(pending, name, 5000, 800, b"pending")
            leased = await c.lease(name, 1000)
            await c.complete(leased.id, b"r")
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    await c.inspect_job(pending)
                    await c.inspect_job(done)
                except NotFound:
                    pass
                else:
                    await asyncio.sleep(0.1)
                    continue
                break
            await asyncio.sleep(0.5)
            for job in (done, pending):
                with pytest.raises(NotFound):
                    await c.inspect_job(job)
            after = int((await c.inspect_server())["evicted-jobs"])
            assert after - before == 1  # only the job that never finished
            assert (await c.inspect_queue(name)) == {"ready-len": 0, "scheduled-len": 0}
    run(scenario())


def test_scheduled_jobs_wake_up(server, name):
    """A lease waiting a minute gets the scheduled job at its time: not before it (this
    machine's clock is the broker's and the server's), and woken by it, not timed out."""
    async def scenario():
        async with await client(server) as c:
            job, now_job = uuid.uuid4(), uuid.uuid4()
            due = datetime.now(timezone.utc) + timedelta(seconds=1.5)
            await c.schedule(job, name, 5000, 60000, utc_text(due), b"later")
            await c.schedule(now_job, name, 5000, 60000, utc(-30), b"past")  # wakes at once
            assert await c.inspect_queue(name) == {"ready-len": 1, "scheduled-len": 1}
            [(head, values)] = await c.inspect_jobs(name, scheduled=True)
            assert uuid.UUID(head) == job and "time" in values and len(values) == 13
            assert (await c.lease(name, 0)).id == now_job
            began = time.monotonic()
            leased = await c.lease(name, LONG_WAIT_MS)
            waited = time.monotonic() - began
            assert leased.id == job
            assert datetime.now(timezone.utc) >= due - CLOCK_STEP
            assert waited < LONG_WAIT_MS / 1000 / 2  # woken by its time, not the lease's end
            with pytest.raises(ClientError, match="Invalid Time"):
                await c.schedule(uuid.uuid4(), name, 5000, 1000, utc(-60), b"expired")
    run(scenario())


def test_lease_on_several_names_and_unknown_names_create_queues(server, name):
    async def scenario():
        async with await client(server) as c:
            a, b = f"{name}-a", f"{name}-b"
            ja, jb = uuid.uuid4(), uuid.uuid4()
            await c.add(ja, a, 5000, 60000, b"a")
            await c.add(jb, b, 5000, 60000, b"b")
            got = {(await c.lease([a, b, f"{name}-none"], 1000)).id for _ in range(2)}
            assert got == {ja, jb}
            with pytest.raises(Timeout):
                await c.lease([a, b], 100)
            assert await c.inspect_queue(f"{name}-none") == {"ready-len": 0, "scheduled-len": 0}
            with pytest.raises(NotFound):
                await c.inspect_queue(f"{name}-never-named")
            queues = await c.inspect_queues(0, 100)
            assert f"{name}-a" in queues or len(queues) == 100
    run(scenario())


def test_lease_waits_for_a_job_added_later(server, name):
    async def scenario():
        async with await client(server) as worker, await client(server) as producer:
            job = uuid.uuid4()
            waiting = asyncio.create_task(worker.lease(name, 5000))
            await asyncio.sleep(0.3)
            assert not waiting.done()
            await producer.add(job, name, 5000, 60000, b"late")
            leased = await asyncio.wait_for(waiting, 5)
            assert leased.id == job
    run(scenario())


def test_lease_timeout_is_honoured(server, name):
    """Two leases on an empty queue, 400 ms and 1,600 ms: each waits its own timeout,
    the shorter ends first."""
    async def scenario():
        async with await client(server) as short, await client(server) as long:
            ended: list[int] = []

            async def lease(c: Client, wait_ms: int) -> float:
                began = time.monotonic()
                with pytest.raises(Timeout):
                    await c.lease(name, wait_ms)
                ended.append(wait_ms)
                return time.monotonic() - began

            short_s, long_s = await asyncio.gather(lease(short, 400), lease(long, 1600))
            assert ended == [400, 1600]
            assert short_s >= 0.4 - TIMER_SLACK_S and long_s >= 1.6 - TIMER_SLACK_S
    run(scenario())


def test_run_success_fail_and_timeout(server, name):
    async def scenario():
        async with await client(server) as runner, await client(server) as worker:
            job = uuid.uuid4()
            running = asyncio.create_task(runner.run(job, name, 5000, 5000, b"work"))
            leased = await worker.lease(name, 5000)
            assert leased.payload == b"work"
            assert (await worker.inspect_job(job))["ttl"] == b"0"
            await worker.complete(job, b"done")
            result = await running
            assert (result.id, result.success, result.result) == (job, True, b"done")
            with pytest.raises(NotFound):  # deleted when run returned
                await worker.result(job, 0)

            job2 = uuid.uuid4()
            running = asyncio.create_task(runner.run(job2, name, 5000, 5000, b"w2"))
            await worker.lease(name, 5000)
            await worker.fail(job2, b"bad")
            result = await running
            assert (result.success, result.result) == (False, b"bad")

            job3 = uuid.uuid4()
            began = time.monotonic()
            with pytest.raises(Timeout):  # at its 300 ms timeout, far before its TTR
                await runner.run(job3, name, 60_000, 300, b"nobody")
            assert time.monotonic() - began < 30  # not the 60 s TTR: far from it
            with pytest.raises(NotFound):
                await worker.inspect_job(job3)
            await worker.add(job3, name, 5000, 60000, b"id free again")
            await worker.delete(job3)

            # leased when wait-timeout passes: wait until that attempt's TTR for a result
            job4 = uuid.uuid4()
            running = asyncio.create_task(runner.run(job4, name, 2000, 300, b"slow"))
            await worker.lease(name, 5000)
            await asyncio.sleep(0.8)
            await worker.complete(job4, b"in time")
            assert (await running).result == b"in time"
    run(scenario())


def test_concurrent_result_waiters_all_get_the_result(server, name):
    async def scenario():
        job = uuid.uuid4()
        clients = [await client(server) for _ in range(5)]
        try:
            await clients[0].add(job, name, 5000, 60000, b"x")
            waiters = [asyncio.create_task(c.result(job, 5000)) for c in clients[1:]]
            await asyncio.sleep(0.3)
            await clients[0].lease(name, 1000)
            await clients[0].complete(job, b"shared")
            results = await asyncio.gather(*waiters)
            assert [r.result for r in results] == [b"shared"] * 4
        finally:
            for c in clients:
                await c.close()
    run(scenario())


def test_pipelined_requests_are_answered_in_order(server, name):
    jobs = [uuid.uuid4() for _ in range(20)]
    request = b"".join(f"add {j} {name} 5000 60000 1\r\nx\r\n".encode() for j in jobs)
    request += f"add {jobs[0]} {name} 5000 60000 1\r\nx\r\n".encode()  # duplicate
    request += f"inspect queue {name}\r\n".encode()
    reply = raw_exchange(server.port, request, until=lambda d: d.endswith(b"scheduled-len 0\r\n"))
    expected = b"+OK\r\n" * 20 + b"-CLIENT-ERROR Duplicate job\r\n"
    expected += f"+OK 1\r\n{name} 2\r\nready-len 20\r\nscheduled-len 0\r\n".encode()
    assert reply == expected


@pytest.mark.parametrize(
    "request_bytes, reply",
    [
        (b"add 6ba7b810-9dad-41d1-80b4-00c04fd430c4 q 1 1 abc\r\n",
         b"-CLIENT-ERROR Invalid payload size\r\n"),
        (b"add 6ba7b810-9dad-41d1-80b4-00c04fd430c4 q 1 1 3\r\nabcXY",
         b"-CLIENT-ERROR Invalid payload size\r\n"),
        (b"fail 6ba7b810-9dad-41d1-80b4-00c04fd430c4 -1\r\n", b"-CLIENT-ERROR Invalid result size\r\n"),
        (b"add 6ba7b810-9dad-41d1-80b4-00c04fd430c4 q 1\r\n", b"-CLIENT-ERROR Invalid command args\r\n"),
        (b"x" * 10_001 + b"\r\n", b"-CLIENT-ERROR Line too long\r\n"),
        (b"inspect server\n", b""),
    ],
)
def test_bad_framing_closes_the_connection(server, request_bytes, reply):
    followup = b"inspect server\r\n"
    got = raw_exchange(server.port, request_bytes + followup, timeout_s=5,
                       until=lambda d: False)  # read until the server closes
    assert got == reply


def test_errors_that_keep_the_stream_in_step(server):
    request = (
        b"bogus\r\n"
        b"\r\n"
        b"add 6ba7b810-9dad-41d1-80b4-00c04fd430c4 bad/name 1 1 1\r\nz\r\n"
        b"lease q -1\r\n"
        b"delete -a= x\r\n"
        b"inspect nothing\r\n"
        b"inspect server\r\n"
    )
    reply = raw_exchange(server.port, request, until=lambda d: b"started " in d and d.endswith(b"\r\n"))
    assert reply.startswith(
        b"-CLIENT-ERROR Unknown command\r\n"
        b"-CLIENT-ERROR Unknown command\r\n"
        b"-CLIENT-ERROR Invalid Name\r\n"
        b"-CLIENT-ERROR Invalid wait timeout\r\n"
        b"-CLIENT-ERROR Invalid command flags\r\n"
        b"-CLIENT-ERROR Unknown command\r\n"
        b"+OK 1\r\nserver 3\r\nactive-clients "
    )


def test_a_lease_is_never_handed_out_twice_under_contention(server, name):
    async def scenario():
        jobs = [uuid.uuid4() for _ in range(60)]
        async with await client(server) as c:
            for job in jobs:
                await c.add(job, name, 30000, 60000, b"x")
        workers = [await client(server) for _ in range(8)]
        got: list[uuid.UUID] = []

        async def work(w):
            while True:
                try:
                    got.append((await w.lease(name, 300)).id)
                except Timeout:
                    return
        try:
            await asyncio.gather(*(work(w) for w in workers))
        finally:
            for w in workers:
                await w.close()
        assert sorted(got) == sorted(jobs)  # each exactly once
    run(scenario())


def test_inspect_server_counts_clients(server):
    async def scenario():
        clients = [await client(server) for _ in range(3)]
        try:
            for c in clients:  # a round trip each: every connection is accepted
                await c.inspect_server()
            info = await clients[0].inspect_server()
            assert int(info["active-clients"]) >= 3
            assert info["started"].endswith(b"Z")
        finally:
            for c in clients:
                await c.close()
    run(scenario())
