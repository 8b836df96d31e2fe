"""The checker's rules for the user-like workload (load_user.py): pure functions from
the ops of a run (and its read-back) to violations, as checker.py's rules are, judged
with the same outcome semantics (history.py): an ``ok`` op took effect between its
invoke and its return, a ``fail`` op had none, an ``info`` op may have taken effect at
any moment after its invoke.

- **drain-not-quiet** / **not-final** / **undelivered** / **stuck-leased** (liveness):
  the final drain (an op of kind ``drain``: its invoke and return bound the drain, its
  ``wait_ms`` is the quiet period it waited for with every queue empty, its ``wall_s``
  the wall clock at its invoke) leased every queue of the run until no job came for the
  quiet period, which is longer than the largest TTR + backoff + near schedule of the
  load. Afterwards every job that is *judged* must be COMPLETED or FAILED at the
  read-back. A job is judged when it was acknowledged (an ok add, schedule or bulk, a
  repeated add refused as ``Duplicate job``, or an ok grant of it), no delete of it may
  have taken effect, it was not made by a run, its earliest expiry lies after the
  read-back asked, any schedule time it has lay at
  least ``DUE_SLACK_S`` before the drain ended (a schedule pushed past the drain is
  left out), and (a dependent) each of its upstreams is judged or may have ended
  otherwise (docs/workflows.md, "Dependencies": an upstream that is deleted or expires
  fails its dependents; one never acknowledged may be waited for until the TTL). A
  judged job the read-back does not find and that no lease ever returned is
  **undelivered** (lost); one still NEW, PENDING or WAITING is **not-final**, unless
  its ``time`` (a backoff wait's end) lies after the drain's end; one
  LEASED is **stuck-leased** when its deadline has passed: no lease that may have
  granted it (an ok grant of it, or any lease naming its queue that did not hand a job
  over) nor a touch of it was invoked within its TTR + ``CLAIM_SLACK_S`` of the
  read-back (a lease's TTR clock starts when the server applies it, which is before
  its client's timeout ends: the load's op margin bounds that).
  A job not final whose queue no lease of the drain named is **drain-missed-queue**
  instead: the campaign fell short, and the run cannot judge it.
- **early-release** (workflows): an ok grant of a dependent must follow, for each of its
  upstreams, a complete of that upstream that may have taken effect (ok or info,
  invoked before the grant returned): a dependent is released only once every upstream
  has COMPLETED (docs/workflows.md, "Dependencies"). A second release would be a second
  grant inside a TTR, which checker.py's double-grant already reports.
- **wrong-inputs** (workflows): an ok ``inputs`` of a dependent, invoked after an ok
  grant of it returned, names each upstream once, in ``-after`` order, with flag 1 and
  a result some complete of that upstream sent (ok or info), and nothing else
  (docs/workflows.md, "Inputs": "a ready or leased dependent therefore has all of
  them, each with 1"). The load never retries an upstream, so none drops out.
- **slot-refired** / **slot-outside-recurrence** (recurring jobs): a slot's job (its id
  derived from the recurrence's name, period and slot number, docs/workflows.md,
  "recur") is never handed out after an ok complete or fail of it returned (the load's
  recurrences have no -max-fails, so a fail is final, and the load never retries
  them: a slot fired twice would be ready again); and no slot is handed out whose due
  time is more than ``WALL_TOLERANCE_S`` before its ok recur was invoked, or after an
  ok unrecur of it returned (before any later recur of the name). A recur or a pause
  that is info is taken to land, if ever, before the drain's own resume and unrecur
  (the drain starts once every process serves again, so a request in flight has reached
  the log or never will): one landing later would leave a queue paused or a recurrence
  firing, which the drain would report as not-final jobs or a drain-not-quiet.
- **grant-while-paused**: an ok lease returning a job of queue q, invoked after an ok
  pause of q returned and returned before any resume of q was invoked (any outcome),
  and with no info resume of q invoked before it (that one may land at any time).
  docs/protocol.md, "pause and resume": a paused queue hands out no jobs.
- **retry-of-unfailed**: an ok retry of a job needs the job FAILED (any other state is
  -NOT-FOUND, docs/protocol.md, "Failure groups and retry"): some fail of it that may
  have taken effect was invoked before the retry returned; the load retries only jobs
  without upstreams and never reaches the 255-attempt cap, so nothing else fails them.
  An ok retry invoked after an ok complete of the job returned is one too (COMPLETED is
  for good).
- **retry-group-overcount**: an ok ``retry-group <g> <count>`` says ``retried n``: n is
  at most count, and at most the number of distinct jobs a fail with ``-group=<g>``
  (ok or info) invoked before it returned may have put in the group (nothing else puts
  a job in a group the load names, docs/protocol.md, "Failure groups and retry").

Priority order is not judged: a lease takes the best job of the partitions the answering
process can see at that moment, and which jobs are ready then (adds that are info,
grants that were not answered, backoffs counted from broker times, partitions moving
during faults) is not known to a client, so no history proves an inversion soundly.

The core rules (checker.py) know the workload's features themselves, so nothing here
drops a core violation: a retry (or a retry-group, or an upstream's retry) makes a
FAILED job run again, which every core rule asks (jobops.py ``revived_between``;
attempts and fails are bounded per run since the last retry); a dependent failed by
its upstream may have the result ``upstream <id> <reason>`` when that upstream may
have ended so (readrules.py ``upstream_results``); a recurrence's slot job is created
by the server, from its ``recur`` (``slot_recurs``: its queue, TTR and payload are the
recur's).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import uuid
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .history import (
    COMPLETED,
    CREATES,
    FAILED,
    FOUND,
    INFO,
    LEASED,
    NOT_FOUND,
    OK,
    Op,
    ReadBack,
)
from .violation import Violation

CLAIM_SLACK_S = 20.0  # a lease's TTR starts before its client gives up (op margin + wait)
DUE_SLACK_S = 5.0  # a job due this long before the drain's end was surely leased in it
WALL_TOLERANCE_S = 1.0  # our wall clock against the broker's
SCHEDULE_ROUNDING_S = 1.0  # schedule times are whole seconds (checker.py)
WAITING = 5  # docs/workflows.md, "Dependencies"
SLOT_LOOKBACK_S = 30.0  # slots this long before a recur are watched for (none may fire)

WORKLOAD_VIOLATION_KINDS = (
    "drain-not-quiet", "not-final", "undelivered", "stuck-leased", "drain-missed-queue",
    "early-release",
    "wrong-inputs", "slot-refired", "slot-outside-recurrence", "grant-while-paused",
    "retry-of-unfailed", "retry-group-overcount",
)


def _may(op: Op) -> bool:
    return op.outcome in (OK, INFO)


def _ids(*ops: Op) -> tuple[int, ...]:
    return tuple(sorted({op.index for op in ops}))


def parse_time(text: str) -> float:
    """A protocol time (``YYYY-MM-DDTHH:MM:SS[.f]Z``) as epoch seconds."""
    return dt.datetime.strptime(text.replace("Z", "+0000"),
                                "%Y-%m-%dT%H:%M:%S%z" if "." not in text
                                else "%Y-%m-%dT%H:%M:%S.%f%z").timestamp()


# --- the ops, indexed -----------------------------------------------------------------


@dataclass(frozen=True)
class Index:
    """The ops of a run by job and kind (what every rule here looks up)."""

    creations: Mapping[str, Sequence[Op]]
    by_job: Mapping[str, Mapping[str, Sequence[Op]]]  # job -> kind -> ops (invoke order)
    grants: Mapping[str, Sequence[Op]]  # ok leases by the job they returned
    unanswered_leases: Sequence[Op]  # leases that handed no job over (may have claimed)
    ops: Sequence[Op]

    def of(self, job_id: str, kind: str) -> Sequence[Op]:
        return self.by_job.get(job_id, {}).get(kind, ())

    def after(self, job_id: str) -> tuple[str, ...]:
        for op in self.creations.get(job_id, ()):
            if op.args.after:
                return op.args.after
        return ()


def index_ops(ops: Iterable[Op]) -> Index:
    creations: dict[str, list[Op]] = defaultdict(list)
    by_job: dict[str, dict[str, list[Op]]] = defaultdict(lambda: defaultdict(list))
    grants: dict[str, list[Op]] = defaultdict(list)
    unanswered: list[Op] = []
    ordered = sorted(ops, key=lambda op: op.index)
    for op in ordered:
        if op.kind in CREATES:
            for job_id in op.job_ids:
                creations[job_id].append(op)
        if op.kind == "lease":
            if op.outcome == OK and op.reply.job_id is not None:
                grants[op.reply.job_id].append(op)
            elif not (op.reply.error or "").startswith("-CLIENT-ERROR"):
                unanswered.append(op)
        elif op.job_id is not None:
            by_job[op.job_id][op.kind].append(op)
    return Index(creations, by_job, grants, unanswered, ordered)


def _creation_fields(op: Op, job_id: str) -> tuple[str, int | None, int | None]:
    """(queue, ttr, ttl) a creating op gave the job."""
    if op.kind == "bulk":
        for job in op.args.jobs:
            if job.job_id == job_id:
                return job.queue, job.ttr_ms, job.ttl_ms
    return (op.args.queues[0] if op.args.queues else ""), op.args.ttr_ms, op.args.ttl_ms


def earliest_expiry_s(creations: Sequence[Op], job_id: str) -> float:
    expiries = [math.inf]
    for op in creations:
        ttl_ms = _creation_fields(op, job_id)[2]
        if op.kind == "run" or not ttl_ms:
            continue
        start_s = op.invoke_s - (SCHEDULE_ROUNDING_S if op.kind == "schedule" else 0.0)
        if op.kind == "schedule" and op.args.time and op.args.wall_s is not None:
            # the TTL counts from the schedule's time (docs/protocol.md, "schedule")
            start_s += max(0.0, parse_time(op.args.time) - op.args.wall_s)
        expiries.append(start_s + ttl_ms / 1000)
    return min(expiries)


def _landed_before(op: Op) -> bool:
    """A repeated add refused as ``Duplicate job``: the load's ids are fresh, so the
    attempt it repeats created the job (docs/protocol.md, "add")."""
    return op.args.retry_of is not None and "Duplicate job" in (op.reply.error or "")


def _waits_past(read: ReadBack, end_wall_s: float | None) -> bool:
    """A job whose ``time`` (its schedule, or the end of a backoff wait) lies after the
    drain's end, less ``DUE_SLACK_S``, may rightly still wait."""
    value = read.field("time")
    if value is None:
        return False
    return end_wall_s is None or parse_time(value.decode()) + DUE_SLACK_S > end_wall_s


