"""Benchmark of pipelines and workers at once: a bulk load of --jobs adds
while 8 and 64 interactive clients run add -> lease -> complete on another queue
(docs/architecture.md, "Lanes").

Starts a throwaway Kafka broker and `eventq serve` (8 partitions), then prints:
- the bulk load alone: jobs/s from the first record written until every job is ready;
- per client count: the interactive cycles/s and p50/p99 per command without the load
  and during it, the bulk load's jobs/s meanwhile, and every reply that was not +OK.

The load is what a pipeline with a plain Kafka producer writes (docs/spark.md, "Bulk
loads beside workers"): batch records of 500 adds per partition, to the bulk topic (or,
for code without a bulk lane, to the command log). With ``--before REF`` the same runs
first use the code of git revision REF (a temporary worktree; same broker, same run):

    .venv/bin/python bench/mixed_bench.py [--jobs 1000000] [--before d2812bf]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from confluent_kafka import Producer  # noqa: E402
from gateway_bench import start_profile, summarize_profile  # noqa: E402

from eventq.client.raw import RawClient as Client  # noqa: E402
from eventq.core import Add, encode_command  # noqa: E402
from eventq.core.batch import encode_batch  # noqa: E402
from eventq.core.partitioner import job_key, partition_for_key  # noqa: E402
from eventq.errors import EventqError, NotFound  # noqa: E402
from eventq.run.localkafka import broker  # noqa: E402
from tools.servers import ServerProcess, cpu_s, test_broker_config  # noqa: E402

PARTITIONS = 8
RECORD_COMMANDS = 500


class Cores:
    """Cores used by the server, the broker and this benchmark (its clients and the
    load's producer) since it was made: on 2 cores, whether the machine was the limit."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.began = time.monotonic()
        self.cpu = {name: cpu_s(pid) for name, pid in pids.items()}

    def __str__(self) -> str:
        wall = time.monotonic() - self.began
        used = {name: (cpu_s(pid) - self.cpu[name]) / wall for name, pid in self.pids.items()}
        return "cores " + ", ".join(f"{name} {value:.2f}" for name, value in used.items())


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def encoded_load(name: str, jobs: int, per_record: int) -> list[tuple[int, bytes]]:
    """(partition, batch record of ``per_record`` commands) of ``jobs`` new adds."""
    by_partition: dict[int, list[bytes]] = {}
    for _ in range(jobs):
        job_id = uuid.uuid4()
        key = job_key(job_id)
        by_partition.setdefault(partition_for_key(key, PARTITIONS), []).append(
            encode_command(Add(job_id, name, 60_000, 3_600_000, b"bulk-payload")))
    return [(p, encode_batch(commands[i:i + per_record]))
            for p, commands in by_partition.items()
            for i in range(0, len(commands), per_record)]


def write_load(bootstrap: str, topic: str, records) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5,
                         "partitioner": "murmur2_random"})
    for partition, value in records:
        while True:
            try:
                producer.produce(topic, value, partition=partition)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    producer.flush(120)


async def ready_len(port: int, name: str) -> int:
    async with await Client.connect(port=port) as c:
        try:
            return (await c.inspect_queue(name))["ready-len"]
        except NotFound:
            return 0


class Interactive:
    """``clients`` connections running add -> lease -> complete until stopped."""

    def __init__(self, port: int, clients: int, queue: str) -> None:
        self.port, self.clients, self.queue = port, clients, queue
        self.cycles = 0
        self.command_ms: list[float] = []
        self.errors: Counter = Counter()
        self.running = True

    async def run(self) -> None:
        connections = [await Client.connect(port=self.port) for _ in range(self.clients)]
        try:
            await asyncio.gather(*(self._one(c) for c in connections))
        finally:
            for c in connections:
                await c.close()

    async def _timed(self, request):
        """Await one command; its latency counts whether it succeeded or not."""
        began = time.perf_counter()
        try:
            return await request
        finally:
            self.command_ms.append((time.perf_counter() - began) * 1e3)

    async def _one(self, c: Client) -> None:
        while self.running:
            try:
                await self._timed(c.add(uuid.uuid4(), self.queue, 60_000, 600_000, b"payload"))
                leased = await self._timed(c.lease(self.queue, 5000))
                await self._timed(c.complete(leased.id, b"ok"))
                self.cycles += 1
            except EventqError as error:
                self.errors[f"-{error.code} {error.text[:70]}"] += 1


async def interactive_for(port: int, clients: int, seconds: float, pids):
    """(Interactive, cores used) of ``clients`` running for ``seconds``."""
    work = Interactive(port, clients, f"inter-{uuid.uuid4().hex[:6]}")
    task = asyncio.ensure_future(work.run())
    cores = Cores(pids)
    await asyncio.sleep(seconds)
    used = str(cores)
    work.running = False
    await task
    return work, used


