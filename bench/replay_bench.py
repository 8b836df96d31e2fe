"""Benchmark of recovery from the log (issue 4), on a throwaway broker.

1. Writes N live jobs (default 1,000,000) as state records into `eventq.jobs`, as the
   processor would have left them (plus one harmless command per partition in
   `eventq.commands`, so new commands land after the jobs' versions).
2. `eventq replay`: rebuilds a data dir's RocksDB from `eventq.jobs`: jobs/s.
3. Starts `eventq serve` with NO local state (a new machine): seconds from process
   start until the first lease succeeds, and its resident memory then.
4. Starts `eventq serve` on the data dir rebuilt in step 2: seconds to first lease.

    .venv/bin/python bench/replay_bench.py [--jobs 1000000] [--partitions 8]
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
from eventq.core import Added, Delete, Job, State, encode_command, encode_state  # noqa: E402
from eventq.errors import EventqError  # noqa: E402
from eventq.kafka import broker  # noqa: E402
from support import rss_mib  # noqa: E402
from eventq.kafka.partitioner import partition_for_key  # noqa: E402
from eventq.replay import rebuild_from_state_log  # noqa: E402
from streams.store import job_key  # noqa: E402

NOW_MS = int(time.time() * 1000)


def synthetic_job(i: int) -> Job:
    return Job(
        id=uuid.uuid4(), name=f"q{i % 10}", ttr_ms=60000, ttl_ms=86_400_000,
        payload=b"payload-%08d" % i, priority=i % 3, max_attempts=0, max_fails=0,
        attempts=0, fails=0, state=State.NEW, created_ms=NOW_MS, scheduled_ms=None,
        expires_ms=NOW_MS + 86_400_000, lease_deadline_ms=None, result=None,
        result_ok=None, version=0,
    )


def write_jobs(bootstrap: str, names: dict, count: int, partitions: int) -> float:
    from confluent_kafka import Producer

    producer = Producer({
        "bootstrap.servers": bootstrap, "partitioner": "murmur2_random",
        "linger.ms": 20, "batch.size": 1_000_000, "compression.type": "lz4",
        "queue.buffering.max.messages": 1_000_000, "acks": "all",
    })
    began = time.monotonic()
    for i in range(count):
        job = synthetic_job(i)
        key = job_key(job.id)
        value = encode_state(Added(job.id, NOW_MS, 0, job), job)
        while True:
            try:
                producer.produce(names["jobs"], key=key, value=value,
                                 partition=partition_for_key(key, partitions))
                break
            except BufferError:
                producer.poll(0.1)
        if i % 10000 == 0:
            producer.poll(0)
            print(f"\r  writing state records: {i:,}/{count:,}", end="", file=sys.stderr)
    # One rejected command per partition: later commands get offsets above version 0.
    for partition in range(partitions):
        command = Delete(uuid.uuid4())
        producer.produce(names["commands"], key=job_key(command.job_id),
                         value=encode_command(command), partition=partition)
    assert producer.flush(120) == 0
    print(file=sys.stderr)
    return time.monotonic() - began


async def first_lease(port: int, timeout_s: float = 900) -> float:
    began = time.monotonic()
    while time.monotonic() - began < timeout_s:
        try:
            async with await Client.connect(port=port) as c:
                await c.lease([f"q{i}" for i in range(10)], 1000)
                return time.monotonic() - began
        except (OSError, EventqError):
            await asyncio.sleep(0.05)
    raise TimeoutError("no lease")


def time_to_first_lease(server) -> tuple[float, float]:
    import subprocess

    server.home.mkdir(parents=True, exist_ok=True)
    log = open(server.log_path, "ab")
    began = time.monotonic()
    server.process = subprocess.Popen(
        [sys.executable, "-m", "eventq.cli", "serve", *server.flags],
        stdout=log, stderr=subprocess.STDOUT,
    )
    asyncio.run(first_lease(server.port))
    elapsed = time.monotonic() - began
    rss = rss_mib(server.process.pid)
    server.stop()
    return elapsed, rss



def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=8)
    args = parser.parse_args()

    from support import ServerProcess, test_broker_config

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        config = test_broker_config(home / "kafka")
        config = broker.BrokerConfig(**{**config.__dict__, "heap_mb": 1536})
        broker.start(config)
        try:
            server = ServerProcess(config.bootstrap, "replay", home / "fresh",
                                   partitions=args.partitions)
            server.create_topics()
            names = {"jobs": server.settings["jobs-topic"],
                     "commands": server.settings["commands-topic"]}
            seconds = write_jobs(config.bootstrap, names, args.jobs, args.partitions)
            print(f"wrote {args.jobs:,} state records in {seconds:.1f}s "
                  f"({args.jobs / seconds:,.0f}/s)")

            state_dir = home / "replayed" / "state"
            began = time.monotonic()
            report = rebuild_from_state_log(config.bootstrap, names["jobs"], state_dir)
            seconds = time.monotonic() - began
            print(f"eventq replay: {report.jobs:,} jobs rebuilt in {seconds:.1f}s "
                  f"({report.jobs / seconds:,.0f} jobs/s)")

            seconds, rss = time_to_first_lease(server)
            print(f"serve with no local state: first lease after {seconds:.1f}s, "
                  f"RSS {rss:.0f} MiB with {args.jobs:,} jobs")

            replayed = ServerProcess(config.bootstrap, "replay", home / "replayed",
                                     partitions=args.partitions)
            replayed.settings["app-id"] = server.settings["app-id"] + "-r"
            seconds, rss = time_to_first_lease(replayed)
            print(f"serve on the replayed data dir: first lease after {seconds:.1f}s, "
                  f"RSS {rss:.0f} MiB")
        finally:
            broker.stop(config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