# --- liveness after the final drain ---------------------------------------------------


@dataclass(frozen=True)
class DrainEnd:
    end_s: float  # run clock
    end_wall_s: float | None  # wall clock at the drain's end (None: not recorded)


def the_drain(index: Index) -> tuple[Op | None, list[Violation]]:
    drains = [op for op in index.ops if op.kind == "drain"]
    if not drains:
        return None, []
    drain = drains[-1]
    if drain.outcome != OK or drain.return_s is None:
        return None, [Violation(
            "drain-not-quiet", None, _ids(drain),
            f"the final drain (op {drain.index}) never saw every queue empty for "
            f"{(drain.args.wait_ms or 0) / 1000:g}s: {drain.reply.error or 'no answer'}")]
    return drain, []


def _drain_end(drain: Op) -> DrainEnd:
    assert drain.return_s is not None
    wall = None if drain.args.wall_s is None else (
        drain.args.wall_s + drain.return_s - drain.invoke_s)
    return DrainEnd(drain.return_s, wall)


class _Judged:
    """Which jobs the liveness rule judges (memoised: dependents ask their upstreams)."""

    def __init__(self, index: Index, end: DrainEnd, reads: Mapping[str, ReadBack]) -> None:
        self.index, self.end, self.reads = index, end, reads
        self.memo: dict[str, bool] = {}

    def acknowledged(self, job_id: str) -> bool:
        made = self.index.creations.get(job_id, ())
        return (any(op.outcome == OK or _landed_before(op) for op in made)
                or bool(self.index.grants.get(job_id)))

    def deleted(self, job_id: str) -> bool:
        return any(_may(op) for op in self.index.of(job_id, "delete"))

    def due_in_drain(self, job_id: str) -> bool:
        for op in self.index.creations.get(job_id, ()):
            if op.kind == "schedule" and op.args.time:
                if self.end.end_wall_s is None:
                    return False
                if parse_time(op.args.time) + DUE_SLACK_S > self.end.end_wall_s:
                    return False
        return True

    def judged(self, job_id: str, depth: int = 0) -> bool:
        if job_id not in self.memo:
            self.memo[job_id] = False  # a cycle is never judged
            self.memo[job_id] = self._judged(job_id, depth)
        return self.memo[job_id]

    def _judged(self, job_id: str, depth: int) -> bool:
        made = self.index.creations.get(job_id, ())
        read = self.reads.get(job_id)
        if not made or any(op.kind == "run" for op in made) or depth > 100:
            return False
        if read is None or read.at_s is None or not self.acknowledged(job_id):
            return False
        if self.deleted(job_id) or earliest_expiry_s(made, job_id) <= read.at_s:
            return False
        if not self.due_in_drain(job_id):
            return False
        return all(self.judged(up, depth + 1) or self._ended_otherwise(up)
                   for up in self.index.after(job_id))

    def _ended_otherwise(self, job_id: str) -> bool:
        """Deleted, or surely expired by the drain's end: the dependent fails with it."""
        made = self.index.creations.get(job_id, ())
        if not self.acknowledged(job_id):
            return False
        return self.deleted(job_id) or earliest_expiry_s(made, job_id) < self.end.end_s