async def load_with(port: int, bootstrap: str, topic: str, jobs: int, clients: int,
                    per_record: int, pids, profile: tuple[int, Path] | None = None):
    """Write a load of ``jobs`` while ``clients`` run; (jobs/s, Interactive or None,
    interactive seconds, cores used). ``profile``: (server pid, file) to py-spy the
    load's first 20 s into."""
    name = f"bulk-{uuid.uuid4().hex[:6]}"
    records = encoded_load(name, jobs, per_record)
    work = None
    task = None
    if clients:
        work = Interactive(port, clients, f"inter-{uuid.uuid4().hex[:6]}")
        task = asyncio.ensure_future(work.run())
        await asyncio.sleep(1.0)
        work.cycles, work.command_ms, work.errors = 0, [], Counter()
    began = time.monotonic()
    cores = Cores(pids)
    writer = threading.Thread(target=write_load, args=(bootstrap, topic, records))
    writer.start()
    spy = start_profile(profile[0], 20, profile[1]) if profile else None
    while await ready_len(port, name) < jobs:
        await asyncio.sleep(0.2)
    seconds = time.monotonic() - began
    used = str(cores)
    writer.join()
    if work is not None:
        work.running = False
        await task
    if spy is not None:
        spy.wait()
    return jobs / seconds, work, seconds, used


def line(label: str, work: Interactive, seconds: float) -> str:
    errors = sum(work.errors.values())
    return (f"  {label:<22} {work.cycles / seconds:8,.0f} cycles/s   p50 "
            f"{percentile(work.command_ms, 0.5):7.1f} ms   p99 "
            f"{percentile(work.command_ms, 0.99):8.1f} ms   not +OK: {errors:,}")


async def measure(server: ServerProcess, topic: str, args) -> None:
    port, bootstrap = server.port, server.bootstrap
    jobs, per_record = args.jobs, args.record_commands
    pids = {"server": server.process.pid, "broker": args.broker_pid, "bench": os.getpid()}
    rate, _, took, used = await load_with(port, bootstrap, topic, jobs, 0, per_record, pids)
    print(f"  bulk load alone: {jobs:,} jobs in {took:.1f}s = {rate:,.0f} jobs/s ({used})",
          flush=True)
    for clients in args.clients:
        quiet, used = await interactive_for(port, clients, args.seconds, pids)
        print(f" {clients} clients:")
        print(f"{line('without the load', quiet, args.seconds)}   ({used})", flush=True)
        profile = None
        if args.profile is not None:
            path = args.profile / f"{'before' if server.source else 'after'}-{clients}.txt"
            profile = (server.process.pid, path)
        rate_during, busy, took, used = await load_with(port, bootstrap, topic, jobs,
                                                        clients, per_record, pids, profile)
        print(f"{line('during the load', busy, took)}   ({used})")
        print(f"  {'bulk load meanwhile':<22} {rate_during:8,.0f} jobs/s "
              f"({rate_during / rate:.0%} of alone)", flush=True)
        for text, count in (quiet.errors + busy.errors).most_common():
            print(f"    {count:6,} x {text}")


def run_server(bootstrap: str, home: Path, source: Path | None, args) -> None:
    prefix = f"mixed-{uuid.uuid4().hex[:6]}"
    server = ServerProcess(bootstrap, prefix, home, partitions=PARTITIONS, source=source)
    server.create_topics()
    server.start()
    tree = source or ROOT
    has_lane = (tree / "streams" / "admission.py").exists()
    topic = f"{prefix}.bulk" if has_lane else f"{prefix}.commands"
    print(f"{'before' if source else 'after'} ({'bulk lane' if has_lane else 'no bulk lane'}:"
          f" the load goes to {topic})", flush=True)
    try:
        asyncio.run(measure(server, topic, args))
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--seconds", type=float, default=10.0,
                        help="length of each run without the load")
    parser.add_argument("--before", default=None, metavar="REF")
    parser.add_argument("--clients", default=[8, 64], metavar="N,N",
                        type=lambda text: [int(n) for n in text.split(",")],
                        help="interactive client counts (default 8,64)")
    parser.add_argument("--profile", metavar="DIR", type=Path,
                        help="py-spy the server for 20 s of each load with clients")
    parser.add_argument("--record-commands", type=int, default=RECORD_COMMANDS,
                        help=f"commands per bulk record (default {RECORD_COMMANDS}, as Spark)")
    args = parser.parse_args()
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="eventq-mixed-") as tmp:
        home = Path(tmp)
        config = test_broker_config(home / "kafka")
        args.broker_pid = broker.start(config).pid
        bootstrap = f"{config.host}:{config.port}"
        try:
            if args.before:
                worktree = home / "before"
                subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach",
                                str(worktree), args.before], check=True, capture_output=True)
                try:
                    run_server(bootstrap, home / "server-before", worktree, args)
                finally:
                    subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force",
                                    str(worktree)], capture_output=True)
            run_server(bootstrap, home / "server-after", None, args)
        finally:
            broker.stop(config)
    if args.profile:
        for path in sorted(args.profile.glob("*.txt")):
            print(summarize_profile(path))


if __name__ == "__main__":
    main()
