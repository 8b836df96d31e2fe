"""Benchmark of workflows (docs/workflows.md, "Dependencies"): a DAG of N jobs from Spark,
worked by worker processes, against the same N jobs without edges.

Starts a throwaway Kafka broker and `eventq serve`, a local Spark session in this
process, and --workers worker processes (eventq.worker.Worker, --slots handlers each, a
handler that returns at once). Each load is N jobs enqueued from a DataFrame by `eventq
spark enqueue`'s code (eventq.spark.enqueue, the bulk lane), then worked:

- no edges: N independent jobs;
- the DAG: the same jobs in chains of --chain, each waiting for the one before it (a
  notice crosses partitions unless both ids land in the same one).

For each: the enqueue (until every job is applied, with the depends of the DAG), the
work (workers started once every job is applied, until the last complete), jobs/s of
the work and end to end, and the server's CPU per job; for the DAG also the notices
applied per second, the server's CPU per edge (over the no-edge load) and the ratio of
the two loads' jobs/s (target: the DAG at least 70% of no-edge).

Then the latency from an upstream's complete to its dependent's lease, from the command
log's broker times (tools/dag_helpers.py folds it): in a light DAG (--latency-chains
chains, fewer than the worker slots, so a released job finds an idle lease waiting and
the lease measures when it became leasable; target p99 <= 20 ms) and in the loaded DAG
above (where a released job queues behind others). Each split into upstream and
dependent in the same partition or not (eventq/core/partitioner.py), with complete ->
notice (the follow-up in the dependent's partition) beside complete -> lease.

Figures only, never asserted: on a busy machine they say how busy it was too. What is
checked is the run's correctness, at this size (the suite's tests/spark/test_dag.py runs
the same check on a few thousand jobs): the loaded DAG's command log must show every job
worked once, each after its upstream (tools/dag_helpers.py, ``edge_order_faults``);
otherwise the faults are printed and the exit status is 1.

    .venv/bin/python bench/dag_bench.py [--jobs 100000] [--workers 2] [--slots 16]

With --light-only, the light DAG alone (after the warm-up; --light-rounds of them one
after another: a broker started moments ago is still compiling), with the server's and
the broker's CPU and the load average around it: about two minutes.
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eventq.client import Client  # noqa: E402
from eventq.client.errors import NotFound  # noqa: E402
from eventq.run.localkafka import broker  # noqa: E402
from tools.servers import cpu_s  # noqa: E402

TARGET_P99_MS = 20  # a released dependent leasable within this of its last upstream's complete
TARGET_RATIO = 0.70  # DAG jobs/s over no-edge jobs/s
TTR_MS = 600_000  # no attempt times out: each job is leased once
TTL_MS = 6 * 3_600_000
POLL_S = 0.1
STARTUP_S = 120.0  # a worker process's imports, on a busy machine
WORKER_REPORT_S = 0.05


# --- worker processes -------------------------------------------------------------------


def work(port: int, queue: str, slots: int, done, go, stop) -> None:
    """A worker process: ``slots`` handlers for ``queue`` from ``go`` on, its done count
    in ``done`` (its start, imports included, is before the clock starts)."""
    from eventq.worker import Worker

    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("eventq.worker").setLevel(logging.WARNING)  # no line (nor read) per job
    worker = Worker(port=port, concurrency=slots, status=None)
    worker.add_handler(queue, lambda job: b"ok")
    done.value = -1  # ready
    go.wait()
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    while not stop.wait(WORKER_REPORT_S):
        done.value = worker.tally.done
    worker.stop()
    thread.join(30)
    done.value = worker.tally.done


class Workers:
    """``count`` worker processes on one queue (spawned: no JVM or py4j state forked)."""

    def __init__(self, port: int, queue: str, count: int, slots: int) -> None:
        context = multiprocessing.get_context("spawn")
        self.go_event = context.Event()
        self.stop_event = context.Event()
        self.counters = [context.Value("q", 0) for _ in range(count)]
        self.processes = [
            context.Process(target=work, daemon=True, args=(
                port, queue, slots, counter, self.go_event, self.stop_event))
            for counter in self.counters]
        for process in self.processes:
            process.start()
        wait_until(lambda: all(c.value == -1 for c in self.counters), STARTUP_S,
                   "the worker processes to start")

    def go(self) -> None:
        self.go_event.set()

    @property
    def done(self) -> int:
        return sum(max(0, counter.value) for counter in self.counters)

    def stop(self) -> None:
        self.stop_event.set()
        self.go_event.set()  # (one that never went, e.g. after a failed enqueue, exits)
        for process in self.processes:
            process.join(60)


# --- one load ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Load:
    label: str
    jobs: int
    edges: int
    queue: str
    enqueue_s: float  # from the enqueue's start until every job is applied
    work_s: float  # from the workers' start until the last job is done
    enqueue_cpu_s: float  # the server's
    work_cpu_s: float

    @property
    def work_jobs_per_s(self) -> float:
        return self.jobs / self.work_s

    @property
    def end_to_end_jobs_per_s(self) -> float:
        return self.jobs / (self.enqueue_s + self.work_s)

    @property
    def cpu_ms_per_job(self) -> float:
        return (self.enqueue_cpu_s + self.work_cpu_s) * 1000 / self.jobs


def applied(port: int, queue: str) -> int:
    """The jobs of ``queue`` the server holds unfinished (ready, scheduled or waiting)."""
    with Client(port=port) as client:
        try:
            info = client.inspect_queue(queue)
        except NotFound:
            return 0
    return info.ready + info.scheduled + info.waiting


def wait_until(predicate, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up after {timeout_s:.0f}s waiting for {what}")
        time.sleep(POLL_S)


def run_load(spark, args, server, label: str, jobs: int, chain: int, edges: bool,
             workers_first: bool = False) -> Load:
    """Enqueue ``jobs`` from Spark and have them worked; workers start once every job is
    applied, or (``workers_first``) before the enqueue, idle until jobs come."""
    from eventq.kafka.topics import bulk_name_for
    from eventq.spark import enqueue
    from tools.dag_helpers import chains_frame

    queue = f"{label}-{uuid.uuid4().hex[:8]}"
    pid = server.process.pid
    workers = Workers(server.port, queue, args.workers, args.slots)
    if workers_first:
        workers.go()
    cpu, began = cpu_s(pid), time.monotonic()
    report = enqueue(
        chains_frame(spark, jobs, chain, edges=edges), bootstrap=server.bootstrap,
        topic=bulk_name_for(server.settings["commands-topic"]), name=queue,
        key_columns=["step"], after_keys_column="needs", payload_column="body",
        ttr_ms=TTR_MS, ttl_ms=TTL_MS,
    )
    if report.rejected:
        raise SystemExit(f"{report.rejected} rows rejected: {report.rejected_by_field}")
    if not workers_first:
        wait_until(lambda: applied(server.port, queue) >= jobs, args.timeout,
                   f"{jobs:,} jobs applied")
    enqueue_s, enqueue_cpu = time.monotonic() - began, cpu_s(pid) - cpu
    cpu, began = cpu_s(pid), time.monotonic()
    workers.go()
    try:
        wait_until(lambda: workers.done >= jobs, args.timeout, f"{jobs:,} jobs done")
    finally:
        workers.stop()
    work_s, work_cpu = time.monotonic() - began, cpu_s(pid) - cpu
    chains = jobs // chain
    return Load(label, jobs, jobs - chains if edges else 0, queue, enqueue_s, work_s,
                enqueue_cpu, work_cpu)


# --- what the log says ------------------------------------------------------------------


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


@dataclass(frozen=True)
class Edges:
    """Per edge, in ms of broker time: the upstream's complete to the notice's append in
    the dependent's partition, and to the dependent's lease; by partitions."""

    notice: dict[bool, list[int]]  # same partition -> samples
    lease: dict[bool, list[int]]
    notices: int
    first_notice_ms: int
    last_notice_ms: int


class EdgeOrderBroken(Exception):
    """The command log shows a job not worked exactly once, or before its upstream."""


def edge_latencies(server, load: Load, chain: int) -> Edges:
    """The edges' latencies; EdgeOrderBroken if the log breaks "each job once, each after
    its upstream"."""
    from eventq.spark.ids import DEFAULT_NAMESPACE, derive_job_id
    from tools.dag_helpers import edge_order_faults, timelines

    ids = [derive_job_id(DEFAULT_NAMESPACE, load.queue, [str(step)])
           for step in range(load.jobs)]
    lines = timelines(server.bootstrap, server.settings["commands-topic"], ids)
    faults = edge_order_faults(lines) if len(lines) == load.jobs else [
        f"{load.jobs - len(lines):,} jobs missing from the command log"]
    if faults:
        raise EdgeOrderBroken(faults)
    notice: dict[bool, list[int]] = {True: [], False: []}
    lease: dict[bool, list[int]] = {True: [], False: []}
    told = []
    for step, job_id in enumerate(ids):
        if step % chain == 0:
            continue
        line, up = lines[job_id], lines[ids[step - 1]]
        complete = up.completes[0]
        same = line.partition == up.partition
        [noted] = [n for n in line.notices if n.upstream == ids[step - 1]]
        notice[same].append(noted.applied.at_ms - complete.at_ms)
        lease[same].append(line.leases[0].at_ms - complete.at_ms)
        told.append(noted.applied.at_ms)
    return Edges(notice, lease, len(told), min(told, default=0), max(told, default=0))