def _latest_claim_s(index: Index, job_id: str, queue: str) -> float:
    moments = [op.invoke_s for op in index.grants.get(job_id, ())]
    moments += [op.invoke_s for op in index.unanswered_leases if queue in op.args.queues]
    moments += [op.invoke_s for op in index.of(job_id, "touch") if _may(op)]
    return max(moments, default=-math.inf)


def liveness(ops: Iterable[Op], reads: Mapping[str, ReadBack]) -> list[Violation]:
    index = index_ops(ops)
    drain, found = the_drain(index)
    if drain is None:
        return found
    judged = _Judged(index, _drain_end(drain), reads)
    drained = {q for op in index.ops if op.kind == "lease" and op.invoke_s >= drain.invoke_s
               for q in op.args.queues}
    for job_id in sorted(index.creations):
        if not judged.judged(job_id):
            continue
        read = reads[job_id]
        made = index.creations[job_id]
        proof = _ids(*(op for op in made if op.outcome == OK), *index.grants.get(job_id, ()))
        if read.status == NOT_FOUND:
            if not index.grants.get(job_id):
                found.append(Violation(
                    "undelivered", job_id, proof,
                    f"job {job_id} was acknowledged, never handed to a worker, never "
                    f"deleted nor expired, and the read-back at {read.at_s:.3f}s after the "
                    f"drain does not find it"))
            continue
        if read.status != FOUND:
            continue
        state = read.number("state")
        if state in (COMPLETED, FAILED):
            continue
        queue, ttr_ms, _ = _creation_fields(made[0], job_id)
        assert read.at_s is not None
        if queue not in drained:
            found.append(Violation(
                "drain-missed-queue", job_id, proof,
                f"job {job_id} is in state {state} at the read-back, but the drain never "
                f"leased its queue {queue!r}: the run cannot judge it"))
            continue
        if state == LEASED:
            latest = _latest_claim_s(index, job_id, queue)
            if read.at_s > latest + (ttr_ms or 0) / 1000 + CLAIM_SLACK_S:
                found.append(Violation(
                    "stuck-leased", job_id, proof,
                    f"job {job_id} is LEASED at the read-back ({read.at_s:.3f}s), but "
                    f"nothing may have granted or touched it since {latest:.3f}s: its "
                    f"{ttr_ms} ms deadline is long past"))
            continue
        if _waits_past(read, judged.end.end_wall_s):
            continue
        found.append(Violation(
            "not-final", job_id, proof,
            f"job {job_id} is in state {state} at the read-back ({read.at_s:.3f}s) after a "
            f"drain that leased its queue {queue!r} until every queue was empty"))
    return found


