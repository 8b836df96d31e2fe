"""Benchmark of recovery from the log (docs/architecture.md, "Memory and restores"), on a
throwaway broker.

For each size (default 100,000 and 1,000,000 live jobs over 1,000 queue names):

1. Writes the jobs as state records into `eventq.jobs`, as the processor leaves them.
2. `eventq replay`: rebuilds a data dir's RocksDB from `eventq.jobs`: jobs/s.
3. `eventq digest`: reads `eventq.jobs` and digests every job: jobs/s.
4. `eventq serve` with NO local state (a new machine): seconds from process start to
   the first lease, then its RSS; minus the RSS of a server on an empty log, per job.
5. The same server stopped cleanly (SIGTERM) and started again: seconds to first lease.
6. The same server killed (`kill -9`) and started again: seconds to first lease.

    .venv/bin/python bench/recovery_bench.py [--jobs 100000 1000000] [--before REF]

``--before REF`` runs every step with the code of git ref REF too (a worktree), in
the same run, so the two sets of figures share a machine and its noise.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eventq.client.raw import RawClient as Client  # noqa: E402
from eventq.core import Delete, Job, State, encode_command  # noqa: E402
from eventq.core.partitioner import job_key  # noqa: E402
from eventq.errors import EventqError  # noqa: E402
from eventq.run.localkafka import broker  # noqa: E402
from tools.servers import (  # noqa: E402
    ServerProcess,
    produce_state_records,
    rss_mib,
    test_broker_config,
)

NOW_MS = int(time.time() * 1000)
QUEUES = 1000
SETTLE_S = 3.0  # after the first lease, before reading RSS (the rebuild's garbage goes)


def synthetic_job(i: int) -> Job:
    return Job(
        id=uuid.uuid4(), name=f"queue-{i % QUEUES:04d}", ttr_ms=60000, ttl_ms=86_400_000,
        payload=b"payload-%056d" % i, priority=i % 3, max_attempts=0, max_fails=0,
        attempts=0, fails=0, state=State.NEW, created_ms=NOW_MS + i // 1000,
        scheduled_ms=None, expires_ms=NOW_MS + i // 1000 + 86_400_000,
        lease_deadline_ms=None, result=None, result_ok=None, version=0,
    )


def write_jobs(bootstrap: str, server: ServerProcess, count: int) -> float:
    from confluent_kafka import Producer

    def jobs():
        for i in range(count):
            if i % 20000 == 0:
                print(f"\r  writing state records: {i:,}/{count:,}", end="", file=sys.stderr)
            yield synthetic_job(i)

    began = time.monotonic()
    produce_state_records(bootstrap, server.settings["jobs-topic"], jobs(), server.partitions)
    # One rejected command per partition: later commands get offsets above version 0.
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition in range(server.partitions):
        command = Delete(uuid.uuid4())
        producer.produce(server.settings["commands-topic"], key=job_key(command.job_id),
                         value=encode_command(command), partition=partition)
    assert producer.flush(120) == 0
    print(file=sys.stderr)
    return time.monotonic() - began


async def _first_lease(port: int, timeout_s: float) -> None:
    began = time.monotonic()
    names = [f"queue-{i:04d}" for i in range(10)]
    while time.monotonic() - began < timeout_s:
        try:
            async with await Client.connect(port=port) as client:
                await client.lease(names, 1000)
                return
        except (OSError, EventqError, asyncio.IncompleteReadError):
            await asyncio.sleep(0.05)
    raise TimeoutError(f"no lease within {timeout_s}s")


def start_until_first_lease(server: ServerProcess, timeout_s: float = 1800) -> float:
    """Start the server; seconds from the process's start to its first granted lease."""
    began = time.monotonic()
    server.launch()
    asyncio.run(_first_lease(server.port, timeout_s))
    return time.monotonic() - began


def settled_rss_mib(server: ServerProcess) -> float:
    time.sleep(SETTLE_S)
    return rss_mib(server.process.pid)


def run_cli(source: Path | None, *args: str) -> tuple[float, str]:
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = str(source)
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "eventq.cli", *args], env=env, cwd=source,
                          capture_output=True, text=True)
    elapsed = time.monotonic() - began
    if done.returncode != 0:
        raise RuntimeError(f"eventq {args[0]} failed:\n{done.stdout}\n{done.stderr}")
    return elapsed, done.stdout