def latency_lines(title: str, edges: Edges) -> list[str]:
    lines = [f"{title}: ms of broker time from an upstream's complete "
             f"(p50 / p99 / max, samples)"]
    for same in (True, False):
        where = f"{'same partition' if same else 'across partitions':<17}"
        for what, samples in (("notice", edges.notice[same]), ("lease ", edges.lease[same])):
            lines.append(f"  {where} -> {what} {percentile(samples, .5):6.0f} "
                         f"{percentile(samples, .99):6.0f} {max(samples, default=0):6.0f}  "
                         f"{len(samples):,}")
    every = edges.lease[True] + edges.lease[False]
    p99 = percentile(every, .99)
    lines.append(f"  all edges -> lease p99 {p99:.0f} ms: target <= {TARGET_P99_MS} ms "
                 f"{'met' if p99 <= TARGET_P99_MS else 'NOT met'}")
    return lines


# --- the run ----------------------------------------------------------------------------


def bench(args, server) -> None:
    from eventq.spark.session import SparkOptions, spark_session

    spark, _ = spark_session(SparkOptions(master=args.master, driver_memory="3g",
                                          app_name="eventq-dag-bench"))
    print(f"{args.jobs:,} jobs per load, chains of {args.chain}; {args.workers} worker "
          f"processes of {args.slots} slots; {args.partitions} partitions", flush=True)
    print(f"{'load':<9} {'enqueue s':>9} {'work s':>7} {'work jobs/s':>11} "
          f"{'end-to-end jobs/s':>17} {'server CPU ms/job':>17}", flush=True)
    # Spark's first job starts its Python workers, the server's first load warms it:
    # neither is either load's cost.
    run_load(spark, args, server, "warm-up", args.chain, args.chain, True, workers_first=True)
    if args.light_only:
        for _ in range(args.light_rounds):
            light_latency(spark, args, server)
        spark.stop()
        return
    loads = {}
    for label, edges in (("no-edges", False), ("dag", True)):
        load = run_load(spark, args, server, label, args.jobs, args.chain, edges)
        loads[label] = load
        print(f"{label:<9} {load.enqueue_s:>9.1f} {load.work_s:>7.1f} "
              f"{load.work_jobs_per_s:>11,.0f} {load.end_to_end_jobs_per_s:>17,.0f} "
              f"{load.cpu_ms_per_job:>17.2f}", flush=True)
    plain, dag = loads["no-edges"], loads["dag"]
    work_ratio = dag.work_jobs_per_s / plain.work_jobs_per_s
    total_ratio = dag.end_to_end_jobs_per_s / plain.end_to_end_jobs_per_s
    print(f"DAG / no-edge jobs/s: work {work_ratio:.2f}, end to end {total_ratio:.2f} "
          f"(target >= {TARGET_RATIO:.2f}: {'met' if total_ratio >= TARGET_RATIO else 'NOT met'})")
    extra_cpu = (dag.enqueue_cpu_s + dag.work_cpu_s) - (plain.enqueue_cpu_s + plain.work_cpu_s)
    print(f"server CPU per edge (over the no-edge load): {extra_cpu * 1000 / dag.edges:.2f} ms "
          f"({dag.edges:,} edges: a depend and a notice each)")
    loaded = edge_latencies(server, dag, args.chain)
    print(f"the command log: every one of the {dag.jobs:,} jobs worked once, each after its "
          "upstream", flush=True)
    span_s = max(1e-3, (loaded.last_notice_ms - loaded.first_notice_ms) / 1000)
    print(f"notices applied: {loaded.notices:,} in {span_s:.1f}s of the work "
          f"= {loaded.notices / span_s:,.0f}/s (first to last, broker time)", flush=True)

    light_latency(spark, args, server)
    print("\n".join(latency_lines(f"loaded DAG ({args.jobs // args.chain:,} chains)", loaded)),
          flush=True)
    spark.stop()