# --- workflows ------------------------------------------------------------------------


def early_releases(index: Index) -> list[Violation]:
    found = []
    for job_id in sorted(index.creations):
        upstreams = index.after(job_id)
        for grant in index.grants.get(job_id, ()) if upstreams else ():
            assert grant.return_s is not None
            for up in upstreams:
                completes = [op for op in index.of(up, "complete")
                             if _may(op) and op.invoke_s < grant.return_s]
                if not completes:
                    found.append(Violation(
                        "early-release", job_id, _ids(grant),
                        f"dependent {job_id} was handed out by lease op {grant.index} "
                        f"(returned {grant.return_s:.3f}s) before any complete of its "
                        f"upstream {up} was invoked"))
    return found


def input_entries(op: Op) -> list[tuple[str, bool, bytes]]:
    """An inputs reply as (upstream id, completed?, result): the load keeps each as a
    field ``(id, b"1" + result)`` or ``(id, b"0" + result)``."""
    return [(key, value[:1] == b"1", value[1:]) for key, value in op.reply.fields or ()]


def wrong_inputs(index: Index) -> list[Violation]:
    found = []
    for job_id in sorted(index.creations):
        upstreams = index.after(job_id)
        grants = index.grants.get(job_id, ())
        for op in index.of(job_id, "inputs") if upstreams else ():
            if op.outcome != OK or not any(
                    g.return_s is not None and g.return_s < op.invoke_s for g in grants):
                continue
            entries = input_entries(op)
            problem = None
            if [e[0] for e in entries] != list(upstreams):
                problem = f"names {[e[0] for e in entries]}, not the upstreams {list(upstreams)}"
            for up, completed, data in entries if problem is None else ():
                sent = {c.args.result for c in index.of(up, "complete") if _may(c)}
                if not completed or data not in sent:
                    problem = f"gives {up} as ({int(completed)}, {data!r}), no complete of it"
            if problem:
                found.append(Violation(
                    "wrong-inputs", job_id, _ids(op, *grants),
                    f"inputs op {op.index} of the leased dependent {job_id} {problem}"))
    return found


