"""The fault campaign's checker: a pure function from a run's history (ops, read-back,
digests, serve times) and the command log's view of its jobs (logview.py) to the
violations in it.

``check`` groups the ops per job (jobops.py) and runs one small rule per kind of
violation: the rules below in client time (here and readrules.py), and the rules in log
time (logrules.py, listed there with why each is sound: log-overlapping-grant,
log-grant-after-end, log-grant-before-ready, log-grant-after-ttl, log-early-timeout,
log-early-expiry, unlogged-ack, unexplained-grant). Each
rule trusts only what the outcomes guarantee (history.py): an ``ok`` op took effect
somewhere between its invoke and its return; a ``fail`` op had no effect; an ``info``
op may have taken effect at any moment after its invoke, even after its (error) reply
(``Op.latest_effect_s``). Job ids are unique per creating op (the load draws fresh
UUIDs), so a job's ops never mix two incarnations of one id. A FAILED job may run
again under its id (docs/workflows.md, "retry"): a **revival** of a job is a
``retry`` of it, a ``retry-group`` of a group a fail of it named (or of a group it may
be in unnamed), or a revival of an upstream of it (it retries the dependents it
failed), ok or info (jobops.py ``revived_between``); every rule below that takes a
final fail as final asks whether one may have landed in between. A recurrence's slot
job is created by the server from its ``recur`` (workload_rules.py ``slot_recurs``):
that op is its creator here. TTLs are judged by their
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
- **result-mismatch** (readrules.py): an ok result or run reply ``(flag, bytes)`` must
  be what some complete ``(1, bytes)`` or fail ``(0, bytes)`` of the job sent, among
  those not known to have failed and invoked before the reply returned, or ``(0,
  empty)`` only when the attempts may have run out (the log shows attempts exhausted or
  a last attempt timed out; without the log, the ok grants and the leases of its queue
  that may have spent one unseen reach the attempt limit), or, for a dependent, ``(0,
  upstream <id> <reason>)`` naming an upstream that may have ended so (failed,
  deleted, evicted: readrules.py ``upstream_results``); a result invoked after an ok
  complete (or an ok fail that was certainly final: ``jobops.final_fails``, with no
  revival before the result returned) of the job returned must be that op's ``(flag,
  bytes)`` (the job was final from then on: a second complete or fail is refused);
  the read-back's result obeys the same rules. Payloads and results are unique per
  request (a request repeated after an indeterminate reply sends the same bytes: it is
  the same write), so equal bytes name exactly one write.
- **stale-read** (readrules.py): a result invoked after the job was final (an ok
  complete, or a certainly final ok fail with no revival before the read returned,
  returned) answered ``-TIMEOUT`` (a result
  waits only while the job is unfinished), or an ok inspect invoked then shows any
  state but the final one. Jobs are independent registers: an ok write that returned
  before a read was invoked is visible to it (docs/protocol.md, "Job states").
- **alive-after-delete** (readrules.py): an ok touch, complete, fail, inspect or result
  invoked after an ok delete of the job returned, and no op creating the id again
  invoked after that delete: a deleted job is absent (``-NOT-FOUND``) from then on.
- **double-grant**: two ok grants of one job whose grant moments both lie in a window
  shorter than the TTR minus ``TOLERANCE_S`` (``max(return) - min(invoke) < ttr -
  tolerance``): the earlier lease's TTR was still running at the later grant, so the
  job was handed out twice, unless a fail that may leave retries (the job's -max-fails
  is 2 or more; ok or info) or a touch with a shorter ``-ttr`` may have taken effect
  inside that window (invoked before the later return, effect possible after the
  earlier invoke), or a fail and a revival both may have (a retry makes a FAILED job
  ready again). A complete, a delete or a final fail alone never excuses it: none
  makes the job ready again. Under faults latencies pass the TTR and this rule sees little:
  unexplained-grant and log-overlapping-grant (logrules.py) judge grants in log time.
- **grant-after-end**: an ok grant invoked after an ok complete, an ok delete or a
  certainly final ok fail of the job returned (the fail: with no revival of the job
  invoked before the grant returned whose effect may come after the fail's invoke): a
  completed or deleted job is never ready again, a failed one only by a retry.
- **double-complete**: two ok completes of one job (the second must get
  ``Duplicate result``).
- **attempts-out-of-bounds**: for a job the read-back found, ``attempts`` counts its
  leases since its last retry (a retry sets it to 0): at least its ok grants invoked
  after every revival surely landed (an attempt handed to a client is never given
  back), at most the highest attempt the log accepted a start-attempt of since its last
  accepted retry or add (logrules.py ``reopens``; the log is read after the read-back;
  attempts only grow by start-attempts). Without the log, at most the ok grants plus
  every lease of the job's queue that may have spent an attempt unseen (a loose
  bound). Likewise ``fails`` lies between its ok fails after every revival and its ok
  + info fails.
- **state-mismatch**: a COMPLETED job needs a complete of it that may have taken effect
  (ok or info); a job with an ok complete, not deleted and not expired, must be
  COMPLETED at the read-back.
- **phantom-grant**: an ok grant must hand out a job some op created (invoked before the
  grant returned) with that creator's queue, TTR and payload; a recurrence's slot job
  is created by a ``recur`` that may have defined the slot (ok or info), with its
  queue, TTR and payload. This assumes the run's queues hold only the load's jobs
  (fresh topics, or queue names of this run).
- **digest-mismatch**: the live ``inspect digest`` differs from the digest folded from
  the command log; **digest-missing**: one of them could not be taken (a check that
  could not be made is not a check that passed).
- **read-back-unknown**: the read-back got no definite answer about a job: nothing
  about it was checked at the end of the run.
- the log-time rules judge a job only when the log view was read for it
  (``LogView.covers``): an empty log of a job nobody read proves nothing.
- **run-not-started**: fewer acknowledged ops than the campaign asks (``min_ok_ops``):
  a run that tested nothing must not pass.
- **slow-to-serve**: a fault after which some process took longer than the bound to
  serve again (or never did).
"""