def idle_rss_mib(bootstrap: str, home: Path, label: str, source: Path | None) -> float:
    """A server on an empty log: the RSS that is not the jobs'."""
    server = ServerProcess(bootstrap, f"idle-{label}", home / f"idle-{label}",
                           partitions=8, source=source)
    server.create_topics()
    server.start()
    try:
        return settled_rss_mib(server)
    finally:
        server.stop()


def measure(bootstrap: str, home: Path, jobs: int, label: str, source: Path | None,
            idle_mib: float) -> dict[str, float]:
    figures: dict[str, float] = {}
    prefix = f"rec{jobs}-{label}"
    server = ServerProcess(bootstrap, prefix, home / prefix / "served", partitions=8,
                           source=source)
    server.create_topics()
    seconds = write_jobs(bootstrap, server, jobs)
    print(f"  [{label}] wrote {jobs:,} state records in {seconds:.1f}s", flush=True)

    flags = ["--bootstrap", bootstrap, "--jobs-topic", server.settings["jobs-topic"],
             "--commands-topic", server.settings["commands-topic"],
             "--partitions", "8"]
    seconds, _ = run_cli(source, "replay", *flags,
                         "--data-dir", str(home / prefix / "replayed"))
    figures["replay jobs/s"] = jobs / seconds
    print(f"  [{label}] eventq replay: {seconds:.1f}s, {jobs / seconds:,.0f} jobs/s "
          "(whole command, process start included)", flush=True)
    seconds, out = run_cli(source, "digest", *flags, "--data-dir", str(home / prefix / "d"))
    figures["digest jobs/s"] = jobs / seconds
    print(f"  [{label}] eventq digest: {seconds:.1f}s, {jobs / seconds:,.0f} jobs/s "
          f"({out.strip()[:24]}...)", flush=True)

    seconds = start_until_first_lease(server)
    rss = settled_rss_mib(server)
    figures["no local state s"] = seconds
    figures["RSS MiB"] = rss
    figures["RSS B/job"] = (rss - idle_mib) * 1024 * 1024 / jobs
    print(f"  [{label}] serve, no local state: first lease after {seconds:.1f}s; RSS "
          f"{rss:.0f} MiB, {figures['RSS B/job']:.0f} B per job beyond idle "
          f"{idle_mib:.0f} MiB", flush=True)

    server.stop()
    seconds = start_until_first_lease(server)
    figures["clean restart s"] = seconds
    print(f"  [{label}] restart after a clean stop: first lease after {seconds:.1f}s",
          flush=True)

    time.sleep(2)  # let a commit pass, as a real crash would find it
    server.kill()
    seconds = start_until_first_lease(server)
    figures["kill -9 restart s"] = seconds
    print(f"  [{label}] restart after kill -9: first lease after {seconds:.1f}s",
          flush=True)
    server.stop()
    return figures


def worktree(ref: str, home: Path) -> Path:
    path = home / f"tree-{re.sub(r'[^A-Za-z0-9]', '_', ref)}"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), ref],
                   check=True, capture_output=True)
    return path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--before", metavar="REF", help="also run the code of git ref REF")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        trees: list[tuple[str, Path | None]] = [("after", None)]
        if args.before:
            trees.insert(0, ("before", worktree(args.before, home)))
        config = test_broker_config(home / "kafka")
        config = broker.BrokerConfig(**{**config.__dict__, "heap_mb": 1536})
        broker.start(config)
        results: dict[tuple[str, int], dict[str, float]] = {}
        try:
            for label, source in trees:
                idle = idle_rss_mib(config.bootstrap, home, label, source)
                print(f"[{label}] idle server RSS {idle:.0f} MiB", flush=True)
                for jobs in args.jobs:
                    results[(label, jobs)] = measure(
                        config.bootstrap, home, jobs, label, source, idle)
        finally:
            broker.stop(config)
            if args.before:
                subprocess.run(["git", "-C", str(ROOT), "worktree", "prune"], check=False)
        names = list(next(iter(results.values())))
        print("\n" + "figure".ljust(22) + "".join(
            f"{label} {jobs:,}".rjust(20) for label, jobs in results))
        for name in names:
            print(name.ljust(22) + "".join(
                f"{figures[name]:,.1f}".rjust(20) for figures in results.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
