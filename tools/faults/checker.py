"""The fault campaign's checker: a pure function from a run's history (ops, read-back,
digests, serve times) to the violations in it.

``check`` groups the ops per job and runs one small rule per kind of violation. Each
rule trusts only what the outcomes guarantee (history.py): an ``ok`` op took effect
somewhere between its invoke and its return; a ``fail`` op had no effect; an ``info``
op may have taken effect at any moment after its invoke, even after its (error) reply
(``Op.latest_effect_s``). Job ids are unique per creating op (the load draws fresh
UUIDs), so a job's ops never mix two incarnations of one id. TTLs are judged by their
earliest possible expiry: the creating op's invoke + TTL (a schedule's TTL counts from
its whole-second time, which the load never puts in the past, so minus one second to
stay safe), so a job that may have expired is never called lost.

The rules, and why each is sound:

- **lost-add** (read-back): the read-back says NOT-FOUND for a job that certainly
  existed (an ok add/schedule/bulk, or any acknowledged op on it: a grant, a complete,
  a fail, a touch, an inspect or a result), that no op of any outcome tried to delete,
  whose earliest expiry is after the read-back's inspect was invoked, and that no
  ``run`` created (a run deletes its job when it returns, whatever its outcome). Nothing
  else removes a job (docs/protocol.md, "Job states"). A bulk's ok is Kafka's ack, not admission: the
  runner must wait until ``inspect bulk`` shows no backlog before the read-back.
- **lost-add** (live): a definite ``-NOT-FOUND`` from inspect, result, complete, fail or
  delete, invoked after an acknowledged add/schedule (or other acknowledged op) of the
  job returned, with no delete of it invoked before that read returned and its earliest
  expiry after the read returned. ``touch`` is left out on purpose: it answers
  ``-NOT-FOUND`` for a job that exists but is not LEASED (docs/protocol.md, "eventq extensions"). A bulk's
  ack is not a proof here (admission comes later).
- **undone-delete**: an ok delete removed the job, and the read-back still finds it
  (unless an op creating that id again was invoked after the delete was).
- **result-mismatch**: an ok result or run reply ``(flag, bytes)`` must be what some
  complete ``(1, bytes)`` or fail ``(0, bytes)`` of the job sent, among those not known
  to have failed and invoked before the reply returned, or ``(0, empty)`` (attempts
  used up); a result invoked after an ok complete of the job returned must be
  ``(1, that complete's bytes)`` (the job was final from then on: a second complete or a
  fail is refused); the read-back's result obeys the same two rules. Payloads and
  results are unique per op, so equal bytes name exactly one write.
- **double-grant**: two ok grants of one job whose grant moments both lie in a window
  shorter than the TTR minus ``TOLERANCE_S`` (``max(return) - min(invoke) < ttr -
  tolerance``): the earlier lease's TTR was still running at the later grant, so the
  job was handed out twice, unless a complete, fail or delete of the job (ok or info;
  or a touch with a shorter ``-ttr``) may have taken effect inside that window (invoked
  before the later return, effect possible after the earlier invoke): a fail with
  retries left makes the job ready again at once.
- **grant-after-end**: an ok grant invoked after an ok complete or an ok delete of the
  job returned: a final or deleted job is never ready again.
- **double-complete**: two ok completes of one job (the second must get
  ``Duplicate result``).
- **attempts-out-of-bounds**: for a job the read-back found, ``attempts`` counts its
  leases: at least its ok grants (an attempt handed to a client is never given back),
  at most those plus every info lease that named the job's queue (one of them may have
  taken it without telling). Likewise ``fails`` lies between its ok fails and its ok +
  info fails.
- **state-mismatch**: a COMPLETED job needs a complete of it that may have taken effect
  (ok or info); a job with an ok complete, not deleted and not expired, must be
  COMPLETED at the read-back.
- **phantom-grant**: an ok grant must hand out a job some op created (invoked before the
  grant returned) with that creator's queue, TTR and payload. This assumes the run's
  queues hold only the load's jobs (fresh topics, or queue names of this run).
- **digest-mismatch**: the live ``inspect digest`` differs from the digest folded from
  the command log.
- **slow-to-serve**: a fault after which some process took longer than the bound to
  serve again (or never did).
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations

from .history import (
    COMPLETED,
    CREATES,
    FAIL,
    FOUND,
    INFO,
    KINDS,
    NOT_FOUND,
    OK,
    OUTCOMES,
    Op,
    ReadBack,
)

TOLERANCE_S = 0.1  # clock skew between our monotonic clock and the broker's timestamps
SCHEDULE_ROUNDING_S = 1.0  # a schedule's time is whole seconds (see the docstring)

VIOLATION_KINDS = (
    "lost-add", "undone-delete", "result-mismatch", "double-grant", "grant-after-end",
    "double-complete", "attempts-out-of-bounds", "state-mismatch", "phantom-grant",
    "digest-mismatch", "slow-to-serve",
)


@dataclass(frozen=True)
class Violation:
    kind: str
    job_id: str | None
    ops: tuple[int, ...]  # indexes of the ops involved
    message: str


@dataclass(frozen=True)
class Creation:
    """What one creating op said about one job (a bulk op creates many)."""

    op: Op
    queue: str
    ttr_ms: int | None
    ttl_ms: int | None
    payload: bytes | None

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

    @property
    def made_by_run(self) -> bool:
        return any(c.op.kind == "run" for c in self.creations)

    @property
    def queue(self) -> str | None:
        return self.creations[0].queue if self.creations else None

    @property
    def earliest_expiry_s(self) -> float:
        return min((c.earliest_expiry_s for c in self.creations), default=math.inf)


# --- grouping -------------------------------------------------------------------------


def creations_of(op: Op) -> list[tuple[str, Creation]]:
    if op.kind == "bulk":
        return [(job.job_id, Creation(op, job.queue, job.ttr_ms, job.ttl_ms, job.payload))
                for job in op.args.jobs]
    if op.kind in CREATES and op.job_id is not None:
        queue = op.args.queues[0] if op.args.queues else ""
        return [(op.job_id, Creation(op, queue, op.args.ttr_ms, op.args.ttl_ms,
                                     op.args.payload))]
    return []


_SLOT_OF_KIND = {"touch": "touches", "complete": "completes", "fail": "fails",
                 "delete": "deletes", "result": "results", "run": "results",
                 "inspect": "inspects"}


def group_by_job(ops: Iterable[Op]) -> dict[str, JobOps]:
    slots: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for op in sorted(ops, key=lambda op: op.index):
        for job_id, creation in creations_of(op):
            slots[job_id]["creations"].append(creation)
        if op.kind == "lease":
            if op.outcome == OK and op.reply.job_id is not None:
                slots[op.reply.job_id]["grants"].append(op)
        elif op.kind in _SLOT_OF_KIND and op.job_id is not None:
            slots[op.job_id][_SLOT_OF_KIND[op.kind]].append(op)
    return {job_id: JobOps(job_id, **{k: tuple(v) for k, v in by_kind.items()})
            for job_id, by_kind in slots.items()}


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


def _may_have_effect(op: Op) -> bool:
    return op.outcome in (OK, INFO)


def _ok(ops: Iterable[Op]) -> list[Op]:
    return [op for op in ops if op.outcome == OK]


def _ids(*ops: Op) -> tuple[int, ...]:
    return tuple(sorted({op.index for op in ops}))


def _returned_before(op: Op, moment: float) -> bool:
    return op.return_s is not None and op.return_s < moment


def _is_not_found(op: Op) -> bool:
    return op.outcome == FAIL and (op.reply.error or "").startswith("-NOT-FOUND")


def existence_proofs(job: JobOps) -> list[Op]:
    """Acknowledged ops that show the job existed when they took effect. A bulk's ack
    is not one (the job exists only once the server admits the record)."""
    adds = [c.op for c in job.creations if c.op.kind in ("add", "schedule")]
    others = [*job.grants, *job.touches, *job.completes, *job.fails, *job.results,
              *job.inspects]
    return _ok([*adds, *(op for op in others if op.kind != "run")])


# --- the rules ------------------------------------------------------------------------


def lost_add_at_read_back(job: JobOps, read: ReadBack | None) -> list[Violation]:
    if read is None or read.status != NOT_FOUND or read.at_s is None:
        return []
    if job.deletes or job.made_by_run or not job.creations:
        return []
    proofs = existence_proofs(job) + _ok(c.op for c in job.creations if c.op.kind == "bulk")
    if not proofs or read.at_s >= job.earliest_expiry_s:
        return []
    return [Violation(
        "lost-add", job.job_id, _ids(*proofs),
        f"job {job.job_id} was acknowledged (op {proofs[0].index}, {proofs[0].kind}), never "
        f"deleted and not expired, yet the read-back at {read.at_s:.3f}s says NOT-FOUND",
    )]


def lost_add_seen_live(job: JobOps) -> list[Violation]:
    if job.made_by_run:
        return []
    proofs = existence_proofs(job)
    reads = [op for op in (*job.inspects, *job.results, *job.completes, *job.fails,
                           *job.deletes) if _is_not_found(op)]
    found = []
    for read in reads:
        earlier = [p for p in proofs if _returned_before(p, read.invoke_s)]
        if not earlier or read.return_s is None or read.return_s >= job.earliest_expiry_s:
            continue
        if any(d.invoke_s < read.return_s for d in job.deletes if d is not read):
            continue  # a delete racing the read may have removed the job first
        found.append(Violation(
            "lost-add", job.job_id, _ids(earlier[0], read),
            f"job {job.job_id} existed (op {earlier[0].index}, {earlier[0].kind}, returned "
            f"ok at {earlier[0].return_s:.3f}s) but op {read.index} ({read.kind}, invoked "
            f"at {read.invoke_s:.3f}s) got -NOT-FOUND with no delete in between",
        ))
    return found


def undone_deletes(job: JobOps, read: ReadBack | None) -> list[Violation]:
    if read is None or read.status != FOUND:
        return []
    found = []
    for delete in _ok(job.deletes):
        if any(c.op.invoke_s > delete.invoke_s for c in job.creations):
            continue  # the id was created again afterwards
        found.append(Violation(
            "undone-delete", job.job_id, _ids(delete),
            f"delete op {delete.index} of job {job.job_id} was acknowledged, yet the "
            f"read-back still finds the job (state {read.number('state')})",
        ))
    return found


def allowed_results(job: JobOps, before_s: float) -> set[tuple[bool, bytes]]:
    """Every (flag, bytes) a result replying at ``before_s`` may show."""
    allowed = {(False, b"")}  # failed by running out of attempts: an empty result
    for op in (*job.completes, *job.fails):
        if _may_have_effect(op) and op.invoke_s < before_s and op.args.result is not None:
            allowed.add((op.kind == "complete", op.args.result))
    return allowed


def _describe_result(flag: bool | None, data: bytes | None) -> str:
    return f"({int(bool(flag))}, {data!r})"


def _result_mismatch(job: JobOps, seen: tuple[bool, bytes], invoke_s: float,
                     return_s: float, where: str, ops: tuple[Op, ...]) -> Violation | None:
    settled = [c for c in _ok(job.completes) if _returned_before(c, invoke_s)]
    if settled:
        expected = {(True, c.args.result) for c in settled}
        if seen not in expected:
            return Violation(
                "result-mismatch", job.job_id, _ids(*ops, *settled),
                f"{where} shows {_describe_result(*seen)} for job {job.job_id}, but complete "
                f"op {settled[0].index} had already returned ok with "
                f"{_describe_result(True, settled[0].args.result)}",
            )
        return None
    if seen not in allowed_results(job, return_s):
        return Violation(
            "result-mismatch", job.job_id, _ids(*ops),
            f"{where} shows {_describe_result(*seen)} for job {job.job_id}, which no "
            "complete or fail of it invoked before then sent",
        )
    return None


def result_mismatches(job: JobOps, read: ReadBack | None) -> list[Violation]:
    found = []
    for op in _ok(job.results):
        if op.return_s is None:
            continue
        seen = (bool(op.reply.success), op.reply.data or b"")
        violation = _result_mismatch(job, seen, op.invoke_s, op.return_s,
                                     f"{op.kind} op {op.index}", (op,))
        if violation:
            found.append(violation)
    if read is not None and read.status == FOUND and read.result is not None:
        seen = (bool(read.result_ok), read.result)
        at = read.at_s if read.at_s is not None else math.inf
        violation = _result_mismatch(job, seen, at, math.inf, "the read-back", ())
        if violation:
            found.append(violation)
    return found


def _releases(job: JobOps) -> list[Op]:
    """Ops after which the job may legitimately be granted again before its TTR ends."""
    shortened = [t for t in job.touches if t.args.ttr_ms is not None]
    return [op for op in (*job.completes, *job.fails, *job.deletes, *shortened)
            if _may_have_effect(op)]


def _lease_ttr_ms(job: JobOps, *grants: Op) -> int | None:
    """The TTR the grants ran under: what the lease replies said, else the creator's."""
    said = [g.reply.ttr_ms for g in grants if g.reply.ttr_ms is not None]
    said = said or [c.ttr_ms for c in job.creations if c.ttr_ms is not None]
    return min(said, default=None)