# --- recurring jobs -------------------------------------------------------------------


def slot_job_id(name: str, every_ms: int, slot: int) -> str:
    """docs/workflows.md, "recur": the id of slot ``slot`` of a recurrence."""
    d = bytearray(hashlib.sha256(f"recur:{name}:{every_ms}:{slot}".encode()).digest()[:16])
    d[6] = (d[6] & 0x0F) | 0x40
    d[8] = (d[8] & 0x3F) | 0x80
    return str(uuid.UUID(bytes=bytes(d)))


@dataclass(frozen=True)
class Slot:
    recur: Op
    number: int
    due_wall_s: float


def recurrence_slots(ops: Sequence[Op]) -> dict[str, Slot]:
    """Every slot id the run's recurrences may have fired, from slightly before each
    recur to the run's last op (its wall clock estimated from the recur's)."""
    last_s = max((op.return_s or op.invoke_s for op in ops), default=0.0)
    slots: dict[str, Slot] = {}
    for op in ops:
        for n in _slot_numbers(op, last_s):
            # the earliest recur that may have defined it (a repeated one is later)
            every_ms = op.args.every_ms or 0
            slots.setdefault(slot_job_id(op.args.name or "", every_ms, n),
                             Slot(op, n, n * every_ms / 1000))
    return slots


