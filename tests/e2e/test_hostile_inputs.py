"""Inputs that could kill or wedge the server (docs/architecture.md, "Hostile inputs"),
each against a live one.

- thousands of blocked leases: one add wakes one of them, not all (it was O(waiters));
- `inspect jobs` of 100 jobs of 1 MiB: a 100 MiB reply, streamed from a snapshot;
- a client that pipelines large replies and never reads them stalls only itself;
- `result` and `run` with the longest wait, whose clients leave: the server serves on
  and still stops cleanly.
The memory figures are printed by bench/hostile_bench.py, not asserted here.
"""

from __future__ import annotations

import asyncio
import socket
import time
import uuid

import pytest

from eventq.client.raw import RawClient as Client
from eventq.limits import MAX_PAYLOAD_BYTES, MAX_WAIT_TIMEOUT_MS

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

BIG = b"\x00\r\n" * (MAX_PAYLOAD_BYTES // 3) + b"e" * (MAX_PAYLOAD_BYTES % 3)


def name() -> str:
    return "h-" + uuid.uuid4().hex[:10]


def test_two_thousand_blocked_leases_each_add_wakes_one_and_all_are_served(server):
    queue = name()

    async def scenario():
        got: list[bytes] = []

        async def blocked_lease() -> None:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(f"lease {queue} 60000\r\n".encode())
            if (await reader.readline()).startswith(b"+OK 1"):
                await reader.readline()
                got.append(await reader.readline())
            writer.close()

        leases = [asyncio.create_task(blocked_lease()) for _ in range(2000)]
        await asyncio.sleep(2)
        async with await Client.connect(port=server.port) as c:
            began = time.monotonic()
            for i in range(100):
                await c.add(uuid.uuid4(), queue, 60000, 600000, b"%d" % i)
            adds_s = time.monotonic() - began
            # Another client is answered while 1,900 leases still wait.
            assert "ready-len" in await c.inspect_queue(queue)
        deadline = time.monotonic() + 30
        while len(got) < 100 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert sorted(got) == sorted(b"%d\r\n" % i for i in range(100))
        for task in leases:
            task.cancel()
        await asyncio.gather(*leases, return_exceptions=True)
        return adds_s

    adds_s = asyncio.run(scenario())
    print(f"100 adds with 2,000 blocked leases: {adds_s:.2f}s")


def test_inspect_jobs_of_100_max_size_jobs_is_exact_and_streamed(server):
    queue = name()

    async def scenario():
        async with await Client.connect(port=server.port) as c:
            ids = []
            for i in range(100):
                job = uuid.uuid4()
                await c.add(job, queue, 60000, 600000, BIG, priority=-i)  # lease order = i
                ids.append(job)
            pages = await c.inspect_jobs(queue, 0, 100)
            assert [head.split()[0] for head, _ in pages] == [str(job) for job in ids]
            assert all(values["payload"] == BIG for _, values in pages)
            # A job deleted while the reply is being written is still shown whole:
            # the reply is read from a snapshot taken when it began.
            c.send(["inspect", "jobs", queue, "0", "100"])
            async with await Client.connect(port=server.port) as other:
                await other.delete(ids[-1])
            assert (await c._status()) == 100
            blocks = [await c._key_values() for _ in range(100)]
            assert blocks[-1][1]["payload"] == BIG
            assert len(await c.inspect_jobs(queue, 0, 100)) == 99

    asyncio.run(scenario())


def test_a_client_that_never_reads_its_replies_stalls_only_itself(server):
    queue = name()

    async def scenario():
        async with await Client.connect(port=server.port) as c:
            job = uuid.uuid4()
            await c.add(job, queue, 60000, 600000, BIG)
        hog = socket.create_connection(("127.0.0.1", server.port))
        hog.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        hog.setblocking(False)
        request = f"inspect job {job}\r\n".encode()
        sent = 0
        try:
            for _ in range(2000):  # 2,000 MiB of replies asked for, none read
                sent += hog.send(request)
        except BlockingIOError:
            pass
        async with await Client.connect(port=server.port) as c:
            began = time.monotonic()
            for _ in range(20):
                assert (await c.inspect_job(job))["payload"] == BIG
            assert time.monotonic() - began < 30
        hog.close()
        return sent // len(request)

    asked = asyncio.run(scenario())
    assert asked > 100


def test_longest_waits_from_clients_that_leave(server):
    queue = name()

    async def scenario():
        job = uuid.uuid4()
        async with await Client.connect(port=server.port) as c:
            await c.add(job, queue, 60000, 600000, b"x")
        for request in [f"result {job} {MAX_WAIT_TIMEOUT_MS}\r\n".encode()] * 50 + [
            f"run {uuid.uuid4()} {queue}-run 1000 {MAX_WAIT_TIMEOUT_MS} 1\r\nr\r\n".encode()
            for _ in range(50)
        ]:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writer.write(request)  # a blocking request per connection, then gone
            await writer.drain()
            writer.close()
        await asyncio.sleep(1)
        async with await Client.connect(port=server.port) as c:
            await c.complete(job, b"done")
            assert (await c.result(job, 0)).result == b"done"
            assert (await c.inspect_queue(f"{queue}-run"))["ready-len"] == 50

    asyncio.run(scenario())


def test_a_stop_while_hundreds_of_runs_are_submitted_ends_cleanly(kafka_bootstrap, tmp_path):
    """SIGTERM raced 300 `run` submissions: 3.11's wait_for dropped the cancellation
    of some, which then waited a day, and the watchdog ended the stop uncleanly (4 of 4
    tries before the fix, 0.8 s and exit 0 after)."""
    import signal

    from tools.servers import ServerProcess

    server = ServerProcess(kafka_bootstrap, f"stoprace{uuid.uuid4().hex[:6]}", tmp_path, partitions=2)
    server.create_topics()
    server.start()

    async def runs_then_sigterm() -> None:
        writers = []
        for _ in range(300):
            _, writer = await asyncio.open_connection("127.0.0.1", server.port)
            writers.append(writer)
        for writer in writers:
            writer.write(f"run {uuid.uuid4()} {name()} 1000 {MAX_WAIT_TIMEOUT_MS} 1\r\nr\r\n".encode())
        await asyncio.sleep(0.05)
        server.process.send_signal(signal.SIGTERM)
        await asyncio.sleep(0.5)

    try:
        asyncio.run(runs_then_sigterm())
        assert server.process.wait(15) == 0, server.log_tail()
    finally:
        server.kill()