def double_grants(job: JobOps) -> list[Violation]:
    found = []
    releases = _releases(job)
    for first, second in combinations(job.grants, 2):
        ttr_ms = _lease_ttr_ms(job, first, second)
        if ttr_ms is None:
            continue
        start = min(first.invoke_s, second.invoke_s)
        end = max(first.return_s, second.return_s)
        if end - start >= ttr_ms / 1000 - TOLERANCE_S:
            continue  # the first lease's TTR may have run out before the second grant
        if any(r.invoke_s < end and r.latest_effect_s > start for r in releases):
            continue
        found.append(Violation(
            "double-grant", job.job_id, _ids(first, second),
            f"job {job.job_id} was granted by lease ops {first.index} and {second.index} "
            f"within {end - start:.3f}s, under its TTR of {ttr_ms} ms, with no complete, "
            "fail or delete in between",
        ))
    return found


def grants_after_end(job: JobOps) -> list[Violation]:
    found = []
    ends = _ok((*job.completes, *job.deletes))
    for grant in job.grants:
        for end in ends:
            if _returned_before(end, grant.invoke_s):
                found.append(Violation(
                    "grant-after-end", job.job_id, _ids(end, grant),
                    f"lease op {grant.index} got job {job.job_id} after {end.kind} op "
                    f"{end.index} of it had returned ok",
                ))
                break
    return found


