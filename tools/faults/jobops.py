"""A run's ops grouped per job (the checker's rules judge one job at a time), and the
small facts the rules share: which ops may have taken effect, which prove the job
existed, which fails may have left retries, which leases may have spent an attempt
unseen, which ops may have run a FAILED job again.

Job ids are unique per creating op (the load draws fresh UUIDs), so a job's ops never
mix two incarnations of one id. A ``retry`` does not make a new incarnation: the job
keeps its id and TTL, and only its attempts, fails and result start afresh
(docs/workflows.md, "retry"). Every rule that takes a final fail as final for good asks
``revived_between`` first."""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from .history import CREATES, FAIL, INFO, OK, Op

SCHEDULE_ROUNDING_S = 1.0  # a schedule's time is whole seconds (checker.py's docstring)

@dataclass(frozen=True)
class Creation:
    """What one creating op said about one job (a bulk op creates many)."""

    op: Op
    queue: str
    ttr_ms: int | None
    ttl_ms: int | None
    payload: bytes | None
    max_fails: int | None = None  # None: the default, 0 (every fail is final)
    after: tuple[str, ...] = ()  # a dependent's upstreams (docs/workflows.md, "Dependencies")

    @property
    def earliest_expiry_s(self) -> float:
        """The earliest moment the job's TTL may have removed it (never for a run's job,
        which has no TTL; its run deletes it instead)."""
        if self.op.kind == "run" or not self.ttl_ms:
            return math.inf
        slack = SCHEDULE_ROUNDING_S if self.op.kind == "schedule" else 0.0
        return self.op.invoke_s + self.ttl_ms / 1000 - slack


@dataclass(frozen=True)
class JobOps:
    """Every op of one job, by kind, each in invoke order. ``grants`` are the ok leases
    that returned this job (a lease that did not return names no job)."""

    job_id: str
    creations: tuple[Creation, ...] = ()
    grants: tuple[Op, ...] = ()
    touches: tuple[Op, ...] = ()
    completes: tuple[Op, ...] = ()
    fails: tuple[Op, ...] = ()
    deletes: tuple[Op, ...] = ()
    results: tuple[Op, ...] = ()  # result ops and runs: both reply with a result
    inspects: tuple[Op, ...] = ()
    # ok or info ops that may have run the job again when FAILED (``revivals``): its
    # retries, the retry-groups of a group it may have failed into, and its upstreams'
    # (a retried upstream retries the dependents it failed, docs/workflows.md, "retry")
    revivals: tuple[Op, ...] = ()

    @property
    def made_by_run(self) -> bool:
        return any(c.op.kind == "run" for c in self.creations)

    @property
    def queue(self) -> str | None:
        return self.creations[0].queue if self.creations else None

    @property
    def earliest_expiry_s(self) -> float:
        return min((c.earliest_expiry_s for c in self.creations), default=math.inf)

    @property
    def after(self) -> tuple[str, ...]:
        return next((c.after for c in self.creations if c.after), ())


# --- grouping -------------------------------------------------------------------------


def creations_of(op: Op) -> list[tuple[str, Creation]]:
    if op.kind == "bulk":
        return [(job.job_id, Creation(op, job.queue, job.ttr_ms, job.ttl_ms, job.payload,
                                      job.max_fails))
                for job in op.args.jobs]
    if op.kind in CREATES and op.job_id is not None:
        queue = op.args.queues[0] if op.args.queues else ""
        return [(op.job_id, Creation(op, queue, op.args.ttr_ms, op.args.ttl_ms,
                                     op.args.payload, op.args.max_fails, op.args.after))]
    return []


def server_creation(recur: Op) -> Creation:
    """What a ``recur`` op gives each job its recurrence adds (the server creates a
    slot's job when the slot fires, docs/workflows.md, "recur"; no op of ours does)."""
    queue = recur.args.queues[0] if recur.args.queues else ""
    return Creation(recur, queue, recur.args.ttr_ms, recur.args.ttl_ms, recur.args.payload,
                    recur.args.max_fails)


