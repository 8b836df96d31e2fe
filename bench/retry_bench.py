"""Benchmark of ``retry-group`` (docs/workflows.md, "Failure groups and retry"): jobs
retried per second.

Starts a throwaway Kafka broker and `eventq serve`, adds N jobs (pipelined,
``add_many``), fails them all into one failure group (pipelined ``fail -group=``),
then times ``retry-group <group> <count>`` calls of at most 10,000 jobs (the
protocol's limit) until the group is empty. Prints jobs retried per second and the
server's CPU per job retried. Each retry is one command in the log (its Retry, and the
notice to dependents when a job has any: these have none).

    .venv/bin/python bench/retry_bench.py [--jobs 100000] [--partitions 4]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eventq.client import Client, NewJob, calls  # noqa: E402
from eventq.client.sync import pipeline  # noqa: E402
from eventq.limits import MAX_RETRY_COUNT  # noqa: E402
from eventq.run.localkafka import broker  # noqa: E402
from tools.servers import cpu_s  # noqa: E402


def measure(port: int, server_pid: int, jobs: int) -> dict:
    queue, group = f"bench-{time.monotonic_ns()}", f"bench-{uuid.uuid4().hex[:8]}"
    with Client(port=port) as client:
        ids = client.add_many(NewJob(queue, b"x" * 64, ttr_ms=60_000, ttl_ms=86_400_000)
                              for _ in range(jobs))
        failed = pipeline(client, [calls.fail(job_id, b"boom", group=group) for job_id in ids])
        refused = [outcome for outcome in failed if outcome is not None]
        if refused:
            raise SystemExit(f"{len(refused)} fails refused, first: {refused[0]!r}")
        server_cpu, began = cpu_s(server_pid), time.monotonic()
        retried, calls_made = 0, 0
        while retried < jobs:
            got = client.retry_group(group, MAX_RETRY_COUNT)
            calls_made += 1
            if got == 0:
                raise SystemExit(f"the group emptied after {retried:,} of {jobs:,} retried")
            retried += got
        took = time.monotonic() - began
        server_cpu = cpu_s(server_pid) - server_cpu
        ready = client.inspect_queue(queue).ready
    return {"jobs": retried, "calls": calls_made, "seconds": took, "jobs/s": retried / took,
            "server ms/job": server_cpu * 1000 / retried, "ready after": ready}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args()

    import logging

    logging.basicConfig(level=logging.WARNING)
    from tools.servers import ServerProcess, test_broker_config

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        config = test_broker_config(home / "kafka")
        broker.start(config)
        server = ServerProcess(config.bootstrap, "retrybench", home / "server",
                               partitions=args.partitions)
        try:
            server.create_topics()
            server.start()
            print(f"retry-group of {args.jobs:,} failed jobs, {args.partitions} partitions, "
                  f"at most {MAX_RETRY_COUNT:,} per call")
            row = measure(server.port, server.process.pid, args.jobs)
            print(f"{row['jobs']:,} jobs retried in {row['calls']} calls, {row['seconds']:.1f} s: "
                  f"{row['jobs/s']:,.0f} jobs retried/s, server {row['server ms/job']:.2f} "
                  f"ms CPU per job; {row['ready after']:,} ready again", flush=True)
        finally:
            server.stop()
            broker.stop(config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