def double_completes(job: JobOps) -> list[Violation]:
    completes = _ok(job.completes)
    if len(completes) < 2:
        return []
    return [Violation(
        "double-complete", job.job_id, _ids(*completes),
        f"job {job.job_id} was completed ok {len(completes)} times "
        f"(ops {', '.join(str(op.index) for op in completes)})",
    )]


def attempts_out_of_bounds(job: JobOps, read: ReadBack | None,
                           unanswered_leases: UnansweredLeases) -> list[Violation]:
    if read is None or read.status != FOUND:
        return []
    found = []
    attempts, fails = read.number("attempts"), read.number("fails")
    at = read.at_s if read.at_s is not None else math.inf
    low = len(job.grants)
    high = low + unanswered_leases.count(job.queue, at)
    if attempts is not None and not low <= attempts <= high:
        found.append(Violation(
            "attempts-out-of-bounds", job.job_id, _ids(*job.grants),
            f"job {job.job_id} shows attempts {attempts}, outside [{low}, {high}] "
            f"({low} ok grants, {high - low} unanswered leases of its queue)",
        ))
    ok_fails = _ok(job.fails)
    info_fails = [op for op in job.fails if op.outcome == INFO]
    low, high = len(ok_fails), len(ok_fails) + len(info_fails)
    if fails is not None and not low <= fails <= high:
        found.append(Violation(
            "attempts-out-of-bounds", job.job_id, _ids(*ok_fails, *info_fails),
            f"job {job.job_id} shows fails {fails}, outside [{low}, {high}] "
            f"({low} ok fails, {high - low} indeterminate ones)",
        ))
    return found