from __future__ import annotations

import math
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

from .history import COMPLETED, FOUND, INFO, KINDS, NOT_FOUND, OK, OUTCOMES, UNKNOWN, Op, ReadBack
from .jobops import (
    Creation,
    JobOps,
    UnansweredLeases,
    certainly_after_revivals,
    existence_proofs,
    fails_may_retry,
    final_fails,
    group_by_job,
    ids,
    is_not_found,
    leases_without_answer,
    may_have_effect,
    ok_ops,
    returned_before,
    revived_between,
)
from .logrules import LOG_KINDS, history_against_log, log_violations, reopens
from .logview import JobLog, LogView
from .readrules import (
    alive_after_delete,
    allowed_results,
    result_mismatches,
    stale_reads,
    upstream_results,
)
from .violation import Violation
from .workload_rules import check_workload, slot_recurs

TOLERANCE_S = 0.1  # clock skew between our monotonic clock and the broker's timestamps

VIOLATION_KINDS = (
    "run-not-started", "read-back-unknown", "lost-add", "undone-delete", "result-mismatch",
    "stale-read", "alive-after-delete", "double-grant", "grant-after-end",
    "double-complete", "attempts-out-of-bounds", "state-mismatch", "phantom-grant",
    *LOG_KINDS, "digest-missing", "digest-mismatch", "slow-to-serve",
)


# --- the rules ------------------------------------------------------------------------


def lost_add_at_read_back(job: JobOps, read: ReadBack | None) -> list[Violation]:
    if read is None or read.status != NOT_FOUND or read.at_s is None:
        return []
    if job.deletes or job.made_by_run or not job.creations:
        return []
    proofs = existence_proofs(job) + ok_ops(c.op for c in job.creations if c.op.kind == "bulk")
    if not proofs or read.at_s >= job.earliest_expiry_s:
        return []
    return [Violation(
        "lost-add", job.job_id, ids(*proofs),
        f"job {job.job_id} was acknowledged (op {proofs[0].index}, {proofs[0].kind}), never "
        f"deleted and not expired, yet the read-back at {read.at_s:.3f}s says NOT-FOUND",
    )]


