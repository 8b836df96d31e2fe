"""The checker's rules on reads of one job (result, inspect, run replies, and the
read-back), judged per job as a linearizable register: jobs are independent keys, and an
ok write that returned before a read was invoked took effect before the read did. The
rules are listed, with why each is sound, in checker.py's docstring.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping

from eventq.limits import MAX_ATTEMPTS_LIMIT

from .history import COMPLETED, FAILED, FOUND, OK, Op, ReadBack
from .jobops import (
    JobOps,
    UnansweredLeases,
    final_fails,
    ids,
    may_have_effect,
    ok_ops,
    returned_before,
    revived_between,
)
from .logview import JobLog
from .violation import Violation

MAX_GRAPH_DEPTH = 100  # upstream chains followed this deep (a cycle is cut there)
EXHAUSTING_EVENTS = ("ATTEMPTS_EXHAUSTED",)  # and a timeout that does not requeue


def attempts_exhausted(job: JobOps, log: JobLog | None, unanswered: UnansweredLeases,
                       before_s: float) -> bool:
    """Whether the job may have run out of attempts (then FAILED with an empty result):
    the log shows it did, or, without the log, its ok grants and every lease of its
    queue that may have spent an attempt unseen reach the attempt limit (the load sets
    no -max-attempts: the hard cap)."""
    if log is not None:
        return any(e.accepted and (e.event in EXHAUSTING_EVENTS or (
            e.event == "ATTEMPT_TIMED_OUT" and e.requeued is False)) for e in log.entries)
    possible = len(job.grants) + unanswered.count(job.queue, before_s)
    return possible >= MAX_ATTEMPTS_LIMIT


UPSTREAM_REASONS = ("failed", "deleted", "evicted")  # docs/workflows.md, "Dependencies"


def upstream_failure(upstream: str, reason: str) -> tuple[bool, bytes]:
    """The result of a dependent an upstream ended: ``(0, upstream <id> <reason>)``,
    the id as the server spells it (a canonical UUID)."""
    try:
        spelled = str(uuid.UUID(upstream))
    except ValueError:
        spelled = upstream
    return False, f"upstream {spelled} {reason}".encode()


def may_end_uncompleted(jobs: Mapping[str, JobOps], job_id: str, last_s: float,
                        depth: int = 0) -> tuple[str, ...]:
    """The reasons an upstream may have ended without completing (docs/workflows.md,
    "Dependencies"): ``failed`` if a fail of it may have taken effect or one of its own
    upstreams may have ended so (it fails with it), ``deleted`` if a delete may have,
    ``evicted`` if its TTL may have run out before ``last_s``; all of them when no op
    surely created it (what became of it is unknown)."""
    job = jobs.get(job_id)
    if job is None or depth > MAX_GRAPH_DEPTH or not any(
            c.op.outcome == OK for c in job.creations):
        return UPSTREAM_REASONS
    reasons = []
    if any(may_have_effect(op) for op in job.fails) or any(
            may_end_uncompleted(jobs, up, last_s, depth + 1) for up in job.after):
        reasons.append("failed")
    if any(may_have_effect(op) for op in job.deletes):
        reasons.append("deleted")
    if job.earliest_expiry_s < last_s:
        reasons.append("evicted")
    return tuple(reasons)


def upstream_results(jobs: Mapping[str, JobOps], job: JobOps,
                     last_s: float) -> frozenset[tuple[bool, bytes]]:
    """The results a dependent may have without any complete or fail of its own: one
    naming an upstream that may have ended uncompleted, with a reason it may have."""
    return frozenset(upstream_failure(up, reason) for up in job.after
                     for reason in may_end_uncompleted(jobs, up, last_s))


def allowed_results(job: JobOps, before_s: float, exhausted: bool = True,
                    upstreams: frozenset[tuple[bool, bytes]] = frozenset(),
                    ) -> set[tuple[bool, bytes]]:
    """Every (flag, bytes) a result replying at ``before_s`` may show: what a complete
    or fail that may have taken effect by then sent, ``(0, empty)`` when the attempts
    may have run out (``exhausted``), or a failure an upstream may have handed down
    (``upstreams``: ``upstream_results``)."""
    allowed = set(upstreams) | ({(False, b"")} if exhausted else set())
    for op in (*job.completes, *job.fails):
        if may_have_effect(op) and op.invoke_s < before_s and op.args.result is not None:
            allowed.add((op.kind == "complete", op.args.result))
    return allowed


def _describe_result(flag: bool | None, data: bytes | None) -> str:
    return f"({int(bool(flag))}, {data!r})"


def _settled(job: JobOps, invoke_s: float, return_s: float) -> tuple[list[Op], bool]:
    """Ok ends that returned before ``invoke_s`` and the flag they fix the result to:
    a job completed keeps that result for good (a second complete or fail is refused as
    a duplicate); a job failed for good keeps it unless a revival may have landed
    before the read returned (a retry clears the result, docs/workflows.md, "retry")."""
    completes = [c for c in ok_ops(job.completes) if returned_before(c, invoke_s)]
    if completes:
        return completes, True
    return [f for f in final_fails(job) if returned_before(f, invoke_s)
            and not revived_between(job, f.invoke_s, return_s)], False


def _result_mismatch(job: JobOps, seen: tuple[bool, bytes], invoke_s: float, return_s: float,
                     where: str, ops: tuple[Op, ...], exhausted: bool,
                     upstreams: frozenset[tuple[bool, bytes]]) -> Violation | None:
    settled, flag = _settled(job, invoke_s, return_s)
    if settled:
        if seen not in {(flag, op.args.result) for op in settled}:
            return Violation(
                "result-mismatch", job.job_id, ids(*ops, *settled),
                f"{where} shows {_describe_result(*seen)} for job {job.job_id}, but "
                f"{settled[0].kind} op {settled[0].index} had already returned ok with "
                f"{_describe_result(flag, settled[0].args.result)}")
        return None
    if seen not in allowed_results(job, return_s, exhausted, upstreams):
        return Violation(
            "result-mismatch", job.job_id, ids(*ops),
            f"{where} shows {_describe_result(*seen)} for job {job.job_id}, which no "
            "complete or fail of it invoked before then sent"
            + ("" if exhausted else " (and its attempts cannot have run out)"))
    return None


def result_mismatches(job: JobOps, read: ReadBack | None, log: JobLog | None = None,
                      unanswered: UnansweredLeases = UnansweredLeases(),
                      upstreams: frozenset[tuple[bool, bytes]] = frozenset(),
                      ) -> list[Violation]:
    """``upstreams``: the failures the job's upstreams may have handed it
    (``upstream_results``)."""
    found = []
    for op in ok_ops(job.results):
        if op.return_s is None:
            continue
        seen = (bool(op.reply.success), op.reply.data or b"")
        exhausted = attempts_exhausted(job, log, unanswered, op.return_s)
        violation = _result_mismatch(job, seen, op.invoke_s, op.return_s,
                                     f"{op.kind} op {op.index}", (op,), exhausted, upstreams)
        if violation:
            found.append(violation)
    if read is not None and read.status == FOUND and read.result is not None:
        seen = (bool(read.result_ok), read.result)
        at = read.at_s if read.at_s is not None else math.inf
        exhausted = attempts_exhausted(job, log, unanswered, at)
        violation = _result_mismatch(job, seen, at, math.inf, "the read-back", (), exhausted,
                                     upstreams)
        if violation:
            found.append(violation)
    return found


def _is_timeout(op: Op) -> bool:
    return (op.reply.error or "").startswith("-TIMEOUT")


def _state_of(op: Op) -> int | None:
    value = op.reply.field("state")
    return None if value is None else int(value)


def stale_reads(job: JobOps) -> list[Violation]:
    """A read invoked after the job was final (an ok complete, or an ok fail that was
    certainly final and that no revival may have undone before the read returned,
    returned) that shows it unfinished: a result answered -TIMEOUT
    (it waits only while the job is unfinished), an inspect showing another state."""
    found = []
    ends = [*ok_ops(job.completes), *final_fails(job)]
    for read in (*job.results, *job.inspects):
        end = next((e for e in ends if returned_before(e, read.invoke_s) and not (
            e.kind == "fail" and revived_between(job, e.invoke_s, read.return_s))), None)
        if end is None:
            continue
        final = COMPLETED if end.kind == "complete" else FAILED
        if read.kind != "inspect" and _is_timeout(read):
            said = "-TIMEOUT"
        elif read.kind == "inspect" and read.outcome == OK and _state_of(read) not in (
                None, final):
            said = f"state {_state_of(read)}"
        else:
            continue
        found.append(Violation(
            "stale-read", job.job_id, ids(end, read),
            f"{read.kind} op {read.index} of job {job.job_id} said {said} after {end.kind} "
            f"op {end.index} had returned ok (the job was final)"))
    return found


def alive_after_delete(job: JobOps) -> list[Violation]:
    """An ok touch, complete, fail, inspect or result invoked after an ok delete of the
    job returned (and no op creating the id again was invoked after that delete)."""
    found = []
    for delete in ok_ops(job.deletes):
        if any(c.op.invoke_s > delete.invoke_s for c in job.creations):
            continue
        for op in ok_ops((*job.touches, *job.completes, *job.fails, *job.inspects,
                          *job.results)):
            if op.kind != "run" and returned_before(delete, op.invoke_s):
                found.append(Violation(
                    "alive-after-delete", job.job_id, ids(delete, op),
                    f"{op.kind} op {op.index} of job {job.job_id} returned ok after delete "
                    f"op {delete.index} of it had returned ok"))
    return found


__all__ = ["UPSTREAM_REASONS", "upstream_failure", "may_end_uncompleted", "upstream_results",
           "attempts_exhausted", "allowed_results", "result_mismatches", "stale_reads",
           "alive_after_delete"]
