"""Benchmark of scaling out (docs/architecture.md, "Scaling out"): add -> lease ->
complete cycles through 1, 2 and 3 eventq processes of one app on a local 3-broker
Kafka, and the fail-over time.

For each process count it prints cycles/s, p50/p99 per command, and the server CPU per
cycle summed over the processes (with more than one, requests for jobs another process
owns are forwarded, and every lease asks the others where the best job is: the CPU per
cycle says what that costs, and so what N machines would give). Then, with 3 processes:
how soon a lease blocked on one process gets a job added through another, and the time
from a `kill -9` of a process until every partition serves again.

    .venv/bin/python bench/cluster_bench.py [--seconds 10] [--clients 32] [--failovers 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eventq.client.raw import RawClient as Client  # noqa: E402
from eventq.errors import EventqError  # noqa: E402
from eventq.run.localkafka import broker  # noqa: E402
from eventq.settings import Settings  # noqa: E402
from tools.servers import EventqCluster, cpu_s, test_cluster_configs  # noqa: E402


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def cycles(ports: list[int], clients: int, seconds: float, queue: str):
    """Clients spread evenly over ``ports``; (cycles/s, per-command ms list)."""
    command_ms: list[float] = []
    errors: dict[str, int] = {}
    done = 0
    connections = [await Client.connect(port=ports[i % len(ports)]) for i in range(clients)]
    stop_at = time.monotonic() + seconds

    async def one_client(c: Client) -> None:
        nonlocal done
        while time.monotonic() < stop_at:
            job = uuid.uuid4()
            t0 = time.perf_counter()
            try:
                await c.add(job, queue, 60000, 600000, b"payload")
                t1 = time.perf_counter()
                leased = await c.lease(queue, 5000)
                t2 = time.perf_counter()
                await c.complete(leased.id, b"done")
            except EventqError as error:  # e.g. a rebalance: counted, not fatal
                errors[str(error)[:60]] = errors.get(str(error)[:60], 0) + 1
                continue
            t3 = time.perf_counter()
            command_ms.extend(((t1 - t0) * 1000, (t2 - t1) * 1000, (t3 - t2) * 1000))
            done += 1

    began = time.monotonic()
    await asyncio.gather(*(one_client(c) for c in connections))
    elapsed = time.monotonic() - began
    for c in connections:
        await c.close()
    if errors:
        print(f"  errors answered (retried): {errors}")
    return done / elapsed, command_ms, done


async def blocked_lease_ms(ports: list[int], samples: int) -> list[float]:
    """A lease blocked on the first process; a job added through the last."""
    waiter = await Client.connect(port=ports[0])
    adder = await Client.connect(port=ports[-1])
    queue = "wake-" + uuid.uuid4().hex[:8]
    latencies = []
    for _ in range(samples):
        waiting = asyncio.ensure_future(waiter.lease(queue, 10_000))
        await asyncio.sleep(0.2)
        job = uuid.uuid4()
        await adder.add(job, queue, 60000, 600000, b"x")
        added = time.perf_counter()
        leased = await waiting
        latencies.append((time.perf_counter() - added) * 1000)
        await waiter.complete(leased.id, b"done")
    await waiter.close()
    await adder.close()
    return latencies


async def direct_and_forwarded_ms(cluster: EventqCluster, samples: int):
    """One client, one add at a time: p50 ms of adds sent to the job's owner and of adds
    sent to another process (forwarded: one extra hop)."""
    from eventq.core.partitioner import job_key, partition_for_key

    first = cluster[0]
    owned = {int(p) for p in (await owned_partitions(first.port))}
    client = await Client.connect(port=first.port)
    direct, forwarded = [], []
    while len(direct) < samples or len(forwarded) < samples:
        job = uuid.uuid4()
        mine = partition_for_key(job_key(job), first.partitions) in owned
        began = time.perf_counter()
        await client.add(job, "hop", 60000, 600000, b"x")
        (direct if mine else forwarded).append((time.perf_counter() - began) * 1000)
    await client.close()
    return percentile(direct, 0.5), percentile(forwarded, 0.5)


async def owned_partitions(port: int) -> list[str]:
    """The partitions a process serves (its own `inspect bulk` rows, asked as a peer)."""
    from eventq.gateway.peers import PeerConnection
    from eventq.protocol.reply_reader import Shape, parse_blocks

    connection = await PeerConnection.open(f"127.0.0.1:{port}")
    reply = await connection.exchange(b"inspect bulk\r\n", Shape.BLOCKS)
    connection.close()
    return [block.head.decode() for block in parse_blocks(reply)]


async def until_every_partition_serves(port: int, timeout_s: float = 60.0) -> float:
    began = time.monotonic()
    while time.monotonic() - began < timeout_s:
        try:
            async with await Client.connect(port=port) as client:
                await client.digest()
                return time.monotonic() - began
        except Exception:
            await asyncio.sleep(0.05)
    return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2, 3])
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--failovers", type=int, default=3)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="eventq-cluster-bench-") as home:
        home = Path(home)
        configs = test_cluster_configs(home / "kafka")
        print(f"starting 3 Kafka brokers in {home} ...", flush=True)
        broker.start_cluster(configs)
        bootstrap = broker.cluster_bootstrap(configs)
        try:
            run(args, bootstrap, home, [broker.running_pid(c) for c in configs])
        finally:
            for config in configs:
                broker.stop(config)


def run(args, bootstrap: str, home: Path, broker_pids: list[int]) -> None:
    print(f"{os.cpu_count()} cores; {args.clients} clients doing add -> lease -> complete, "
          f"{args.seconds:g}s per process count, {args.partitions} partitions, topics at "
          "replication factor 3 (min.insync.replicas=2)")
    print(f"{'processes':>9} {'cycles/s':>9} {'cmd p50':>8} {'cmd p99':>8} {'eventq CPU':>10} "
          f"{'Kafka CPU':>10}  (CPU per cycle, all processes / all brokers)")
    last = None
    for count in args.processes:
        cluster = EventqCluster(bootstrap, f"b{count}-{uuid.uuid4().hex[:6]}",
                                home / f"eventq-{count}", processes=count,
                                partitions=args.partitions).start()
        ports = [p.port for p in cluster.processes]
        try:
            asyncio.run(cycles(ports, 8, 3, "warm-up"))
            pids = [p.process.pid for p in cluster.processes]
            cpu_before = sum(cpu_s(pid) for pid in pids)
            kafka_before = sum(cpu_s(pid) for pid in broker_pids)
            rate, command_ms, done = asyncio.run(cycles(ports, args.clients, args.seconds, "c"))
            cpu_ms = (sum(cpu_s(pid) for pid in pids) - cpu_before) * 1000 / max(done, 1)
            kafka_ms = (sum(cpu_s(pid) for pid in broker_pids) - kafka_before) * 1000 / max(done, 1)
            print(f"{count:>9} {rate:>9,.0f} {percentile(command_ms, 0.5):>7.1f}ms "
                  f"{percentile(command_ms, 0.99):>7.1f}ms {cpu_ms:>8.2f}ms {kafka_ms:>8.2f}ms",
                  flush=True)
            last = (cluster, ports)
            if count != args.processes[-1]:
                cluster.stop()
        except BaseException:
            cluster.stop()
            raise
    cluster, ports = last
    try:
        if len(ports) > 1:
            direct, forwarded = asyncio.run(direct_and_forwarded_ms(cluster, 100))
            print(f"one add at a time: p50 {direct:.2f} ms sent to the job's owner, "
                  f"{forwarded:.2f} ms sent to another process and forwarded")
            latencies = asyncio.run(blocked_lease_ms(ports, 30))
            print(f"a lease blocked on process 1 gets a job added through process "
                  f"{len(ports)} after p50 {percentile(latencies, 0.5):.1f} ms, p99 "
                  f"{percentile(latencies, 0.99):.1f} ms, max {max(latencies):.1f} ms "
                  f"({len(latencies)} samples)")
            failover(cluster, args.failovers)
    finally:
        cluster.stop()


def failover(cluster: EventqCluster, rounds: int) -> None:
    """kill -9 the last process, time until every partition serves through the first;
    restart it (and wait until it serves) before the next round."""
    times = []
    for _ in range(rounds):
        victim = cluster.processes[-1]
        victim.kill()
        times.append(asyncio.run(until_every_partition_serves(cluster[0].port)))
        victim.start()
        asyncio.run(until_every_partition_serves(cluster[0].port))
        time.sleep(3)  # the rejoin's rebalance settles
    print("kill -9 of one process: every partition served again after "
          + ", ".join(f"{t:.1f}s" for t in times)
          + f" (session timeout {Settings().session_timeout_ms / 1000:g}s; standby "
          f"replicas {Settings().standby_replicas})")


if __name__ == "__main__":
    main()