def lost_add_seen_live(job: JobOps) -> list[Violation]:
    if job.made_by_run:
        return []
    proofs = existence_proofs(job)
    reads = [op for op in (*job.inspects, *job.results, *job.completes, *job.fails,
                           *job.deletes) if is_not_found(op)]
    found = []
    for read in reads:
        earlier = [p for p in proofs if returned_before(p, read.invoke_s)]
        if not earlier or read.return_s is None or read.return_s >= job.earliest_expiry_s:
            continue
        if any(d.invoke_s < read.return_s for d in job.deletes if d is not read):
            continue  # a delete racing the read may have removed the job first
        found.append(Violation(
            "lost-add", job.job_id, ids(earlier[0], read),
            f"job {job.job_id} existed (op {earlier[0].index}, {earlier[0].kind}, returned "
            f"ok at {earlier[0].return_s:.3f}s) but op {read.index} ({read.kind}, invoked "
            f"at {read.invoke_s:.3f}s) got -NOT-FOUND with no delete in between",
        ))
    return found


def undone_deletes(job: JobOps, read: ReadBack | None) -> list[Violation]:
    if read is None or read.status != FOUND:
        return []
    found = []
    for delete in ok_ops(job.deletes):
        if any(c.op.invoke_s > delete.invoke_s for c in job.creations):
            continue  # the id was created again afterwards
        found.append(Violation(
            "undone-delete", job.job_id, ids(delete),
            f"delete op {delete.index} of job {job.job_id} was acknowledged, yet the "
            f"read-back still finds the job (state {read.number('state')})",
        ))
    return found


def _releases(job: JobOps) -> list[Op]:
    """Ops after which the job may be granted again before its TTR ends: a fail that
    may leave retries (ok or info), and a touch with a shorter ``-ttr``. A complete, a
    final fail or a delete never does: the job is final or gone from then on (a final
    fail until a revival: ``_revived_in``)."""
    fails = list(job.fails) if fails_may_retry(job) else []
    shortened = [t for t in job.touches if t.args.ttr_ms is not None]
    return [op for op in (*fails, *shortened) if may_have_effect(op)]


def _revived_in(job: JobOps, start: float, end: float) -> bool:
    """A fail and then a revival (a retry of the FAILED job) may both have taken effect
    inside the window: the job may have been ready again (docs/workflows.md, "retry")."""
    fails = [f for f in job.fails if may_have_effect(f) and f.invoke_s < end
             and f.latest_effect_s > start]
    return bool(fails) and revived_between(job, min(f.invoke_s for f in fails), end)


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
        if ttr_ms is None or first.return_s is None or second.return_s is None:
            continue
        start = min(first.invoke_s, second.invoke_s)
        end = max(first.return_s, second.return_s)
        if end - start >= ttr_ms / 1000 - TOLERANCE_S:
            continue  # the first lease's TTR may have run out before the second grant
        if any(r.invoke_s < end and r.latest_effect_s > start for r in releases):
            continue
        if _revived_in(job, start, end):
            continue
        found.append(Violation(
            "double-grant", job.job_id, ids(first, second),
            f"job {job.job_id} was granted by lease ops {first.index} and {second.index} "
            f"within {end - start:.3f}s, under its TTR of {ttr_ms} ms, with no fail that "
            "could leave retries in between",
        ))
    return found


def grants_after_end(job: JobOps) -> list[Violation]:
    """A complete or a delete ends the job for good; a final fail until a revival that
    may have landed before the grant returned (``revived_between``)."""
    found = []
    ends = [*ok_ops((*job.completes, *job.deletes)), *final_fails(job)]
    for grant in job.grants:
        for end in ends:
            if end.kind == "fail" and revived_between(job, end.invoke_s, grant.return_s):
                continue
            if returned_before(end, grant.invoke_s):
                found.append(Violation(
                    "grant-after-end", job.job_id, ids(end, grant),
                    f"lease op {grant.index} got job {job.job_id} after {end.kind} op "
                    f"{end.index} of it had returned ok",
                ))
                break
    return found


def double_completes(job: JobOps) -> list[Violation]:
    completes = ok_ops(job.completes)
    if len(completes) < 2:
        return []
    return [Violation(
        "double-complete", job.job_id, ids(*completes),
        f"job {job.job_id} was completed ok {len(completes)} times "
        f"(ops {', '.join(str(op.index) for op in completes)})",
    )]