def state_mismatches(job: JobOps, read: ReadBack | None) -> list[Violation]:
    if read is None or read.status != FOUND:
        return []
    state = read.number("state")
    completes = [op for op in job.completes if _may_have_effect(op)]
    if state == COMPLETED and not completes:
        return [Violation(
            "state-mismatch", job.job_id, (),
            f"job {job.job_id} is COMPLETED at the read-back, but no complete of it "
            "may have taken effect",
        )]
    acknowledged = _ok(job.completes)
    at = read.at_s if read.at_s is not None else -math.inf
    if (acknowledged and state != COMPLETED and not job.deletes
            and at < job.earliest_expiry_s):
        return [Violation(
            "state-mismatch", job.job_id, _ids(*acknowledged),
            f"complete op {acknowledged[0].index} of job {job.job_id} returned ok, yet the "
            f"read-back shows state {state}, not COMPLETED",
        )]
    return []


def _matches(creation: Creation, grant: Op) -> bool:
    return (creation.queue == grant.reply.name and creation.ttr_ms == grant.reply.ttr_ms
            and creation.payload == grant.reply.payload)


def phantom_grants(job: JobOps) -> list[Violation]:
    found = []
    for grant in job.grants:
        possible = [c for c in job.creations
                    if grant.return_s is None or c.op.invoke_s < grant.return_s]
        if not possible:
            found.append(Violation(
                "phantom-grant", job.job_id, _ids(grant),
                f"lease op {grant.index} got job {job.job_id}, which no op created before",
            ))
        elif not any(_matches(c, grant) for c in possible):
            found.append(Violation(
                "phantom-grant", job.job_id, _ids(grant, *(c.op for c in possible)),
                f"lease op {grant.index} got job {job.job_id} as ({grant.reply.name}, "
                f"ttr {grant.reply.ttr_ms}, {grant.reply.payload!r}), not as it was created",
            ))
    return found


def digest_mismatch(live_digest: str | None, log_digest: str | None) -> list[Violation]:
    if live_digest is None or log_digest is None or live_digest == log_digest:
        return []
    return [Violation(
        "digest-mismatch", None, (),
        f"the live digest {live_digest} differs from the digest of the command log "
        f"{log_digest}",
    )]


