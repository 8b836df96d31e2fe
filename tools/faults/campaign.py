"""One run of the fault campaign: a proxied 3-broker cluster and 3 eventq processes
(cluster.py), the recorded load on every process (load.py), a random schedule of faults
from a seed, and then the checks (checker.py) over the whole history.

Faults: tools/faults/plan.py plans them from the seed (every kind, or the ``kinds`` a
run is given: one kind alone gives a figure of its own), tools/faults/actions.py does and
heals each and records the evidence that it took effect; a planned fault with no
evidence is a violation of its run (``fault-without-effect``). Faults follow each other
every few seconds and sometimes overlap (two at once); at most one broker is faulted at
a time but by the kinds that run alone (two brokers down, everything down), and the last
``QUIET_S`` of the run are without faults. After the run every fault is healed, and the
cluster must serve every partition again within ``SERVE_BOUND_S`` of each heal
(measured whenever no other fault was still active).

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
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
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

from . import actions
from .actions import Doing
from .checker import Violation, check, summary, violations_text
from .cluster import FaultCluster, FaultClusterError
from .explain import explain
from .history import OK, Clock, HistoryWriter, Op, Recorder
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
from .plan import (  # noqa: F401  (the plan's names, as the campaign's tests know them)
    BROKER_FAULTS,
    KINDS,
    PROCESS_FAULTS,
    QUIET_S,
    SESSION_TIMEOUT_MS,
    Fault,
    plan_faults,
)

SERVING_KINDS = ("slow-to-serve", "not-served-again")  # a process may be hung: look inside
SERVE_BOUND_S = 60.0  # after a fault heals, every partition is served again within this
SETTLE_TIMEOUT_S = 120.0
DIGEST_TIMEOUT_S = 90.0
EXPLAINED_JOBS = 3

# The suite's fixed runs (tests/e2e/test_fault_campaign.py): seeds whose short plans have
# a kill of a process, a pause and a cut, each of which must be seen to take effect.
SUITE_RUNS = ((0, ("kill-process", "pause-short", "cut-clients")),
              (156, ("kill-process", "pause-process", "cut-peers")))
SUITE_SEED = SUITE_RUNS[0][0]
SUITE_SECONDS = 30.0


def all_serving(cluster: FaultCluster) -> bool:
    """Every member answers, and every partition is served (through each member)."""
    members = sorted(cluster.members)
    return all(cluster.serving(i) for i in members) and all(
        cluster.every_partition_served(via=i) for i in members)


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
        if server.process is not None and cluster.process_pid(i) is not None \
                and not cluster.serving(i):
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
    """Until cancelled: restart a member that exited on its own, as `eventq up` would
    (its policy: eventq/run/supervisor.py); ``killed`` are the processes a fault holds
    down (their fault restarts them). Each restart is logged and kept in ``restarts``.
    A process that joins is watched from then on; one that left for good no more."""
    states = {i: started(time.monotonic()) for i in sorted(cluster.members)}
    while True:
        now = time.monotonic()
        for i in set(states) - cluster.members:
            del states[i]
        for i in cluster.members - set(states):
            states[i] = started(now)
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


def conflicts(new: Fault, healing: Fault) -> bool:
    """Whether ``new`` must wait for the heal of ``healing`` to finish (a heal may take
    longer than planned: a broker's restart, a process's stop): the same target, two
    broker faults (one broker at a time), or a kind that runs alone."""
    return (new.spec.alone or healing.spec.alone or (new.on_broker and healing.on_broker)
            or bool(new.targets() & healing.targets()))


async def inject(cluster: FaultCluster, faults: list[Fault], clock: Clock,
                 served: list[Served], log, killed: set[int] | None = None,
                 last_start_s: float = math.inf,
                 skipped: list[Fault] | None = None) -> list[Doing]:
    """Begin and end each fault at its time; after each heal with no other fault still
    active, measure how soon everything is served again (in the background, until the
    next fault begins: the last heal's measure always runs to its end). A heal runs in
    the background, so a slow one (a broker's restart) does not push every later fault
    past the load's end; a fault that conflicts with a heal still under way waits for
    it. A fault whose time came only after ``last_start_s`` (slow heals before it pushed
    it past the load's faulted part) is not begun but kept in ``skipped``: with the load
    over, nothing would meet it. Returns what was done, with its evidence, in start
    order."""
    left_out: set[int] = set()
    events = sorted([(f.start_s, 0, n, f) for n, f in enumerate(faults)]
                    + [(f.end_s, 1, n, f) for n, f in enumerate(faults)],
                    key=lambda e: (e[0], e[1]))
    held = killed if killed is not None else set()
    doings: dict[int, Doing] = {}
    active: set[int] = set()
    healing: dict[int, asyncio.Future] = {}
    measures: list[asyncio.Future] = []

    async def heal(n: int) -> None:
        await asyncio.to_thread(actions.end, cluster, doings[n], held)
        log(f"  {clock.now():6.1f}s healed: {doings[n].describe()}")
        active.discard(n)
        if not active:
            measures.append(asyncio.ensure_future(
                time_to_serve(cluster, faults[n].describe(), time.monotonic())))

    for at_s, is_end, n, fault in events:
        await asyncio.sleep(max(0.0, at_s - clock.now()))
        if is_end:
            if n not in left_out:
                healing[n] = asyncio.ensure_future(heal(n))
            continue
        for m, task in list(healing.items()):
            if not task.done() and conflicts(fault, faults[m]):
                await task
        if clock.now() > last_start_s:
            log(f"  {clock.now():6.1f}s skipped: {fault.describe()} (the load's faulted "
                f"part ended at {last_start_s:.1f}s while earlier faults healed)")
            left_out.add(n)
            if skipped is not None:
                skipped.append(fault)
            continue
        for measure in measures:
            measure.cancel()  # done ones ignore it
        log(f"  {clock.now():6.1f}s fault:  {fault.describe()}")
        active.add(n)
        doings[n] = await asyncio.to_thread(actions.begin, cluster, fault, held)
    await asyncio.gather(*healing.values())
    served.extend(await asyncio.gather(*measures))
    return [doings[n] for n in sorted(doings)]


def without_effect(doings: list[Doing]) -> list[Violation]:
    """A planned fault that showed no evidence of taking effect fails the run: a
    campaign that planned a fault that never happened proves nothing."""
    return [Violation("fault-without-effect", None, (), d.describe())
            for d in doings if not d.took_effect]


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
    effects: list[dict] = field(default_factory=list)  # each fault's evidence (actions.py)
    history: Path | None = None
    wall_s: float = 0.0
    skipped: list[Fault] = field(default_factory=list)  # planned, not begun (``inject``)

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
        lines += [f"  fault: {fault.describe()}" for fault in self.faults
                  if fault not in self.skipped]
        lines += [f"  skipped (its time came after the load's faulted part): "
                  f"{fault.describe()}" for fault in self.skipped]
        lines += [f"  {'took effect' if e['took_effect'] else 'NO EFFECT'}: {e['fault']}: "
                  + "; ".join(e["evidence"] + [f"failed: {p}" for p in e["problems"]])
                  for e in self.effects]
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


def judged_job_ids(ops: Iterable[Op]) -> list[str]:
    """The jobs read back: every job an op created, and every job a lease handed out (a
    recurrence's slot jobs, which the server creates)."""
    ops = list(ops)
    leased = [op.job_id for op in ops if op.kind == "lease" and op.outcome == OK and op.job_id]
    return list(dict.fromkeys([*created_job_ids(ops), *leased]))


async def run_campaign(run_dir: Path, seed: int, seconds: float, log=print,
                       keep: bool = False, source: Path | None = None,
                       kinds: tuple[str, ...] | None = None) -> RunReport:
    """One run; ``run_dir`` keeps its history, logs and (with ``keep``) the cluster's
    data; ``source``: run the eventq processes from that checkout; ``kinds``: the kinds
    of fault its plan draws from (default: all). Raises only if the cluster cannot be
    started: a cluster that does not serve again after the faults, or a fault that did
    not take effect, is a violation of the run."""
    began = time.monotonic()
    run_dir.mkdir(parents=True, exist_ok=True)
    faults = plan_faults(seed, seconds, kinds=kinds)
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
            config = LoadConfig(  # through the proxy: a fault may cut clients off
                ports=tuple(cluster.client_ports[:cluster.processes]), duration_s=seconds,
                seed=seed, members=lambda: cluster.members,
                bulk=BulkTarget(bootstrap, settings["bulk-topic"], cluster.partitions))
            served: list[Served] = []
            killed: set[int] = set()
            supervisor = asyncio.ensure_future(supervise_processes(
                cluster, killed, log, recorder.clock, report.restarts))
            ops, doings = await asyncio.gather(
                run_load(config, recorder),
                inject(cluster, faults, recorder.clock, served, log, killed,
                       last_start_s=seconds - QUIET_S, skipped=report.skipped))
            log(f"  {recorder.clock.now():6.1f}s load and faults over")
            report.served = served
            report.counts = {k: dict(v) for k, v in summary(ops).counts.items()}
            # Read back through a member that runs (process 0 may have left the group).
            via = min(cluster.members)
            port = cluster.ports[via]
            try:
                await asyncio.to_thread(cluster.wait_settled, SETTLE_TIMEOUT_S, via)
            except FaultClusterError as error:
                report.violations = [Violation(
                    "not-served-again", None, (),
                    f"{SETTLE_TIMEOUT_S:g}s after the last fault the partitions were still "
                    f"not all served: {error}")]
                await _confirm(cluster, doings, report)
                return report  # its data is kept for a look (not ok)
            await _confirm(cluster, doings, report)
            await wait_bulk_admitted(port)
            log(f"  {recorder.clock.now():6.1f}s settled; the final drain begins")
            # The drain leases through the members left (a process may have left for good).
            members = sorted(cluster.members)
            # Every queue is drained and resumed, a left process's too (seed 9002: with
            # one process gone, the drain neither leased nor resumed its pausable queue).
            ops = await drain(replace(config, members=None, processes=len(config.ports),
                                      ports=tuple(cluster.client_ports[i] for i in members)),
                              recorder)
            log(f"  {recorder.clock.now():6.1f}s drained; reading every job back")
            reads = await read_back(port, judged_job_ids(ops), clock=recorder.clock)
            for read in reads.values():
                sink.write_read_back(read)
            live, derived = await settled_digests(port, bootstrap, commands)
            sink.write_meta({"live_digest": live, "log_digest": derived,
                             "effects": report.effects})
            # Every job of the run's topic: a recurrence's slot jobs too, which no op made.
            log_of_jobs = await asyncio.to_thread(read_log, bootstrap, commands)
            log(f"  {recorder.clock.now():6.1f}s read back; checking")
        serve_times = [(s.fault, s.seconds) for s in served if not s.interrupted]
        report.violations = check(ops, reads, live, derived, serve_times, SERVE_BOUND_S,
                                  log=log_of_jobs, min_ok_ops=1)
        report.violations += without_effect(doings)
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


async def _confirm(cluster: FaultCluster, doings: list[Doing], report: "RunReport") -> None:
    """The evidence that shows once the run has settled; every fault's evidence goes
    into the report (and the history's meta)."""
    for doing in doings:
        await asyncio.to_thread(actions.confirm, cluster, doing)
    report.effects = [{"fault": d.fault.describe(), "kind": d.fault.kind,
                       "evidence": list(d.evidence), "problems": list(d.problems),
                       "took_effect": d.took_effect} for d in doings]


def _remove_tree(path: Path) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def mean(values) -> float:
    values = list(values)
    return sum(values) / len(values) if values else math.nan
