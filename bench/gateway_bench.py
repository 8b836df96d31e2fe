"""Benchmark of the request path: add -> lease -> complete cycles through a real server.

Starts a throwaway Kafka broker and `eventq serve` (or uses --port/--bootstrap of
running ones), then prints:
- cycles/s with 1, 16 and 64 concurrent clients (each client: add, lease, complete);
- p50/p99 latency of add and of lease at each concurrency;
- the server's resident memory with 100,000 queued jobs.

    .venv/bin/python bench/gateway_bench.py [--seconds 10] [--queued 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from eventq.client import Client  # noqa: E402
from eventq.kafka import broker  # noqa: E402
from support import rss_mib  # noqa: E402


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]



async def cycles(port: int, clients: int, seconds: float, queue: str):
    add_ms: list[float] = []
    lease_ms: list[float] = []
    done = 0
    stop_at = time.monotonic() + seconds

    async def one_client() -> None:
        nonlocal done
        async with await Client.connect(port=port) as c:
            while time.monotonic() < stop_at:
                job = uuid.uuid4()
                t0 = time.perf_counter()
                await c.add(job, queue, 60000, 600000, b"payload")
                t1 = time.perf_counter()
                leased = await c.lease(queue, 5000)
                t2 = time.perf_counter()
                await c.complete(leased.id, b"ok")
                add_ms.append((t1 - t0) * 1000)
                lease_ms.append((t2 - t1) * 1000)
                done += 1

    began = time.monotonic()
    await asyncio.gather(*(one_client() for _ in range(clients)))
    elapsed = time.monotonic() - began
    return done / elapsed, add_ms, lease_ms


async def fill(port: int, count: int, queue: str, connections: int = 16) -> float:
    """Queue `count` jobs with pipelined adds; returns jobs/s."""
    per = count // connections
    began = time.monotonic()

    async def writer(n: int) -> None:
        async with await Client.connect(port=port) as c:
            window = 200
            for start in range(0, n, window):
                batch = min(window, n - start)
                for _ in range(batch):
                    c.send(["add", str(uuid.uuid4()), queue, "60000", "3600000", "16"],
                           b"x" * 16)
                for _ in range(batch):
                    await c._status()

    await asyncio.gather(*(writer(per) for _ in range(connections)))
    return per * connections / (time.monotonic() - began)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--queued", type=int, default=100_000)
    parser.add_argument("--concurrency", default="1,16,64")
    parser.add_argument("--partitions", type=int, default=8)
    args = parser.parse_args()

    from support import ServerProcess, test_broker_config

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        config = test_broker_config(home / "kafka")
        config = broker.BrokerConfig(**{**config.__dict__, "heap_mb": 1024})
        broker.start(config)
        server = ServerProcess(config.bootstrap, "bench", home / "server",
                               partitions=args.partitions)
        try:
            server.create_topics()
            server.start()
            print(f"server pid {server.process.pid}, {args.partitions} partitions, "
                  f"RSS at start {rss_mib(server.process.pid):.0f} MiB", flush=True)
            print(f"{'clients':>7} {'cycles/s':>9} {'add p50':>8} {'add p99':>8} "
                  f"{'lease p50':>9} {'lease p99':>9}  (ms)")
            for clients in (int(c) for c in args.concurrency.split(",")):
                rate, add_ms, lease_ms = asyncio.run(
                    cycles(server.port, clients, args.seconds, f"cycle{clients}")
                )
                print(f"{clients:>7} {rate:>9.0f} {percentile(add_ms, .5):>8.1f} "
                      f"{percentile(add_ms, .99):>8.1f} {percentile(lease_ms, .5):>9.1f} "
                      f"{percentile(lease_ms, .99):>9.1f}", flush=True)
            rate = asyncio.run(fill(server.port, args.queued, "resident"))
            time.sleep(2)
            print(f"queued {args.queued} jobs at {rate:.0f} adds/s (pipelined, 16 conns); "
                  f"server RSS {rss_mib(server.process.pid):.0f} MiB", flush=True)
            # the server is read back: the queue really holds them
            async def length() -> dict:
                async with await Client.connect(port=server.port) as c:
                    return await c.inspect_queue("resident")
            print("inspect queue resident:", asyncio.run(length()))
        finally:
            server.stop()
            broker.stop(config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
