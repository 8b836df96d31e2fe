"""Doing each kind of fault of tools/faults/plan.py on a FaultCluster, healing it, and
the evidence that it took effect (docs/fencing.md, "The fault campaign"): a fault
planned but never felt proves nothing, so a fault without evidence fails its run.

``begin`` and ``end`` block (the campaign calls them in a thread); each returns the
evidence it saw, and ``confirm``, once the run's load is over and the cluster has
settled, adds what shows only later (a restarted process's log saying it started, a
group that changed). What counts as evidence, per kind:

- a process killed, stopped or restarted: its new pid, its exit code after SIGTERM, and
  the log of its new start saying it started (its dashboard line);
- a pause: the process's state in /proc is ``T`` (stopped);
- a cut: the proxy held bytes back (``held_total``) or reset connections on the routes
  it cut, between its start and its heal;
- a duplicate, a scale out or in: the consumer group's members changed (each join
  gets a new member id), or the new process's log says it started;
- a leader or coordinator killed: a broker names another leader or coordinator while
  it is down;
- a broker killed, wiped or restarted: its new pid (wiped: its data dir was deleted).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from .cluster import (
    BROKERS,
    FaultCluster,
    FaultClusterError,
    client_route,
    controller_route,
    gateway_route,
    inter_broker_route,
    node_id,
    peer_route,
)
from .plan import BLACKHOLE, Fault

ROLL_SERVE_BOUND_S = 60.0  # a rolling restart waits this long for each process to serve
TAKE_OVER_BOUND_S = 15.0  # a killed leader's or coordinator's role moves within this
DUPLICATE_START_BOUND_S = 30.0  # a duplicate is given this long to start before its kill
STARTED_LINE = "eventq dashboard on"  # what a start prints once it is up (eventq/run/serve.py)


@dataclass
class Doing:
    """One fault under way: what ``begin`` saw, for ``end`` and ``confirm``."""

    fault: Fault
    evidence: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # steps that failed
    before: dict = field(default_factory=dict)
    confirmed: bool = False

    @property
    def took_effect(self) -> bool:
        return bool(self.evidence)

    def describe(self) -> str:
        seen = "; ".join(self.evidence) or ("NO EVIDENCE" if self.confirmed
                                            else "no evidence yet")
        trouble = f" (failed steps: {'; '.join(self.problems)})" if self.problems else ""
        return f"{self.fault.describe()}: {seen}{trouble}"


# --- what is seen (small readers; each returns None when it cannot tell) ------------


def process_state(pid: int | None) -> str | None:
    """The state letter of /proc/<pid>/stat (``T``: stopped)."""
    if pid is None:
        return None
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()[0]


def start_log(cluster: FaultCluster, i: int, start: int) -> str:
    """The log of start number ``start`` of process slot i."""
    try:
        text = cluster.log_path(i).read_text(errors="replace")
    except FileNotFoundError:
        return ""
    marker = f"===== start {start} ====="
    at = text.find(marker)
    if at < 0:
        return ""
    following = text.find("===== start ", at + len(marker))
    return text[at:following if following >= 0 else None]


def cut_counters(cluster: FaultCluster, routes: list[str]) -> dict[str, int]:
    """Bytes held back and resets so far on ``routes`` (0 when the proxy cannot say)."""
    try:
        stats = cluster.route_stats()
    except Exception:
        return {route: 0 for route in routes}
    return {route: stats[route].get("held_total", 0) + stats[route].get("resets", 0)
            for route in routes if route in stats}


def group_members(cluster: FaultCluster) -> frozenset[str] | None:
    for b in live_brokers(cluster):
        try:
            return cluster.group(b).members
        except Exception:
            continue
    return None


def live_brokers(cluster: FaultCluster) -> list[int]:
    return [b for b in range(BROKERS) if cluster.broker_pid(b) is not None]


def leader_of(cluster: FaultCluster, partition: int, avoid: int | None = None) -> int | None:
    """The node id leading command partition ``partition``, asked of a live broker
    other than ``avoid``."""
    topic = cluster.settings["commands-topic"]
    for b in live_brokers(cluster):
        if b == avoid:
            continue
        try:
            view = cluster.metadata_seen_by(b, [topic])[(topic, partition)]
            return view.leader
        except Exception:
            continue
    return None


def coordinator_of(cluster: FaultCluster, key: str | None, transactional: bool,
                   avoid: int | None = None) -> int | None:
    for b in live_brokers(cluster):
        if b == avoid:
            continue
        try:
            return cluster.coordinator_seen_by(b, key, transactional)
        except Exception:
            continue
    return None


def txn_id(cluster: FaultCluster, partition: int) -> str:
    """The transactional id of a changelog partition (streams/faust/transactions.py)."""
    settings = cluster.settings
    return f"{settings['app-id']}.{settings['jobs-topic']}.{partition}"


# --- the routes a cut touches -------------------------------------------------------


def cut_routes(cluster: FaultCluster, fault: Fault, brokers=None) -> list[str]:
    if fault.kind == "cut-clients":
        return [gateway_route(fault.target)]
    if fault.kind == "cut-peers":
        return [peer_route(fault.target), peer_route(fault.other or 0)]
    if fault.kind == "isolate-broker":
        b = fault.target
        return ([inter_broker_route(c) for c in range(BROKERS)]
                + [controller_route(a, c) for a in range(BROKERS) for c in range(BROKERS)
                   if a != c and b in (a, c)])
    targets = range(BROKERS) if brokers is None else brokers
    return [client_route(fault.target, b) for b in targets]


def leaders_not_coordinator(cluster: FaultCluster) -> list[int]:
    """The brokers leading some command partition, but for the group coordinator's."""
    coordinator = coordinator_of(cluster, None, False)
    leaders = {leader_of(cluster, p) for p in range(cluster.partitions)}
    return sorted(node - 1 for node in leaders
                  if node is not None and node > 0 and node != coordinator)


