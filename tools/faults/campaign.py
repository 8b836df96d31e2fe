"""One run of the fault campaign: a proxied 3-broker cluster and 3 eventq processes
(cluster.py), the recorded load on every process (load.py), a random schedule of faults
from a seed, and then the checks (checker.py) over the whole history.

Faults (``plan_faults``, a pure function of the seed):

- ``kill-process``: kill -9 of an eventq process, restarted after a while (its data dir
  is unclean: it rebuilds its tables from the log);
- ``pause-process``: SIGSTOP, mostly past the 6 s session timeout (its partitions move
  while it sleeps), then SIGCONT;
- ``isolate-process``: every route between an eventq process and the brokers
  blackholed, reset or delayed, then healed (the process is not killed: it is a zombie
  if it believes it still owns its partitions);
- ``kill-broker``: kill -9 of a broker, restarted after a while;
- ``isolate-broker``: a broker cut off from the other brokers (replication and the KRaft
  quorum), reachable by clients, then healed.

Faults follow each other every few seconds and sometimes overlap (two at once); at most
one broker is faulted at a time (replication 3 with 2 in sync keeps every partition
writable), and the last ``QUIET_S`` of the run are without faults. After the run every
fault is healed, and the cluster must serve every partition again within
``SERVE_BOUND_S`` of each heal (measured whenever no other fault was still active).

The eventq processes run as a deployment runs them, under `eventq up`'s restart policy
(eventq/run/supervisor.py, ``supervise_processes``): one that exits on its own, e.g. a
restart that met Kafka refusing it at startup and said so, is started again after the
same backoff (seed 5023 found the campaign without it: a process restarted during a
reset of its routes exited with "Unable to bootstrap", and nothing started it again).
The faults' own kills are not such exits: the fault restarts its process when it ends.

The checks: every rule of checker.py over the history and the read-back, the live
digest against a fold of the command log, and the newest changelog record of every job
against that fold (the changelog is what a restore, a standby, Spark and replay read).
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

from eventq.client.raw import RawClient
from eventq.kafka.bulklane import wait_state_logged
from eventq.kafka.logreader import latest_jobs
from eventq.run.replay import compare, derive_from_commands
from eventq.run.supervisor import (
    POLL_INTERVAL_S,
    describe_exit_status,
    due_for_restart,
    exited,
    restart_delay_s,
    started,
)

from .checker import Violation, check, summary, violations_text
from .cluster import FaultCluster, FaultClusterError
from .explain import explain
from .history import Clock, HistoryWriter, Recorder
from .load import (
    BulkTarget,
    LoadConfig,
    created_job_ids,
    drain,
    read_back,
    run_load,
    wait_bulk_admitted,
)
from .logview import read_log
from .proxy import BLACKHOLE, DELAY, RESET

SESSION_TIMEOUT_MS = 6000
SERVING_KINDS = ("slow-to-serve", "not-served-again")  # a process may be hung: look inside
SERVE_BOUND_S = 60.0  # after a fault heals, every partition is served again within this
QUIET_S = 10.0  # the end of a run has no faults
FIRST_FAULT_S = 4.0
GAP_S = (3.0, 9.0)  # between the starts of two faults
OVERLAP_SHARE = 0.25  # a fault starts while the last is still active (two at once)
PAUSE_PAST_SESSION_SHARE = 0.8
SETTLE_TIMEOUT_S = 120.0
DIGEST_TIMEOUT_S = 90.0
EXPLAINED_JOBS = 3

PROCESS_FAULTS = ("kill-process", "pause-process", "isolate-process")
BROKER_FAULTS = ("kill-broker", "isolate-broker")
# The suite's one fixed run (tests/e2e/test_fault_campaign.py): a seed whose plan in this
# long has every kind of fault, two at once and a pause past the session timeout.
SUITE_SEED = 111
SUITE_SECONDS = 45.0


@dataclass(frozen=True)
class Fault:
    kind: str
    target: int  # process or broker index
    start_s: float  # since the load began
    duration_s: float
    mode: str | None = None  # isolate-process: blackhole, reset or delay
    delay_ms: int | None = None

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s

    @property
    def on_broker(self) -> bool:
        return self.kind in BROKER_FAULTS

    def describe(self) -> str:
        what = {"kill-process": "kill -9 of process", "pause-process": "SIGSTOP of process",
                "isolate-process": f"{self.mode} of process", "kill-broker": "kill -9 of broker",
                "isolate-broker": "cut-off of broker"}[self.kind]
        delay = f" {self.delay_ms} ms" if self.delay_ms else ""
        return (f"{what} {self.target}{delay} at {self.start_s:.1f}s for "
                f"{self.duration_s:.1f}s")


def _one_fault(rng: random.Random, start_s: float, processes: int, brokers: int,
               broker_busy: bool, session_s: float) -> Fault:
    kinds = PROCESS_FAULTS if broker_busy else PROCESS_FAULTS + BROKER_FAULTS
    kind = rng.choice(kinds)
    if kind == "pause-process":
        past = rng.random() < PAUSE_PAST_SESSION_SHARE
        duration = rng.uniform(session_s + 2, session_s + 10) if past else rng.uniform(1, session_s - 2)
        return Fault(kind, rng.randrange(processes), start_s, duration)
    if kind == "isolate-process":
        mode = rng.choice((BLACKHOLE, RESET, DELAY))
        delay_ms = rng.choice((300, 1000, 3000, 8000)) if mode == DELAY else None
        return Fault(kind, rng.randrange(processes), start_s, rng.uniform(4, 15), mode, delay_ms)
    if kind == "kill-process":
        return Fault(kind, rng.randrange(processes), start_s, rng.uniform(1, 8))
    if kind == "kill-broker":
        return Fault(kind, rng.randrange(brokers), start_s, rng.uniform(3, 10))
    return Fault(kind, rng.randrange(brokers), start_s, rng.uniform(5, 15))


def plan_faults(seed: int, seconds: float, processes: int = 3, brokers: int = 3,
                session_s: float = SESSION_TIMEOUT_MS / 1000) -> list[Fault]:
    """The faults of a run, from its seed alone: in start order, at most two active at
    once, at most one broker faulted at once, none on a target already faulted, all
    healed ``QUIET_S`` before the end."""
    rng = random.Random(f"faults:{seed}")
    faults: list[Fault] = []
    at = FIRST_FAULT_S
    last_end = seconds - QUIET_S
    while at < last_end - 2:
        active = [f for f in faults if f.end_s > at]
        if len(active) < 2:
            busy_broker = any(f.on_broker for f in active)
            fault = _one_fault(rng, at, processes, brokers, busy_broker, session_s)
            taken = {(f.on_broker, f.target) for f in active}
            if (fault.on_broker, fault.target) not in taken:
                duration = min(fault.duration_s, last_end - at)
                faults.append(Fault(fault.kind, fault.target, at, duration, fault.mode,
                                    fault.delay_ms))
        if rng.random() < OVERLAP_SHARE and faults:
            at += rng.uniform(1.0, 3.0)
        else:
            at = max(at, max(f.end_s for f in faults) if faults else at) + rng.uniform(*GAP_S)
    return faults


# --- doing the faults -----------------------------------------------------------------


def begin_fault(cluster: FaultCluster, fault: Fault) -> None:
    if fault.kind == "kill-process":
        cluster.kill_process(fault.target)
    elif fault.kind == "pause-process":
        cluster.pause_process(fault.target)
    elif fault.kind == "isolate-process":
        cluster.isolate_process(fault.target, fault.mode or BLACKHOLE, fault.delay_ms)
    elif fault.kind == "kill-broker":
        cluster.kill_broker(fault.target)
    elif fault.kind == "isolate-broker":
        cluster.isolate_broker(fault.target)
    else:
        raise ValueError(f"unknown fault {fault.kind!r}")


def end_fault(cluster: FaultCluster, fault: Fault) -> None:
    if fault.kind == "kill-process":
        cluster.restart_process(fault.target, wait=False)
    elif fault.kind == "pause-process":
        cluster.resume_process(fault.target)
    elif fault.kind == "isolate-process":
        cluster.heal_process(fault.target)
    elif fault.kind == "kill-broker":
        cluster.restart_broker(fault.target)
    elif fault.kind == "isolate-broker":
        cluster.heal_broker(fault.target)


def all_serving(cluster: FaultCluster) -> bool:
    """Every process answers, and every partition is served (through each process)."""
    return all(cluster.serving(i) for i in range(cluster.processes)) and all(
        cluster.every_partition_served(via=i) for i in range(cluster.processes))


@dataclass
class Served:
    """The time from a heal until everything served again: None if not within the
    bound, or (``interrupted``) not before the next fault began."""

    fault: str
    seconds: float | None
    interrupted: bool = False


def dump_stuck_processes(cluster) -> None:
    """Each process that does not serve now leaves its asyncio tasks and every thread's
    stack in its log (tools/servers.py ``dump_stacks``): a hang is found from its run."""
    for i, server in enumerate(cluster.servers):
        if cluster.process_pid(i) is not None and not cluster.serving(i):
            server.dump_stacks()


async def time_to_serve(cluster: FaultCluster, what: str, began: float,
                        bound_s: float = SERVE_BOUND_S * 2) -> Served:
    try:
        while time.monotonic() - began < bound_s:
            if await asyncio.to_thread(all_serving, cluster):
                return Served(what, time.monotonic() - began)
            await asyncio.sleep(0.5)
    except asyncio.CancelledError:
        return Served(what, None, interrupted=True)
    return Served(what, None)


async def supervise_processes(cluster: FaultCluster, killed: set[int], log, clock: Clock,
                              restarts: list[str]) -> None:
    """Until cancelled: restart a process that exited on its own, as `eventq up` would
    (its policy: eventq/run/supervisor.py); ``killed`` are the processes a fault killed
    (their fault restarts them). Each restart is logged and kept in ``restarts``."""
    states = {i: started(time.monotonic()) for i in range(cluster.processes)}
    while True:
        now = time.monotonic()
        for i, state in states.items():
            if i in killed:
                states[i] = started(now, state)  # the fault's: not an exit of its own
            elif state.running and cluster.process_pid(i) is None:
                states[i] = gone = exited(state, now)
                code = cluster.servers[i].process.poll() if cluster.servers[i].process else None
                why = describe_exit_status(code) if code is not None else "is gone"
                note = (f"process {i} {why} on its own; restarting it in "
                        f"{restart_delay_s(gone.failures):g}s, as eventq up would")
                log(f"  {clock.now():6.1f}s {note}")
                restarts.append(note)
        for i in due_for_restart(states, now):
            if i not in killed:
                await asyncio.to_thread(cluster.restart_process, i, False)
            states[i] = started(time.monotonic(), states[i])
        await asyncio.sleep(POLL_INTERVAL_S)


async def inject(cluster: FaultCluster, faults: list[Fault], clock: Clock,
                 served: list[Served], log, killed: set[int] | None = None) -> None:
    """Begin and end each fault at its time; after each heal with no other fault still
    active, measure how soon everything is served again (in the background, until the
    next fault begins: the last heal's measure always runs to its end)."""
    events = sorted([(f.start_s, 0, f) for f in faults] + [(f.end_s, 1, f) for f in faults],
                    key=lambda e: (e[0], e[1]))
    active: set[Fault] = set()
    measures: list[asyncio.Task] = []
    for at_s, is_end, fault in events:
        await asyncio.sleep(max(0.0, at_s - clock.now()))
        if is_end:
            await asyncio.to_thread(end_fault, cluster, fault)
            active.discard(fault)
            if killed is not None and fault.kind == "kill-process":
                killed.discard(fault.target)
            log(f"  {clock.now():6.1f}s healed: {fault.describe()}")
            if not active:
                measures.append(asyncio.ensure_future(
                    time_to_serve(cluster, fault.describe(), time.monotonic())))
        else:
            for measure in measures:
                measure.cancel()  # done ones ignore it
            log(f"  {clock.now():6.1f}s fault:  {fault.describe()}")
            if killed is not None and fault.kind == "kill-process":
                killed.add(fault.target)
            await asyncio.to_thread(begin_fault, cluster, fault)
            active.add(fault)
    served.extend(await asyncio.gather(*measures))


# --- one run --------------------------------------------------------------------------


@dataclass
class RunReport:
    seed: int
    seconds: float
    faults: list[Fault]
    violations: list[Violation] = field(default_factory=list)
    served: list[Served] = field(default_factory=list)
    counts: dict = field(default_factory=dict)
    explained: list[str] = field(default_factory=list)
    exit_codes: list[int | None] = field(default_factory=list)
    restarts: list[str] = field(default_factory=list)  # exits of their own, restarted
    history: Path | None = None
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def slowest_serve_s(self) -> float | None:
        times = [s.seconds for s in self.served if s.seconds is not None]
        return max(times) if times else None

    def text(self) -> str:
        lines = [f"run seed {self.seed}: {len(self.faults)} faults, "
                 f"{sum(sum(v.values()) for v in self.counts.values()):,} operations, "
                 f"{len(self.violations)} violations ({self.wall_s:.0f}s)"]
        lines += [f"  fault: {fault.describe()}" for fault in self.faults]
        lines += [f"  served again {s.seconds:.1f}s after: {s.fault}" if s.seconds is not None
                  else f"  (the next fault came before everything served again after: {s.fault})"
                  if s.interrupted else f"  NOT served again within the bound after: {s.fault}"
                  for s in self.served]
        lines += [f"  {note}" for note in self.restarts]
        if self.violations:
            lines.append(f"  violations (replay with --seed {self.seed}):")
            lines += ["    " + line for line in violations_text(self.violations).splitlines()]
            lines += self.explained
        return "\n".join(lines)


async def settled_digests(port: int, bootstrap: str, commands_topic: str,
                          timeout_s: float = DIGEST_TIMEOUT_S) -> tuple[str | None, str | None]:
    """The live digest once it equals a fold of the command log (timers may still be
    timing attempts out right after the load), else the last pair seen."""
    deadline = time.monotonic() + timeout_s
    live = derived = None
    while time.monotonic() < deadline:
        try:
            async with asyncio.timeout(10):
                async with await RawClient.connect(port=port) as client:
                    live = await client.digest()
        except Exception:
            await asyncio.sleep(0.5)
            continue
        derived = (await asyncio.to_thread(derive_from_commands, bootstrap, commands_topic)
                   ).digest()
        if live == derived:
            break
        await asyncio.sleep(1.0)
    return live, derived


def changelog_violations(bootstrap: str, app_id: str, commands_topic: str,
                         jobs_topic: str, timeout_s: float = DIGEST_TIMEOUT_S) -> list[Violation]:
    """The newest committed changelog record of every job, against a fold of the
    command log: what every restore, standby, Spark job and replay reads. Timers go on
    timing out leases (TTR 40 s) after the load, so both are read again until the
    changelog has caught up with the log and they agree, or the time is up."""
    deadline = time.monotonic() + timeout_s
    while True:
        if not wait_state_logged(bootstrap, app_id, commands_topic, timeout_s=60):
            return [Violation("changelog-mismatch", None, (),
                              "the changelog was not committed up to the command log's end "
                              "within 60 s")]
        logged, bad = latest_jobs(bootstrap, jobs_topic)
        folded = derive_from_commands(bootstrap, commands_topic)
        found = [Violation("changelog-mismatch", str(d.job_id), (), d.describe())
                 for d in compare(folded.jobs, logged)]
        if bad.count:
            found.append(Violation("changelog-mismatch", None, (),
                                   f"{bad.count} undecodable state records: {bad.examples[:3]}"))
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(2.0)


class ClusterDidNotStart(RuntimeError):
    """No run took place (a port taken, a broker that would not start): not a finding
    about eventq, unlike anything that goes wrong once the cluster is up."""


async def run_campaign(run_dir: Path, seed: int, seconds: float, log=print,
                       keep: bool = False, source: Path | None = None) -> RunReport:
    """One run; ``run_dir`` keeps its history, logs and (with ``keep``) the cluster's
    data; ``source``: run the eventq processes from that checkout. Raises only if the
    cluster cannot be started: a cluster that does not serve again after the faults is
    a violation of the run."""
    began = time.monotonic()
    run_dir.mkdir(parents=True, exist_ok=True)
    faults = plan_faults(seed, seconds)
    report = RunReport(seed, seconds, faults, history=run_dir / "history.jsonl")
    try:
        cluster = await asyncio.to_thread(
            FaultCluster(run_dir, source=source, session_timeout_ms=SESSION_TIMEOUT_MS).start)
    except Exception as error:
        raise ClusterDidNotStart(f"{type(error).__name__}: {error}") from error
    settings = cluster.settings
    commands, jobs_topic = settings["commands-topic"], settings["jobs-topic"]
    bootstrap = cluster.direct_bootstrap
    supervisor: asyncio.Future | None = None
    try:
        with HistoryWriter(report.history) as sink:
            sink.write_meta({"seed": seed, "seconds": seconds,
                             "faults": [f.describe() for f in faults]})
            recorder = Recorder(Clock(), sink)
            config = LoadConfig(
                ports=tuple(cluster.ports), duration_s=seconds, seed=seed,
                bulk=BulkTarget(bootstrap, settings["bulk-topic"], cluster.partitions))
            served: list[Served] = []
            killed: set[int] = set()
            supervisor = asyncio.ensure_future(supervise_processes(
                cluster, killed, log, recorder.clock, report.restarts))
            ops, _ = await asyncio.gather(
                run_load(config, recorder),
                inject(cluster, faults, recorder.clock, served, log, killed))
            report.served = served
            report.counts = {k: dict(v) for k, v in summary(ops).counts.items()}
            try:
                await asyncio.to_thread(cluster.wait_settled, SETTLE_TIMEOUT_S)
            except FaultClusterError as error:
                report.violations = [Violation(
                    "not-served-again", None, (),
                    f"{SETTLE_TIMEOUT_S:g}s after the last fault the partitions were still "
                    f"not all served: {error}")]
                return report  # its data is kept for a look (not ok)
            await wait_bulk_admitted(cluster.ports[0])
            ops = await drain(config, recorder)  # load.py: liveness is judged after it
            reads = await read_back(cluster.ports[0], created_job_ids(ops), clock=recorder.clock)
            for read in reads.values():
                sink.write_read_back(read)
            live, derived = await settled_digests(cluster.ports[0], bootstrap, commands)
            sink.write_meta({"live_digest": live, "log_digest": derived})
            log_of_jobs = await asyncio.to_thread(read_log, bootstrap, commands,
                                                  created_job_ids(ops))
        serve_times = [(s.fault, s.seconds) for s in served if not s.interrupted]
        report.violations = check(ops, reads, live, derived, serve_times, SERVE_BOUND_S,
                                  log=log_of_jobs, min_ok_ops=1)
        report.violations += await asyncio.to_thread(
            changelog_violations, bootstrap, settings["app-id"], commands, jobs_topic)
        for job_id in sorted({v.job_id for v in report.violations if v.job_id})[:EXPLAINED_JOBS]:
            report.explained.append(
                await asyncio.to_thread(explain, bootstrap, commands, jobs_topic, job_id))
    finally:
        if supervisor is not None:
            supervisor.cancel()
            await asyncio.gather(supervisor, return_exceptions=True)
        if any(v.kind in SERVING_KINDS for v in report.violations):
            await asyncio.to_thread(dump_stuck_processes, cluster)
        report.exit_codes = await asyncio.to_thread(cluster.stop)
        report.wall_s = time.monotonic() - began
    if not keep and report.ok:
        for path in ("brokers", "eventq"):
            _remove_tree(run_dir / path)
    return report


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def mean(values) -> float:
    values = list(values)
    return sum(values) / len(values) if values else math.nan