def _attempts_high(job: JobOps, log: JobLog | None, unanswered: UnansweredLeases,
                   at: float) -> tuple[int, str]:
    """The most attempts the job can show: the highest attempt the log accepted a
    start-attempt of (since its last retry), else every lease of its queue that may
    have spent one unseen."""
    if log is None:
        extra = unanswered.count(job.queue, at)
        return len(job.grants) + extra, f"{extra} unanswered leases of its queue"
    started = 0
    for entry in log.entries:
        if reopens(entry):
            started = 0
        elif entry.accepted and entry.event == "ATTEMPT_STARTED":
            started = max(started, entry.attempt or 0)
    return started, f"the log accepted start-attempts up to attempt {started}"


def attempts_out_of_bounds(job: JobOps, read: ReadBack | None,
                           unanswered_leases: UnansweredLeases = UnansweredLeases(),
                           log: JobLog | None = None) -> list[Violation]:
    if read is None or read.status != FOUND:
        return []
    found = []
    attempts, fails = read.number("attempts"), read.number("fails")
    at = read.at_s if read.at_s is not None else math.inf
    # A retry sets both counts to 0: only what surely came after every revival counts
    # towards the lower bounds (the upper ones count every run of the job).
    low = len(certainly_after_revivals(job, job.grants))
    high, why = _attempts_high(job, log, unanswered_leases, at)
    if attempts is not None and not low <= attempts <= max(high, low):
        found.append(Violation(
            "attempts-out-of-bounds", job.job_id, ids(*job.grants),
            f"job {job.job_id} shows attempts {attempts}, outside [{low}, {max(high, low)}] "
            f"({low} ok grants after every retry; {why})",
        ))
    ok_fails = ok_ops(job.fails)
    info_fails = [op for op in job.fails if op.outcome == INFO]
    low = len(certainly_after_revivals(job, ok_fails))
    high = len(ok_fails) + len(info_fails)
    if fails is not None and not low <= fails <= high:
        found.append(Violation(
            "attempts-out-of-bounds", job.job_id, ids(*ok_fails, *info_fails),
            f"job {job.job_id} shows fails {fails}, outside [{low}, {high}] "
            f"({len(ok_fails)} ok fails, {low} of them after every retry; "
            f"{len(info_fails)} indeterminate ones)",
        ))
    return found
def state_mismatches(job: JobOps, read: ReadBack | None) -> list[Violation]:
    if read is None or read.status != FOUND:
        return []
    state = read.number("state")
    completes = [op for op in job.completes if may_have_effect(op)]
    if state == COMPLETED and not completes:
        return [Violation(
            "state-mismatch", job.job_id, (),
            f"job {job.job_id} is COMPLETED at the read-back, but no complete of it "
            "may have taken effect",
        )]
    acknowledged = ok_ops(job.completes)
    at = read.at_s if read.at_s is not None else -math.inf
    if (acknowledged and state != COMPLETED and not job.deletes
            and at < job.earliest_expiry_s):
        return [Violation(
            "state-mismatch", job.job_id, ids(*acknowledged),
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
                "phantom-grant", job.job_id, ids(grant),
                f"lease op {grant.index} got job {job.job_id}, which no op created before",
            ))
        elif not any(_matches(c, grant) for c in possible):
            found.append(Violation(
                "phantom-grant", job.job_id, ids(grant, *(c.op for c in possible)),
                f"lease op {grant.index} got job {job.job_id} as ({grant.reply.name}, "
                f"ttr {grant.reply.ttr_ms}, {grant.reply.payload!r}), not as it was created",
            ))
    return found


class _NotTaken:
    """The default of a digest ``check`` is not asked about (unit tests of other rules)."""

    def __repr__(self) -> str:
        return "NOT_TAKEN"


NOT_TAKEN: Any = _NotTaken()


def digest_mismatch(live_digest: str | None, log_digest: str | None) -> list[Violation]:
    """The two digests differ; one that could not be taken (None) is a digest-missing:
    a check that cannot be made must not pass as one that passed."""
    if live_digest is NOT_TAKEN or log_digest is NOT_TAKEN:
        return []
    missing = [name for name, digest in (("live", live_digest), ("log", log_digest))
               if digest is None]
    if missing:
        return [Violation("digest-missing", None, (),
                          f"the {' and '.join(missing)} digest could not be taken")]
    if live_digest == log_digest:
        return []
    return [Violation(
        "digest-mismatch", None, (),
        f"the live digest {live_digest} differs from the digest of the command log "
        f"{log_digest}",
    )]