# --- begin and end ------------------------------------------------------------------


def begin(cluster: FaultCluster, fault: Fault, held: set[int]) -> Doing:
    """Start ``fault``; ``held`` gets the processes it holds down (the campaign's
    supervisor leaves those to it). Never raises: a step that fails is a problem of
    the Doing, and a fault with no evidence fails the run."""
    doing = Doing(fault)
    try:
        _begin(cluster, doing, held)
    except Exception as error:
        doing.problems.append(f"begin: {type(error).__name__}: {error}")
    return doing


def end(cluster: FaultCluster, doing: Doing, held: set[int]) -> None:
    try:
        _end(cluster, doing, held)
    except Exception as error:
        doing.problems.append(f"end: {type(error).__name__}: {error}")


def _begin(cluster: FaultCluster, doing: Doing, held: set[int]) -> None:
    fault, seen, before = doing.fault, doing.evidence, doing.before
    kind, i = fault.kind, fault.target
    before["members"] = group_members(cluster)
    if kind in ("kill-process", "graceful-restart", "scale-in"):
        before["pid"], before["starts"] = cluster.process_pid(i), cluster.servers[i].starts
        held.add(i)
        if kind == "kill-process":
            cluster.kill_process(i)
            if before["pid"] is not None and cluster.process_pid(i) is None:
                seen.append(f"pid {before['pid']} gone after kill -9")
            return
        code = cluster.retire_process(i) if kind == "scale-in" else cluster.stop_process(i)
        stopped = "wrote " in start_log(cluster, i, before["starts"])
        if before["pid"] is not None and code is not None:
            seen.append(f"pid {before['pid']} exited with {code} after SIGTERM"
                        + (" (its log has its stop's summary)" if stopped else ""))
    elif kind in ("pause-process", "pause-short"):
        cluster.pause_process(i)
        time.sleep(0.1)
        state = process_state(cluster.process_pid(i))
        if state == "T":
            seen.append(f"pid {cluster.process_pid(i)} stopped (state T)")
    elif kind == "duplicate-process":
        before["slot"] = j = cluster.duplicate_process(i)
        seen_pid = cluster.process_pid(j)
        if seen_pid:
            before["pid"] = seen_pid
    elif kind == "scale-out":
        before["slot"] = cluster.add_process()
    elif kind == "rolling-restart":
        _roll(cluster, doing, held)
    elif kind in ("isolate-process", "one-way-cut", "cut-leaders", "cut-clients", "cut-peers",
                  "isolate-broker"):
        _begin_cut(cluster, doing)
    elif kind in ("kill-broker", "wipe-broker", "two-brokers-down"):
        down = [i] if kind != "two-brokers-down" else [b for b in range(BROKERS) if b != i]
        _kill_brokers(cluster, doing, down, wipe=kind == "wipe-broker")
    elif kind in ("kill-leader", "kill-group-coordinator", "kill-txn-coordinator"):
        _kill_aimed(cluster, doing)
    elif kind == "everything-down":
        members = sorted(cluster.members)
        before["pids"] = {m: cluster.process_pid(m) for m in members}
        before["starts"] = {m: cluster.servers[m].starts for m in members}
        held.update(members)
        for m in members:
            cluster.kill_process(m)
        _kill_brokers(cluster, doing, list(range(BROKERS)), wipe=False)
    else:
        raise ValueError(f"unknown fault {kind!r}")