def schedstat(pid: int) -> tuple[int, int, int]:
    """(ns on CPU, ns runnable waiting for a CPU, timeslices) over a process's threads."""
    total = [0, 0, 0]
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            values = (task / "schedstat").read_text().split()
        except OSError:
            continue
        for i in range(3):
            total[i] += int(values[i])
    return tuple(total)


def light_latency(spark, args, server) -> Load:
    """The light DAG (workers idle, waiting): complete -> notice and -> lease."""
    light_jobs = args.latency_chains * args.chain
    before, load_before = schedstat(server.process.pid), open("/proc/loadavg").read().split()[:3]
    broker_pid = int(args.broker_pid_file.read_text().strip())
    broker_before = schedstat(broker_pid)
    light = run_load(spark, args, server, "light", light_jobs, args.chain, True,
                     workers_first=True)
    after = schedstat(server.process.pid)
    broker_cpu = (schedstat(broker_pid)[0] - broker_before[0]) / 1e9
    cpu, wait, slices = (a - b for a, b in zip(after, before))
    print(f"server during the light work: {light.work_cpu_s / light.work_s:.0%} of a core "
          f"(its CPU {light.work_cpu_s:.1f}s in {light.work_s:.1f}s); enqueue and work: "
          f"{cpu / 1e9:.1f}s on CPU, {wait / 1e9:.2f}s runnable but waiting for a CPU over "
          f"{slices:,} timeslices ({wait / max(1, slices) / 1e6:.2f} ms each); load average "
          f"{' '.join(load_before)} before, {' '.join(open('/proc/loadavg').read().split()[:3])} "
          f"after; the broker {broker_cpu:.1f}s of CPU", flush=True)
    print("\n".join(latency_lines(
        f"light DAG ({args.latency_chains} chains of {args.chain}, workers idle, "
        f"{light.work_jobs_per_s:,.0f} jobs/s)", edge_latencies(server, light, args.chain))),
        flush=True)
    return light


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=100_000,
                        help="jobs per load (a multiple of --chain; default 100,000)")
    parser.add_argument("--chain", type=int, default=100, help="jobs per chain (default 100)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--slots", type=int, default=16,
                        help="handlers per worker process (default 16)")
    parser.add_argument("--latency-chains", type=int, default=8,
                        help="chains of the light DAG (default 8: fewer than the slots)")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--light-rounds", type=int, default=1,
                        help="with --light-only: light DAGs one after another (default 1)")
    parser.add_argument("--light-only", action="store_true",
                        help="only the light DAG's latency (after a warm-up): no loads")
    parser.add_argument("--timeout", type=float, default=3600.0,
                        help="give up a phase after this many seconds")
    args = parser.parse_args()
    if args.jobs % args.chain:
        parser.error("--jobs must be a multiple of --chain")
    logging.basicConfig(level=logging.WARNING)

    from tools.servers import ServerProcess, test_broker_config

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        config = test_broker_config(home / "kafka")
        config = broker.BrokerConfig(**{**config.__dict__, "heap_mb": 1024})
        broker.start(config)
        args.broker_pid_file = config.pid_file
        server = ServerProcess(config.bootstrap, "dagbench", home / "server",
                               partitions=args.partitions)
        try:
            server.create_topics()
            server.start()
            bench(args, server)
        except EdgeOrderBroken as broken:
            faults = broken.args[0]
            print(f"EDGE ORDER BROKEN: {len(faults):,} faults, the first:", *faults[:20],
                  sep="\n  ")
            return 1
        finally:
            server.stop()
            broker.stop(config)
    return 0


if __name__ == "__main__":
    sys.exit(main())