def read_back_unknown(read: ReadBack | None) -> list[Violation]:
    if read is None or read.status != UNKNOWN:
        return []
    return [Violation("read-back-unknown", read.job_id, (),
                      f"the read-back got no definite answer about job {read.job_id}")]


def run_not_started(ops: Sequence[Op], min_ok_ops: int) -> list[Violation]:
    acknowledged = sum(op.outcome == OK for op in ops)
    if acknowledged >= min_ok_ops:
        return []
    return [Violation("run-not-started", None, (),
                      f"{acknowledged} ops of the run were acknowledged ({len(ops)} ops), "
                      f"fewer than the {min_ok_ops} a run must have: it tested nothing")]


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
              unanswered_leases: UnansweredLeases = UnansweredLeases(),
              log: JobLog | None = None,
              upstreams: frozenset[tuple[bool, bytes]] = frozenset()) -> list[Violation]:
    """Every rule on one job; the log-time ones only when ``log`` is given.
    ``upstreams``: the failures its upstreams may have handed it (readrules.py)."""
    found = [
        *read_back_unknown(read),
        *lost_add_at_read_back(job, read),
        *lost_add_seen_live(job),
        *undone_deletes(job, read),
        *result_mismatches(job, read, log, unanswered_leases, upstreams),
        *stale_reads(job),
        *alive_after_delete(job),
        *double_grants(job),
        *grants_after_end(job),
        *double_completes(job),
        *attempts_out_of_bounds(job, read, unanswered_leases, log),
        *state_mismatches(job, read),
        *phantom_grants(job),
    ]
    if log is not None:
        others = (*(c.op for c in job.creations), *job.completes, *job.fails, *job.deletes)
        found += log_violations(log)
        found += history_against_log(job.grants, others, log)
    return found


def _log_key(job_id: str) -> str:
    """A job id as the log view spells it (the UUID's canonical text)."""
    try:
        return str(uuid.UUID(job_id))
    except ValueError:
        return job_id


def check(
    history_ops: Iterable[Op],
    read_back: Mapping[str, ReadBack] | Iterable[ReadBack] = (),
    live_digest: str | None = NOT_TAKEN,
    log_digest: str | None = NOT_TAKEN,
    serve_times: Iterable[tuple[str, float | None]] | Mapping[str, float | None] = (),
    serve_bound_s: float = math.inf,
    log: LogView | None = None,
    min_ok_ops: int = 0,
) -> list[Violation]:
    """Every violation of the history, ordered by kind (``VIOLATION_KINDS``) then job.
    A digest passed as None could not be taken (a digest-missing); one not passed is
    not asked about. ``log``: the command log's view of the run's jobs (logview.py),
    read after the read-back; without it the log-time rules are not run. A run with
    fewer than ``min_ok_ops`` acknowledged ops did not start (a campaign asks for 1)."""
    ops = sorted(history_ops, key=lambda op: op.index)
    reads = read_back if isinstance(read_back, Mapping) else {r.job_id: r for r in read_back}
    jobs = group_by_job(ops, slot_recurs(ops))
    unanswered = leases_without_answer(ops)
    last_s = max((op.return_s or op.invoke_s for op in ops), default=0.0)
    violations: list[Violation] = run_not_started(ops, min_ok_ops)
    job_ids = set(jobs) | set(reads)
    if log is not None:
        known = {_log_key(j) for j in job_ids}
        job_ids |= {j for j in log.jobs if j not in known}
    for job_id in sorted(job_ids):
        job = jobs.get(job_id, JobOps(job_id))
        key = _log_key(job_id)
        # a job the log was not read for (a recurrence's slot job the campaign did not
        # ask about) is judged without it: an empty log there proves nothing
        job_log = log.job(key) if log is not None and log.covers(key) else None
        violations += check_job(job, reads.get(job_id), unanswered, job_log,
                                upstream_results(jobs, job, last_s))
    violations += digest_mismatch(live_digest, log_digest)
    violations += slow_to_serve(serve_times, serve_bound_s)
    order = {kind: n for n, kind in enumerate(VIOLATION_KINDS)}
    violations.sort(key=lambda v: (order[v.kind], v.job_id or "", v.ops))
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
    "check", "Summary", "summary", "violations_text", "NOT_TAKEN", "stale_reads",
    "alive_after_delete", "read_back_unknown", "run_not_started",
]