def _end(cluster: FaultCluster, doing: Doing, held: set[int]) -> None:
    fault, seen, before = doing.fault, doing.evidence, doing.before
    kind, i = fault.kind, fault.target
    if kind in ("kill-process", "graceful-restart"):
        cluster.start_process(i)
        held.discard(i)
        pid = cluster.process_pid(i)
        if pid is not None and pid != before.get("pid"):
            seen.append(f"started again as pid {pid}")
    elif kind in ("pause-process", "pause-short"):
        members = group_members(cluster)
        if members is not None and before["members"] is not None and members != before["members"]:
            seen.append("the group's members changed while it was stopped")
        cluster.resume_process(i)
    elif kind == "duplicate-process":
        j = before.get("slot")
        if j is not None:
            _await_duplicate(cluster, doing, j)
            cluster.end_duplicate(j)
    elif kind in ("isolate-process", "one-way-cut", "cut-leaders", "cut-clients", "cut-peers",
                  "isolate-broker"):
        _end_cut(cluster, doing)
    elif kind in ("kill-leader", "kill-group-coordinator", "kill-txn-coordinator"):
        _taken_over(cluster, doing)
        _restart_brokers(cluster, doing)
    elif kind in ("kill-broker", "wipe-broker", "two-brokers-down"):
        _restart_brokers(cluster, doing)
    elif kind == "everything-down":
        _restart_brokers(cluster, doing)
        for m, pid in before["pids"].items():
            cluster.start_process(m)
            held.discard(m)
            if cluster.process_pid(m) not in (None, pid):
                seen.append(f"process {m} started again as pid {cluster.process_pid(m)}")


def confirm(cluster: FaultCluster, doing: Doing) -> None:
    """Once the run has settled: what shows only later."""
    fault, seen, before = doing.fault, doing.evidence, doing.before
    kind, i = fault.kind, fault.target
    try:
        if kind in ("kill-process", "graceful-restart") and before.get("starts") is not None:
            start = before["starts"] + 1  # its own restart, not a later fault's
            if cluster.servers[i].starts >= start and STARTED_LINE in start_log(cluster, i, start):
                seen.append(f"its log of start {start} says it started")
        elif kind == "everything-down" and before.get("starts"):
            up = [m for m, n in before["starts"].items()
                  if STARTED_LINE in start_log(cluster, m, n + 1)]
            if up:
                seen.append(f"the logs of processes {up} say they started again")
        elif kind in ("scale-out", "scale-in"):
            members = group_members(cluster)
            if members is not None and before["members"] is not None \
                    and members != before["members"]:
                seen.append(f"the group has {len(members)} members now, "
                            f"{len(before['members'])} before")
            slot = before.get("slot")
            if slot is not None and STARTED_LINE in start_log(cluster, slot, 1):
                seen.append(f"process {slot} started (pid {cluster.process_pid(slot)})")
    except Exception as error:
        doing.problems.append(f"confirm: {type(error).__name__}: {error}")
    doing.confirmed = True