def slot_recurs(ops: Sequence[Op]) -> dict[str, list[Op]]:
    """Every slot id the run's recurrences may have fired (as ``recurrence_slots``
    reckons them), with every recur op (ok or info) that may have defined it: the
    server creates the slot's job from the definition (docs/workflows.md, "recur")."""
    last_s = max((op.return_s or op.invoke_s for op in ops), default=0.0)
    found: dict[str, list[Op]] = defaultdict(list)
    for op in ops:
        for n in _slot_numbers(op, last_s):
            found[slot_job_id(op.args.name or "", op.args.every_ms or 0, n)].append(op)
    return dict(found)


def _slot_numbers(op: Op, last_s: float) -> range:
    """The slots a recur op may have fired: from ``SLOT_LOOKBACK_S`` before its wall
    clock to the run's last op (its wall clock estimated from the recur's)."""
    if op.kind != "recur" or not _may(op) or not op.args.every_ms or op.args.wall_s is None:
        return range(0)
    every_s = op.args.every_ms / 1000
    first = math.floor((op.args.wall_s - SLOT_LOOKBACK_S) / every_s) - 1
    last = math.ceil((op.args.wall_s + last_s - op.invoke_s) / every_s) + 2
    return range(first, last + 1)


def _wall_of(op: Op, moment_s: float) -> float | None:
    return None if op.args.wall_s is None else op.args.wall_s + moment_s - op.invoke_s


def slot_violations(index: Index) -> list[Violation]:
    slots = recurrence_slots(index.ops)
    found = []
    for job_id, slot in sorted(slots.items()):
        grants = index.grants.get(job_id, ())
        ends = [op for kind in ("complete", "fail") for op in index.of(job_id, kind)
                if op.outcome == OK and op.return_s is not None]
        for grant in grants:
            after = [e for e in ends if e.return_s is not None and e.return_s < grant.invoke_s]
            if after:
                found.append(Violation(
                    "slot-refired", job_id, _ids(after[0], grant),
                    f"slot {slot.number} of recurrence {slot.recur.args.name!r} was handed "
                    f"out again (lease op {grant.index}) after op {after[0].index} ended it"))
        if grants:
            found += _outside_recurrence(index, job_id, slot, grants[0])
    return found


def _outside_recurrence(index: Index, job_id: str, slot: Slot, grant: Op) -> list[Violation]:
    name = slot.recur.args.name
    assert slot.recur.args.wall_s is not None
    if slot.due_wall_s < slot.recur.args.wall_s - WALL_TOLERANCE_S:
        return [Violation(
            "slot-outside-recurrence", job_id, _ids(slot.recur, grant),
            f"slot {slot.number} of {name!r} (due {slot.due_wall_s:.3f}) fired though its "
            f"recur (op {slot.recur.index}) came later ({slot.recur.args.wall_s:.3f})")]
    for unrecur in index.ops:
        if unrecur.kind != "unrecur" or unrecur.args.name != name or unrecur.outcome != OK:
            continue
        removed = _wall_of(unrecur, unrecur.return_s or math.inf)
        later = [op for op in index.ops if op.kind == "recur" and op.args.name == name
                 and op.invoke_s > unrecur.invoke_s]
        if removed is not None and not later and slot.due_wall_s > removed + WALL_TOLERANCE_S:
            return [Violation(
                "slot-outside-recurrence", job_id, _ids(unrecur, grant),
                f"slot {slot.number} of {name!r} (due {slot.due_wall_s:.3f}) fired after "
                f"unrecur op {unrecur.index} removed it ({removed:.3f})")]
    return []


# --- pause, retry ---------------------------------------------------------------------


