"""The fault campaign's schedule (docs/fencing.md, "The fault campaign"): which faults a
run has and when, a pure function of the run's seed (and of the kinds it may draw).

Every kind is one entry of ``KINDS``: what it aims at, how long it lasts, how many
brokers it takes out of service, and whether it runs alone. tools/faults/actions.py
does each kind and heals it, and says what evidence shows it took effect.

The kinds (what each does is in ``KINDS``' entries and in actions.py):

- on an eventq process: ``kill-process`` (kill -9, restarted on its unclean data dir),
  ``graceful-restart`` (SIGTERM, wait for the exit, started again on its data dir: the
  clean restart that trusts its local RocksDB), ``pause-process`` (SIGSTOP past the
  session timeout: its partitions move while it sleeps), ``pause-short`` (SIGSTOP
  longer than the load's TTR but shorter than the session timeout: its leases may
  expire while the group still counts it a member), ``duplicate-process`` (a copy of
  its data dir, so of its instance id, started beside it, later killed),
  ``isolate-process`` (every route to the brokers blackholed, reset or delayed),
  ``one-way-cut`` (its routes to the brokers cut in one direction only),
  ``cut-leaders`` (cut from the brokers leading eventq's command partitions, but not
  from the group coordinator), ``cut-clients`` (the load's clients cut from its
  gateway), ``cut-peers`` (it and another process cut apart: their forwarding);
- on the group: ``scale-out`` (a new process joins), ``scale-in`` (one leaves for
  good), ``rolling-restart`` (every process in turn, each once the group serves every
  partition again);
- on brokers: ``kill-broker``, ``isolate-broker`` (cut from the other brokers),
  ``wipe-broker`` (killed, its data dir deleted, restarted), ``kill-leader`` (the
  leader of a command partition), ``kill-group-coordinator``,
  ``kill-txn-coordinator`` (of a changelog partition's transactional id),
  ``two-brokers-down`` (the cluster is not writable while it lasts: requests must fail,
  not lie), ``everything-down`` (every broker and eventq process killed at once, then
  all restarted).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

SESSION_TIMEOUT_MS = 6000
QUIET_S = 10.0  # the end of a run has no faults
FIRST_FAULT_S = 4.0
GAP_S = (3.0, 9.0)  # between the starts of two faults
OVERLAP_SHARE = 0.25  # a fault starts while the last is still active (two at once)
PAUSE_PAST_SESSION_SHARE = 0.8
# The load's largest lease TTR below the session timeout (tools/faults/load.py leases
# with 1.5 s and 40 s): a short pause outlasts it, so a lease expires while its holder
# is stopped but still a member of the group.
SHORT_PAUSE_TTR_MS = 1500
BLACKHOLE, RESET, DELAY = "blackhole", "reset", "delay"  # tools/faults/proxy.py's modes
DELAYS_MS = (300, 1000, 3000, 8000)


@dataclass(frozen=True)
class Kind:
    """One kind of fault, as data: the planner draws from these."""

    name: str
    aim: str  # "process", "pair" (two processes), "broker" or "group" (none chosen)
    duration_s: tuple[float, float]
    brokers: int = 0  # brokers it takes out of service while it lasts
    alone: bool = False  # no other fault while it lasts
    modes: tuple[str, ...] = ()  # proxy modes it draws from
    once: bool = False  # at most once a run

    def __post_init__(self) -> None:
        if self.aim not in ("process", "pair", "broker", "group"):
            raise ValueError(f"aim must be process, pair, broker or group, not {self.aim!r}")
        low, high = self.duration_s
        if not 0 < low <= high:
            raise ValueError(f"duration must be 0 < low <= high, not {self.duration_s}")


KINDS = {k.name: k for k in (
    Kind("kill-process", "process", (1, 8)),
    Kind("graceful-restart", "process", (1, 5)),
    Kind("pause-process", "process", (1, 16)),  # its own draw: see _duration
    Kind("pause-short", "process", (1, 4)),  # its own draw: see _duration
    Kind("duplicate-process", "process", (5, 12)),
    Kind("isolate-process", "process", (4, 15), modes=(BLACKHOLE, RESET, DELAY)),
    Kind("one-way-cut", "process", (4, 12), modes=("up", "down")),
    Kind("cut-leaders", "process", (4, 12)),
    Kind("cut-clients", "process", (3, 10), modes=(BLACKHOLE, RESET, DELAY)),
    Kind("cut-peers", "pair", (4, 12), modes=(BLACKHOLE, RESET)),
    Kind("scale-out", "group", (4, 8), once=True),
    Kind("scale-in", "process", (2, 4), once=True),
    Kind("rolling-restart", "group", (20, 30), alone=True, once=True),
    Kind("kill-broker", "broker", (3, 10), brokers=1),
    Kind("isolate-broker", "broker", (5, 15), brokers=1),
    Kind("wipe-broker", "broker", (3, 10), brokers=1),
    Kind("kill-leader", "group", (3, 10), brokers=1),
    Kind("kill-group-coordinator", "group", (3, 10), brokers=1),
    Kind("kill-txn-coordinator", "group", (3, 10), brokers=1),
    Kind("two-brokers-down", "broker", (3, 8), brokers=2, alone=True),
    Kind("everything-down", "group", (2, 6), brokers=3, alone=True),
)}
# The report's fault mixes (docs/reliability.md, "Results"): every kind, and three
# families, each drawn alone so its figures stand apart. Every kind is in one family.
MIXES = {
    "all": tuple(KINDS),
    "processes": ("kill-process", "graceful-restart", "pause-process", "pause-short",
                  "duplicate-process", "scale-out", "scale-in", "rolling-restart"),
    "network": ("isolate-process", "one-way-cut", "cut-leaders", "cut-clients", "cut-peers",
                "isolate-broker"),
    "brokers": ("kill-broker", "wipe-broker", "kill-leader", "kill-group-coordinator",
                "kill-txn-coordinator", "two-brokers-down", "everything-down"),
}
# The kinds the campaign had before these (the suite's plan tests name them).
PROCESS_FAULTS = ("kill-process", "pause-process", "isolate-process")
BROKER_FAULTS = ("kill-broker", "isolate-broker")


@dataclass(frozen=True)
class Fault:
    kind: str
    target: int  # process or broker index (a group fault: a partition, or unused)
    start_s: float  # since the load began
    duration_s: float
    mode: str | None = None  # a cut's proxy mode, or a one-way cut's direction
    delay_ms: int | None = None
    other: int | None = None  # cut-peers: the second process

    @property
    def end_s(self) -> float:
        return self.start_s + self.duration_s

    @property
    def spec(self) -> Kind:
        return KINDS[self.kind]

    @property
    def on_broker(self) -> bool:
        return self.spec.brokers > 0

    def targets(self) -> set[tuple[str, int]]:
        """What it holds while it lasts: no other fault may aim at these."""
        spec = self.spec
        if spec.aim == "process":
            return {("process", self.target)}
        if spec.aim == "pair":
            return {("process", self.target), ("process", self.other or 0)}
        if spec.aim == "broker":
            return {("broker", self.target)}
        return {("group", 0)}

    def describe(self) -> str:
        delay = f" {self.delay_ms} ms" if self.delay_ms else ""
        mode = f" ({self.mode}{delay})" if self.mode else ""
        what = {"process": f"process {self.target}", "broker": f"broker {self.target}",
                "pair": f"processes {self.target} and {self.other}",
                "group": "the group"}[self.spec.aim]
        if self.kind in ("kill-leader", "kill-txn-coordinator"):
            what = f"partition {self.target}"
        elif self.kind == "scale-out":
            what = f"new process {self.target}"
        elif self.kind == "two-brokers-down":
            what = f"all brokers but {self.target}"
        return f"{self.kind} of {what}{mode} at {self.start_s:.1f}s for {self.duration_s:.1f}s"


def _duration(rng: random.Random, kind: Kind, session_s: float) -> float:
    if kind.name == "pause-process":
        past = rng.random() < PAUSE_PAST_SESSION_SHARE
        return rng.uniform(session_s + 2, session_s + 10) if past else rng.uniform(1, session_s - 2)
    if kind.name == "pause-short":
        return rng.uniform(SHORT_PAUSE_TTR_MS / 1000 + 0.5, session_s - 1.5)
    return rng.uniform(*kind.duration_s)


@dataclass
class _Plan:
    """What the planner knows while it draws: which processes exist at a moment."""

    members: list[int]
    spare: int  # the next slot a scale-out takes
    used_once: set[str]


def _one_fault(rng: random.Random, kinds: list[Kind], at: float, plan: _Plan,
               active: list[Fault], brokers: int, partitions: int,
               session_s: float) -> Fault | None:
    taken = set().union(*(f.targets() for f in active)) if active else set()
    busy_brokers = sum(f.spec.brokers for f in active)
    allowed = [k for k in kinds if k.name not in plan.used_once
               and not (k.alone and active) and not (k.brokers and busy_brokers)]
    if not allowed:
        return None
    kind = rng.choice(allowed)
    free = [i for i in plan.members if ("process", i) not in taken]
    mode = rng.choice(kind.modes) if kind.modes else None
    delay_ms = rng.choice(DELAYS_MS) if mode == DELAY else None
    target, other = 0, None
    if kind.aim == "process":
        if not free or (kind.name == "scale-in" and len(plan.members) < 3):
            return None
        target = rng.choice(free)
    elif kind.aim == "pair":
        if len(free) < 2:
            return None
        target, other = rng.sample(free, 2)
    elif kind.aim == "broker":
        target = rng.randrange(brokers)
        if ("broker", target) in taken:
            return None
    elif kind.name in ("kill-leader", "kill-txn-coordinator"):
        target = rng.randrange(partitions)
    elif kind.name == "scale-out":
        target = plan.spare
    if ("group", 0) in taken and kind.aim == "group":
        return None
    return Fault(kind.name, target, at, _duration(rng, kind, session_s), mode, delay_ms, other)


def plan_faults(seed: int, seconds: float, processes: int = 3, brokers: int = 3,
                session_s: float = SESSION_TIMEOUT_MS / 1000,
                kinds: tuple[str, ...] | None = None, partitions: int = 6) -> list[Fault]:
    """The faults of a run, from its seed (and ``kinds``: default every kind) alone: in
    start order, at most two active at once, at most one broker faulted at once but by a
    kind that runs alone, none on a target already faulted, none on a process that left,
    all healed ``QUIET_S`` before the end."""
    unknown = set(kinds or ()) - set(KINDS)
    if unknown:
        raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {sorted(KINDS)}")
    drawn = [KINDS[name] for name in (kinds or tuple(KINDS))]
    rng = random.Random(f"faults:{seed}")
    plan = _Plan(list(range(processes)), processes, set())
    faults: list[Fault] = []
    at = FIRST_FAULT_S
    last_end = seconds - QUIET_S
    while at < last_end - 2:
        active = [f for f in faults if f.end_s > at]
        if len(active) < 2 and not any(f.spec.alone for f in active):
            fault = _one_fault(rng, drawn, at, plan, active, brokers, partitions, session_s)
            if fault is not None:
                fault = Fault(fault.kind, fault.target, at, min(fault.duration_s, last_end - at),
                              fault.mode, fault.delay_ms, fault.other)
                faults.append(fault)
                _note(plan, fault)
        if rng.random() < OVERLAP_SHARE and faults and not faults[-1].spec.alone:
            at += rng.uniform(1.0, 3.0)
        else:
            at = max(at, max(f.end_s for f in faults) if faults else at) + rng.uniform(*GAP_S)
    return faults


def _note(plan: _Plan, fault: Fault) -> None:
    """The members after ``fault`` (a scale-out adds the next slot; a scale-in removes
    its target for good)."""
    if fault.spec.once:
        plan.used_once.add(fault.kind)
    if fault.kind == "scale-out":
        plan.members.append(plan.spare)
        plan.spare += 1
    elif fault.kind == "scale-in":
        plan.members.remove(fault.target)