# --- the kinds with more than one step ----------------------------------------------


def _roll(cluster: FaultCluster, doing: Doing, held: set[int]) -> None:
    """Every member in turn: SIGTERM, wait for the exit, start on its data dir, and wait
    until the group serves every partition again before the next."""
    for m in sorted(cluster.members):
        pid = cluster.process_pid(m)
        held.add(m)
        try:
            code = cluster.stop_process(m)
            cluster.start_process(m)
        finally:
            held.discard(m)
        began = time.monotonic()
        while time.monotonic() - began < ROLL_SERVE_BOUND_S:
            if cluster.serving(m) and cluster.every_partition_served(via=m):
                break
            time.sleep(0.5)
        else:
            doing.problems.append(f"process {m} did not serve every partition within "
                                  f"{ROLL_SERVE_BOUND_S:g}s of its restart")
        doing.evidence.append(f"process {m}: pid {pid} exited with {code}, now pid "
                              f"{cluster.process_pid(m)}, serving after "
                              f"{time.monotonic() - began:.1f}s")


def _await_duplicate(cluster: FaultCluster, doing: Doing, j: int) -> None:
    """Before the duplicate on slot j is killed: until it has started (a Python process
    on a busy machine takes seconds to), or the group's members changed with it."""
    deadline = time.monotonic() + DUPLICATE_START_BOUND_S
    started_ = changed = False
    while not (started_ and changed) and time.monotonic() < deadline:
        if cluster.process_pid(j) is None:
            break  # it exited (its log says why)
        started_ = STARTED_LINE in start_log(cluster, j, cluster.servers[j].starts)
        members = group_members(cluster)
        changed = members is not None and members != doing.before["members"]
        if not (started_ and changed):
            time.sleep(0.5)
    if changed:
        doing.evidence.append(f"the group's members changed with the duplicate on slot {j}")
    if started_:
        doing.evidence.append(f"the duplicate (pid {doing.before.get('pid')}) started")


def _begin_cut(cluster: FaultCluster, doing: Doing) -> None:
    fault = doing.fault
    brokers = None
    if fault.kind == "cut-leaders":
        brokers = leaders_not_coordinator(cluster)
        if not brokers:
            doing.problems.append("the coordinator leads every command partition: no "
                                  "broker to cut without cutting it")
            return
        coordinator = coordinator_of(cluster, None, False)
        doing.before["aimed"] = (f"cut from brokers {brokers} (command partitions' leaders), "
                                 f"not from the group coordinator's node {coordinator}")
    routes = cut_routes(cluster, fault, brokers)
    doing.before["routes"] = routes
    doing.before["counters"] = cut_counters(cluster, routes)
    if fault.kind == "isolate-process":
        cluster.isolate_process(fault.target, fault.mode or BLACKHOLE, fault.delay_ms)
    elif fault.kind == "one-way-cut":
        cluster.isolate_process(fault.target, BLACKHOLE, direction=fault.mode)
    elif fault.kind == "cut-leaders":
        cluster.isolate_process(fault.target, BLACKHOLE, brokers=brokers)
    elif fault.kind == "cut-clients":
        cluster.cut_clients(fault.target, fault.mode or BLACKHOLE, fault.delay_ms)
    elif fault.kind == "cut-peers":
        cluster.cut_peers(fault.target, fault.other or 0, fault.mode or BLACKHOLE)
    else:
        cluster.isolate_broker(fault.target)