def slow_to_serve(serve_times: Iterable[tuple[str, float | None]] | Mapping[str, float | None],
                  bound_s: float) -> list[Violation]:
    items = serve_times.items() if isinstance(serve_times, Mapping) else serve_times
    found = []
    for fault, seconds in items:
        if seconds is None or seconds > bound_s:
            took = "never" if seconds is None else f"{seconds:.1f}s"
            found.append(Violation(
                "slow-to-serve", None, (),
                f"after {fault}, every process served again: {took} (bound {bound_s:g}s)",
            ))
    return found


# --- the whole check ------------------------------------------------------------------


def check_job(job: JobOps, read: ReadBack | None,
              unanswered_leases: UnansweredLeases = UnansweredLeases()) -> list[Violation]:
    return [
        *lost_add_at_read_back(job, read),
        *lost_add_seen_live(job),
        *undone_deletes(job, read),
        *result_mismatches(job, read),
        *double_grants(job),
        *grants_after_end(job),
        *double_completes(job),
        *attempts_out_of_bounds(job, read, unanswered_leases),
        *state_mismatches(job, read),
        *phantom_grants(job),
    ]


def check(
    history_ops: Iterable[Op],
    read_back: Mapping[str, ReadBack] | Iterable[ReadBack] = (),
    live_digest: str | None = None,
    log_digest: str | None = None,
    serve_times: Iterable[tuple[str, float | None]] | Mapping[str, float | None] = (),
    serve_bound_s: float = math.inf,
) -> list[Violation]:
    """Every violation of the history, ordered by kind (``VIOLATION_KINDS``) then job.
    ``None`` for a digest means it could not be taken (nothing is said about it)."""
    ops = sorted(history_ops, key=lambda op: op.index)
    reads = read_back if isinstance(read_back, Mapping) else {r.job_id: r for r in read_back}
    jobs = group_by_job(ops)
    unanswered = leases_without_answer(ops)
    violations: list[Violation] = []
    for job_id in sorted(set(jobs) | set(reads)):
        job = jobs.get(job_id, JobOps(job_id))
        violations += check_job(job, reads.get(job_id), unanswered)
    violations += digest_mismatch(live_digest, log_digest)
    violations += slow_to_serve(serve_times, serve_bound_s)
    order = {kind: n for n, kind in enumerate(VIOLATION_KINDS)}
    violations.sort(key=lambda v: (order[v.kind], v.job_id or "", v.ops))
    from .workload_rules import check_workload  # it imports this module: not at the top
    return check_workload(ops, reads, violations)


# --- summaries ------------------------------------------------------------------------


@dataclass(frozen=True)
class Summary:
    """Op counts per kind and outcome (``counts[kind][outcome]``)."""

    counts: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(sum(by_outcome.values()) for by_outcome in self.counts.values())

    def outcome_total(self, outcome: str) -> int:
        return sum(by_outcome.get(outcome, 0) for by_outcome in self.counts.values())

    def text(self) -> str:
        lines = [f"{'kind':<9} {'ok':>7} {'fail':>7} {'info':>7}"]
        for kind in KINDS:
            row = self.counts.get(kind)
            if row:
                lines.append(f"{kind:<9} " + " ".join(f"{row.get(o, 0):>7}" for o in OUTCOMES))
        lines.append(f"{'all':<9} " + " ".join(f"{self.outcome_total(o):>7}" for o in OUTCOMES))
        return "\n".join(lines)


def summary(ops: Iterable[Op]) -> Summary:
    counts: dict[str, Counter] = defaultdict(Counter)
    for op in ops:
        counts[op.kind][op.outcome] += 1
    return Summary({kind: dict(counter) for kind, counter in counts.items()})


def violations_text(violations: Sequence[Violation]) -> str:
    if not violations:
        return "no violations"
    return "\n".join(f"{v.kind}: {v.message} (ops {list(v.ops)})" for v in violations)


__all__ = [
    "TOLERANCE_S", "VIOLATION_KINDS", "Violation", "Creation", "JobOps", "group_by_job",
    "UnansweredLeases", "leases_without_answer", "existence_proofs", "allowed_results",
    "lost_add_at_read_back", "lost_add_seen_live", "undone_deletes", "result_mismatches",
    "double_grants", "grants_after_end", "double_completes", "attempts_out_of_bounds",
    "state_mismatches", "phantom_grants", "digest_mismatch", "slow_to_serve", "check_job",
    "check", "Summary", "summary", "violations_text",
]
