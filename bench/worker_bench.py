"""Benchmark of the worker runtime: jobs/s of trivial jobs with 1, 8 and 32 handlers.

Starts a throwaway Kafka broker and `eventq serve`, and for each concurrency adds N
jobs (pipelined, ``add_many``) and times an ``eventq.worker.Worker`` (in this process)
leasing, handling (a handler that returns at once), touching nothing (the jobs are
quick) and completing them all. Prints jobs/s, the server's and the worker's CPU per
job. Each job costs the server three commands in the log (start-attempt, complete;
plus the add, made before the clock starts) and the worker's log line one read.

    .venv/bin/python bench/worker_bench.py [--jobs 3000] [--concurrency 1,8,32]
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eventq.client import Client, NewJob  # noqa: E402
from eventq.run.localkafka import broker  # noqa: E402
from eventq.worker import Worker  # noqa: E402
from tools.servers import cpu_s  # noqa: E402


def own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(port: int, server_pid: int, jobs: int, concurrency: int) -> dict:
    queue = f"bench-{concurrency}-{time.monotonic_ns()}"
    with Client(port=port) as client:
        client.add_many(NewJob(queue, b"x" * 64, ttr_ms=60_000) for _ in range(jobs))
    worker = Worker(port=port, concurrency=concurrency)
    worker.add_handler(queue, lambda job: b"ok")
    server_cpu, worker_cpu, began = cpu_s(server_pid), own_cpu_s(), time.monotonic()
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    while worker.tally.done < jobs:
        time.sleep(0.01)
    took = time.monotonic() - began
    server_cpu, worker_cpu = cpu_s(server_pid) - server_cpu, own_cpu_s() - worker_cpu
    worker.stop()
    thread.join(30)
    return {"concurrency": concurrency, "jobs/s": jobs / took,
            "server ms/job": server_cpu * 1000 / jobs, "worker ms/job": worker_cpu * 1000 / jobs}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=3_000)
    parser.add_argument("--concurrency", default="1,8,32")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--log-lines", action="store_true",
                        help="with the line per job (its attempt is one read more per job), "
                        "written nowhere")
    args = parser.parse_args()

    import logging

    logging.basicConfig(level=logging.WARNING)  # no line per job: measure the runtime
    if args.log_lines:
        worker_log = logging.getLogger("eventq.worker")
        worker_log.setLevel(logging.INFO)
        worker_log.propagate = False
        worker_log.addHandler(logging.NullHandler())
    from tools.servers import ServerProcess, test_broker_config

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        config = test_broker_config(home / "kafka")
        broker.start(config)
        server = ServerProcess(config.bootstrap, "workerbench", home / "server",
                               partitions=args.partitions)
        try:
            server.create_topics()
            server.start()
            print(f"{args.jobs:,} trivial jobs per run, {args.partitions} partitions, "
                  f"{'with' if args.log_lines else 'without'} a log line per job")
            print(f"{'handlers':>8} {'jobs/s':>8} {'server ms/job':>14} {'worker ms/job':>14}")
            for concurrency in map(int, args.concurrency.split(",")):
                row = measure(server.port, server.process.pid, args.jobs, concurrency)
                print(f"{row['concurrency']:>8} {row['jobs/s']:>8.0f} "
                      f"{row['server ms/job']:>14.2f} {row['worker ms/job']:>14.2f}",
                      flush=True)
        finally:
            server.stop()
            broker.stop(config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