_SLOT_OF_KIND = {"touch": "touches", "complete": "completes", "fail": "fails",
                 "delete": "deletes", "result": "results", "run": "results",
                 "inspect": "inspects"}


def group_by_job(ops: Iterable[Op],
                 recurs_by_slot: Mapping[str, Sequence[Op]] | None = None) -> dict[str, JobOps]:
    """The ops of each job. ``recurs_by_slot``: the recur ops that may have defined
    each recurrence slot's job (workload_rules.slot_recurs): a job of the run that is a
    slot's is created by them."""
    ordered = sorted(ops, key=lambda op: op.index)
    slots: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    retries: dict[str, list[Op]] = defaultdict(list)
    for op in ordered:
        for job_id, creation in creations_of(op):
            slots[job_id]["creations"].append(creation)
        if op.kind == "lease":
            if op.outcome == OK and op.reply.job_id is not None:
                slots[op.reply.job_id]["grants"].append(op)
        elif op.kind in _SLOT_OF_KIND and op.job_id is not None:
            slots[op.job_id][_SLOT_OF_KIND[op.kind]].append(op)
        elif op.kind == "retry" and op.job_id is not None and may_have_effect(op):
            retries[op.job_id].append(op)
    for job_id, recurs in (recurs_by_slot or {}).items():
        if job_id in slots:
            slots[job_id]["creations"] += [server_creation(r) for r in recurs]
    jobs = {job_id: JobOps(job_id, **{k: tuple(v) for k, v in by_kind.items()})
            for job_id, by_kind in slots.items()}
    groups = [op for op in ordered if op.kind == "retry-group" and may_have_effect(op)]
    own = {job_id: [*retries.get(job_id, ()), *_group_retries(job, groups)]
           for job_id, job in jobs.items()}
    return {job_id: replace(job, revivals=_revivals(job_id, jobs, own))
            for job_id, job in jobs.items()}


# The groups a job may be in without a fail naming one (docs/workflows.md, "Failure
# groups and retry"): a retry-group of one of them may retry any job.
IMPLICIT_GROUPS = frozenset({"failed", "attempts-exhausted", "upstream-failed"})


def _group_retries(job: JobOps, groups: Sequence[Op]) -> list[Op]:
    """The retry-groups that may have retried the job: of a group a fail of it (ok or
    info, invoked before the retry-group's effect may land) named, or of a group a job
    may be in without a fail naming it."""
    found = []
    for group in groups:
        if group.args.group in IMPLICIT_GROUPS or any(
                may_have_effect(f) and f.args.group == group.args.group
                and f.invoke_s < group.latest_effect_s for f in job.fails):
            found.append(group)
    return found


def _revivals(job_id: str, jobs: Mapping[str, JobOps],
              own: Mapping[str, Sequence[Op]]) -> tuple[Op, ...]:
    """The job's own revivals and every upstream's, down the graph (cycle-safe)."""
    found: dict[int, Op] = {}
    seen, todo = set(), [job_id]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        found.update((op.index, op) for op in own.get(current, ()))
        job = jobs.get(current)
        todo += list(job.after) if job is not None else []
    return tuple(sorted(found.values(), key=lambda op: op.index))


@dataclass(frozen=True)
class UnansweredLeases:
    """Leases that did not hand a job over, by each queue they named (invoke times
    sorted): each may have started an attempt of some job of those queues that its
    client never received. An info lease may have been granted; and a lease answered
    -TIMEOUT (or -SERVER-ERROR) may have had another process claim a job for it
    (a lease takes the cluster's best job, eventq/gateway/cluster_answers.py) whose reply
    came too late: the asking process gives that attempt back, unless its TTR passed
    first (the claiming process was paused past it), and then the attempt stays spent.
    Only a -CLIENT-ERROR (a malformed lease) claims nothing."""

    invokes_by_queue: Mapping[str, Sequence[float]] = field(default_factory=dict)

    def count(self, queue: str | None, before_s: float) -> int:
        return bisect_left(self.invokes_by_queue.get(queue, ()), before_s)