def grants_while_paused(index: Index) -> list[Violation]:
    by_queue: dict[str, dict[str, list[Op]]] = defaultdict(lambda: defaultdict(list))
    for op in index.ops:
        if op.kind in ("pause", "resume") and op.args.queues:
            by_queue[op.args.queues[0]][op.kind].append(op)
    leases = [op for ops in index.grants.values() for op in ops]
    found = []
    for queue, kinds in sorted(by_queue.items()):
        for pause in kinds["pause"]:
            if pause.outcome != OK or pause.return_s is None:
                continue
            resumes = [r for r in kinds["resume"] if r.invoke_s > pause.invoke_s]
            end_s = min((r.invoke_s for r in resumes), default=math.inf)
            if any(r.outcome == INFO and r.invoke_s < end_s for r in kinds["resume"]):
                continue  # an indeterminate resume may land at any moment
            for lease in leases:
                if (lease.reply.name == queue and lease.invoke_s > pause.return_s
                        and lease.return_s is not None and lease.return_s < end_s):
                    found.append(Violation(
                        "grant-while-paused", lease.reply.job_id, _ids(pause, lease),
                        f"lease op {lease.index} got a job of {queue!r} while it was "
                        f"paused (pause op {pause.index} returned {pause.return_s:.3f}s, no "
                        f"resume invoked before {lease.return_s:.3f}s)"))
    return found


def retries_of_unfailed(index: Index) -> list[Violation]:
    found = []
    for job_id, kinds in sorted(index.by_job.items()):
        for retry in kinds.get("retry", ()):
            if retry.outcome != OK or retry.return_s is None or index.after(job_id):
                continue
            fails = [f for f in kinds.get("fail", ()) if _may(f) and f.invoke_s < retry.return_s]
            completed = [c for c in kinds.get("complete", ())
                         if c.outcome == OK and c.return_s is not None
                         and c.return_s < retry.invoke_s]
            if completed:
                found.append(Violation(
                    "retry-of-unfailed", job_id, _ids(completed[0], retry),
                    f"retry op {retry.index} of {job_id} was ok after complete op "
                    f"{completed[0].index} made it COMPLETED"))
            elif not fails:
                found.append(Violation(
                    "retry-of-unfailed", job_id, _ids(retry),
                    f"retry op {retry.index} of {job_id} was ok, but no fail of it was "
                    f"invoked before: it was never FAILED"))
    return found


def retry_group_overcounts(index: Index) -> list[Violation]:
    found = []
    for op in index.ops:
        if op.kind != "retry-group" or op.outcome != OK or op.return_s is None:
            continue
        retried = int(op.reply.field("retried") or b"0")
        failed = {f.job_id for f in index.ops if f.kind == "fail" and _may(f)
                  and f.args.group == op.args.group and f.invoke_s < op.return_s}
        if retried > min(op.args.count or 0, len(failed)):
            found.append(Violation(
                "retry-group-overcount", None, _ids(op),
                f"retry-group op {op.index} retried {retried} jobs of {op.args.group!r}, "
                f"asked for {op.args.count}, and only {len(failed)} may have failed into it"))
    return found


# --- the whole workload check ---------------------------------------------------------


def check_workload(ops: Iterable[Op], reads: Mapping[str, ReadBack] | Iterable[ReadBack],
                   core: Sequence[Violation]) -> list[Violation]:
    """The core rules' violations (``core``, kept as they are), then this module's."""
    ops = list(ops)
    reads = reads if isinstance(reads, Mapping) else {r.job_id: r for r in reads}
    index = index_ops(ops)
    order = {kind: n for n, kind in enumerate(WORKLOAD_VIOLATION_KINDS)}
    own = [*liveness(ops, reads), *early_releases(index), *wrong_inputs(index),
           *slot_violations(index), *grants_while_paused(index), *retries_of_unfailed(index),
           *retry_group_overcounts(index)]
    return [*core] + sorted(own, key=lambda v: (order[v.kind], v.job_id or "", v.ops))


__all__ = [
    "CLAIM_SLACK_S", "DUE_SLACK_S", "WALL_TOLERANCE_S", "WORKLOAD_VIOLATION_KINDS",
    "Index", "index_ops", "parse_time", "earliest_expiry_s", "liveness",
    "early_releases", "input_entries", "wrong_inputs", "slot_job_id", "recurrence_slots",
    "slot_violations", "grants_while_paused", "retries_of_unfailed",
    "retry_group_overcounts", "slot_recurs", "check_workload",
]
