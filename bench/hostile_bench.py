"""Memory and CPU of a live server under inputs that could wedge it (docs/architecture.md,
"Hostile inputs").

Prints, against a throwaway broker and `eventq serve` (or --bootstrap's broker):
- peak server RSS while answering `inspect jobs` over 100 jobs of 1 MiB (100 MiB);
- peak RSS while a client pipelines `inspect job` of a 1 MiB job 2,000 times and
  never reads;
- peak RSS while 200 clients each add a 1 MiB job at once;
- seconds and server CPU for 300 adds with 2,000 leases blocked on the queue;
- RSS while 1,000 leases name 1,100,000 queues nobody used before.

    .venv/bin/python bench/hostile_bench.py [--bootstrap HOST:PORT]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for path in (ROOT,):
    sys.path.insert(0, str(path))

from eventq.client.raw import RawClient as Client  # noqa: E402
from eventq.limits import MAX_PAYLOAD_BYTES  # noqa: E402
from tools.servers import rss_mib  # noqa: E402

BIG = b"b" * MAX_PAYLOAD_BYTES



def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class PeakRss:
    """Samples a process's RSS every 10 ms in a thread."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.before = rss_mib(pid)
        self.peak = self.before
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, rss_mib(self.pid))

    def __enter__(self) -> "PeakRss":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def describe(self) -> str:
        return f"RSS {self.before:.0f} MiB before, peak {self.peak:.0f} MiB (+{self.peak - self.before:.0f})"


async def inspect_100_max_jobs(port: int, pid: int) -> str:
    async with await Client.connect(port=port) as c:
        for _ in range(100):
            await c.add(uuid.uuid4(), "rss", 60000, 600000, BIG)
    await asyncio.sleep(1)
    with PeakRss(pid) as peak:
        began = time.monotonic()
        async with await Client.connect(port=port) as c:
            jobs = await c.inspect_jobs("rss", 0, 100)
        seconds = time.monotonic() - began
    assert len(jobs) == 100 and all(v["payload"] == BIG for _, v in jobs)
    return (f"inspect jobs over 100 jobs of 1 MiB (a {100 * MAX_PAYLOAD_BYTES / 2**20:.0f} MiB reply)"
            f" in {seconds:.2f}s: {peak.describe()}")


async def never_reads(port: int, pid: int) -> str:
    job = uuid.uuid4()
    async with await Client.connect(port=port) as c:
        await c.add(job, "hog", 60000, 600000, BIG)
    with PeakRss(pid) as peak:
        hog = socket.create_connection(("127.0.0.1", port))
        hog.setblocking(False)
        one = f"inspect job {job}\r\n".encode()
        request = one * 2000
        sent = 0
        deadline = time.monotonic() + 3
        while sent < len(request) and time.monotonic() < deadline:
            try:
                sent += hog.send(request[sent:])
            except BlockingIOError:
                await asyncio.sleep(0.01)
        await asyncio.sleep(2)
        hog.close()
    return (f"a client pipelining {sent // len(one):,} `inspect job` of a 1 MiB job "
            f"(asking for {sent // len(one):,} MiB of replies), never reading: {peak.describe()}")


async def concurrent_max_adds(port: int, pid: int, clients: int) -> str:
    async def one() -> None:
        async with await Client.connect(port=port) as c:
            await c.add(uuid.uuid4(), "many", 60000, 60000, BIG)

    with PeakRss(pid) as peak:
        began = time.monotonic()
        await asyncio.gather(*(one() for _ in range(clients)))
        seconds = time.monotonic() - began
    return f"{clients} clients adding a 1 MiB job at once, {seconds:.1f}s: {peak.describe()}"


async def leases_naming_new_queues(port: int, pid: int, leases: int) -> str:
    """Each lease line names about 2,500 queues nobody used before."""
    with PeakRss(pid) as peak:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for n in range(leases):
            names = " ".join(f"{n:x}-{i:x}" for i in range(1100))
            writer.write(f"lease {names} 0\r\n".encode())
            await reader.readline()  # -TIMEOUT
        writer.close()
    async with await Client.connect(port=port) as c:
        listed = len(await c.inspect_queues(0, 100))
    return (f"{leases:,} leases naming {leases * 1100:,} new queues: {peak.describe()}; "
            f"inspect queues still answers ({listed} on its first page)")


async def blocked_leases(port: int, pid: int, waiters: int, adds: int) -> str:
    got = 0

    async def waiter() -> None:
        nonlocal got
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"lease herd 120000\r\n")
        if (await reader.readline()).startswith(b"+OK"):
            got += 1
        writer.close()

    tasks = [asyncio.create_task(waiter()) for _ in range(waiters)]
    await asyncio.sleep(3)
    cpu_before, began = cpu_s(pid), time.monotonic()
    async with await Client.connect(port=port) as c:
        for _ in range(adds):
            await c.add(uuid.uuid4(), "herd", 60000, 600000, b"x")
    while got < adds and time.monotonic() - began < 120:
        await asyncio.sleep(0.05)
    seconds, cpu = time.monotonic() - began, cpu_s(pid) - cpu_before
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return (f"{adds} adds with {waiters:,} leases blocked on the queue: {seconds:.2f}s,"
            f" server CPU {cpu:.2f}s, leased {got}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", help="an existing broker (default: start one)")
    args = parser.parse_args()
    from eventq.run.localkafka import broker
    from tools.servers import ServerProcess, test_broker_config

    home = Path(tempfile.mkdtemp(prefix="eventq-hostile-"))
    config = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        config = test_broker_config(home / "kafka")
        broker.start(config)
        bootstrap = config.bootstrap
    server = ServerProcess(bootstrap, f"hostile{uuid.uuid4().hex[:6]}", home / "server", partitions=8)
    try:
        server.create_topics()
        server.start()
        pid = server.process.pid
        for step in (
            inspect_100_max_jobs(server.port, pid),
            never_reads(server.port, pid),
            concurrent_max_adds(server.port, pid, 200),
            blocked_leases(server.port, pid, 2000, 300),
            leases_naming_new_queues(server.port, pid, 1000),
        ):
            print(asyncio.run(step), flush=True)
        return 0
    finally:
        server.stop()
        if config is not None:
            broker.stop(config)


if __name__ == "__main__":
    sys.exit(main())