def _may_have_claimed(op: Op) -> bool:
    if op.outcome == OK:
        return False  # counted as a grant
    return op.outcome == INFO or not (op.reply.error or "").startswith("-CLIENT-ERROR")


def leases_without_answer(ops: Iterable[Op]) -> UnansweredLeases:
    by_queue: dict[str, list[float]] = defaultdict(list)
    for op in ops:
        if op.kind == "lease" and _may_have_claimed(op):
            for queue in set(op.args.queues):
                by_queue[queue].append(op.invoke_s)
    return UnansweredLeases({queue: sorted(times) for queue, times in by_queue.items()})


# --- small helpers --------------------------------------------------------------------


def may_have_effect(op: Op) -> bool:
    return op.outcome in (OK, INFO)


def ok_ops(ops: Iterable[Op]) -> list[Op]:
    return [op for op in ops if op.outcome == OK]


def ids(*ops: Op) -> tuple[int, ...]:
    return tuple(sorted({op.index for op in ops}))


def returned_before(op: Op, moment: float) -> bool:
    return op.return_s is not None and op.return_s < moment


def is_not_found(op: Op) -> bool:
    return op.outcome == FAIL and (op.reply.error or "").startswith("-NOT-FOUND")


def existence_proofs(job: JobOps) -> list[Op]:
    """Acknowledged ops that show the job existed when they took effect. A bulk's ack
    is not one (the job exists only once the server admits the record)."""
    adds = [c.op for c in job.creations if c.op.kind in ("add", "schedule")]
    others = [*job.grants, *job.touches, *job.completes, *job.fails, *job.results,
              *job.inspects]
    return ok_ops([*adds, *(op for op in others if op.kind != "run")])




def max_fails_of(job: JobOps) -> int | None:
    """The job's -max-fails as its creators said it (None: they disagree or none did)."""
    said = {c.max_fails or 0 for c in job.creations}
    return said.pop() if len(said) == 1 else None


def fails_may_retry(job: JobOps) -> bool:
    """Whether some fail of the job may leave it PENDING: only with -max-fails of 2 or
    more (a fail retries while fails + 1 < max-fails, eventq/core/job_transitions.py)."""
    limit = max_fails_of(job)
    return limit is None or limit >= 2


def revived_between(job: JobOps, after_s: float, before_s: float | None) -> bool:
    """Whether a revival of the job (a retry, ok or info) may have taken effect after
    ``after_s`` and before ``before_s`` (None: no bound): invoked before ``before_s``,
    its effect possible after ``after_s``."""
    end = math.inf if before_s is None else before_s
    return any(r.invoke_s < end and r.latest_effect_s > after_s for r in job.revivals)


def final_fails(job: JobOps) -> list[Op]:
    """Ok fails that certainly left the job FAILED when they returned: at least
    max-fails ok fails (this one among them) returned by then with no revival that may
    have landed between one's invoke and this one's return, so all counted in one run
    of the job (fails only grow inside it; each ok fail counted one; a retry sets them
    to 0). A final fail stays final only until a revival: see ``revived_between``."""
    limit = max_fails_of(job)
    if limit is None:
        return []
    acknowledged = sorted((op for op in ok_ops(job.fails) if op.return_s is not None),
                          key=lambda op: op.return_s or 0.0)
    final = []
    for fail in acknowledged:
        same_run = [f for f in acknowledged if (f.return_s or 0.0) <= (fail.return_s or 0.0)
                    and not revived_between(job, f.invoke_s, fail.return_s)]
        if len(same_run) >= max(limit, 1):
            final.append(fail)
    return final


def certainly_after_revivals(job: JobOps, ops: Iterable[Op]) -> list[Op]:
    """The ops invoked after every revival of the job surely took effect (what a
    retry's fresh counts include for sure)."""
    last = max((r.latest_effect_s for r in job.revivals), default=-math.inf)
    return [op for op in ops if op.invoke_s >= last]