def _end_cut(cluster: FaultCluster, doing: Doing) -> None:
    fault, routes = doing.fault, doing.before.get("routes")
    if routes is not None:
        after = cut_counters(cluster, routes)
        felt = {r: after.get(r, 0) - doing.before["counters"].get(r, 0) for r in routes}
        felt = {r: n for r, n in felt.items() if n > 0}
        if felt:
            doing.evidence.append("the proxy held or reset: " + ", ".join(
                f"{r} {n}" for r, n in sorted(felt.items()))
                + (f" ({doing.before['aimed']})" if "aimed" in doing.before else ""))
    if fault.kind == "cut-clients":
        cluster.heal_clients(fault.target)
    elif fault.kind == "cut-peers":
        cluster.heal_peers(fault.target, fault.other or 0)
    elif fault.kind == "isolate-broker":
        cluster.heal_broker(fault.target)
    else:
        cluster.heal_process(fault.target)


def _kill_brokers(cluster: FaultCluster, doing: Doing, down: list[int], wipe: bool) -> None:
    doing.before["brokers"] = {b: cluster.broker_pid(b) for b in down}
    for b in down:
        cluster.kill_broker(b)
        if wipe:
            data = cluster.brokers[b].data_dir
            files = sum(len(names) for _, _, names in os.walk(data))
            cluster.wipe_broker(b)
            if files and not data.exists():
                doing.evidence.append(f"broker {b}'s data dir wiped ({files} files)")


def _restart_brokers(cluster: FaultCluster, doing: Doing) -> None:
    pids = doing.before.get("brokers", {})
    if not pids:
        return
    cluster.restart_brokers(sorted(pids))
    for b, pid in sorted(pids.items()):
        now = cluster.broker_pid(b)
        if pid is not None and now not in (None, pid):
            doing.evidence.append(f"broker {b}: pid {pid} killed, started again as {now}")


def _aimed_at(cluster: FaultCluster, fault: Fault, avoid: int | None = None) -> int | None:
    """The node id leading the command partition, or coordinating the group or the
    changelog partition's transactions, asked of a live broker other than ``avoid``."""
    if fault.kind == "kill-leader":
        return leader_of(cluster, fault.target, avoid)
    if fault.kind == "kill-txn-coordinator":
        return coordinator_of(cluster, txn_id(cluster, fault.target), True, avoid)
    return coordinator_of(cluster, None, False, avoid)


def _kill_aimed(cluster: FaultCluster, doing: Doing) -> None:
    """Kill the broker that leads a command partition, or coordinates the group or a
    changelog partition's transactions."""
    node = _aimed_at(cluster, doing.fault)
    if node is None or node < 1:
        raise FaultClusterError(f"no broker names the target of {doing.fault.kind}")
    doing.before["node"] = node
    _kill_brokers(cluster, doing, [node - 1], wipe=False)


def _taken_over(cluster: FaultCluster, doing: Doing) -> None:
    """Evidence, before the killed broker comes back: another one took its role over
    (a coordinator moves once the killed broker's leadership of its partition of
    __consumer_offsets or __transaction_state moves)."""
    node = doing.before.get("node")
    if node is None:
        return
    deadline = time.monotonic() + TAKE_OVER_BOUND_S
    while True:
        now = _aimed_at(cluster, doing.fault, avoid=node - 1)
        if now is not None and now not in (node, -1):
            doing.evidence.append(f"node {node} killed; node {now} took over")
            return
        if time.monotonic() > deadline:
            break
        time.sleep(0.5)
    doing.problems.append(f"node {node} killed; {TAKE_OVER_BOUND_S:g}s after the fault's "
                          f"planned end the others still named {now}")


__all__ = ["Doing", "begin", "end", "confirm", "node_id"]
