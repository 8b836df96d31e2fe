"""The checker: for each rule, a small history that breaks it (reported exactly) and a
near miss that must not be; then histories generated from a tiny correct model of the
queue, which must never be reported."""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass, field, replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.fault_history import (
    CONNECTION_LOST,
    MAY_TAKE_EFFECT,
    NOT_WRITTEN,
    TTL_MS,
    History,
    found,
    kinds_of,
    not_found,
    only,
    payload_of,
)
from tools.faults.checker import check, summary, violations_text
from tools.faults.history import (
    COMPLETED,
    FAIL,
    FAILED,
    INFO,
    LEASED,
    NEW,
    OK,
    PENDING,
    Args,
    BulkJob,
    Op,
    ReadBack,
    Reply,
    classify,
    op_from_json,
    op_to_json,
)

# --- lost-add -------------------------------------------------------------------------


def test_an_acknowledged_add_the_read_back_cannot_find_is_lost():
    h = History()
    add = h.add("j", (0, 1))
    v = only(check(h.ops, [not_found("j")]), "lost-add")
    assert v.job_id == "j" and v.ops == (add.index,)


def test_a_lost_schedule_and_a_lost_bulk_job_are_lost_adds_too():
    h = History()
    h.add("s", (0, 1), kind="schedule")
    h.bulk(["b1", "b2"], (0, 1))
    violations = check(h.ops, [not_found("s"), found("b1"), not_found("b2")])
    assert [(v.kind, v.job_id) for v in violations] == [("lost-add", "b2"), ("lost-add", "s")]


def test_an_indeterminate_add_proven_by_a_later_grant_is_lost_if_not_found():
    h = History()
    h.add("j", (0, None), outcome=INFO)
    grant = h.lease("j", (2, 3))
    h.complete("j", (3, 4))
    v = only(check(h.ops, [not_found("j")]), "lost-add")
    assert grant.index in v.ops


@pytest.mark.parametrize("case", ["add info", "delete info", "delete fail", "ttl passed",
                                  "run", "schedule ttl minus rounding"])
def test_near_misses_of_a_lost_add_at_read_back(case):
    h = History()
    read = not_found("j", at=100.0)
    if case == "add info":
        h.add("j", (0, None), outcome=INFO)
    elif case == "run":
        h.run("j", (0, 5), outcome=FAIL)
    elif case == "ttl passed":
        h.add("j", (0, 1), ttl=100_000)  # may have expired from 100 s on
    elif case == "schedule ttl minus rounding":
        h.add("j", (0, 1), ttl=100_500, kind="schedule")  # its time may be a second early
    else:
        h.add("j", (0, 1))
    if case == "delete info":
        h.delete("j", (5, None), outcome=INFO)
    if case == "delete fail":
        # any delete tried excludes the job, even one that said it did nothing
        h.op("delete", "j", (5, 6), FAIL, Args(), Reply(error=NOT_WRITTEN.format("delete")))
    assert check(h.ops, [read]) == []


def test_a_read_back_without_a_definite_answer_is_reported_not_passed():
    h = History()
    h.add("j", (0, 1))
    only(check(h.ops, [ReadBack("j", "unknown", 100.0)]), "read-back-unknown")
    assert check(h.ops, [found("j")]) == []


@pytest.mark.parametrize("kind", ["inspect", "result", "complete", "fail", "delete"])
def test_a_definite_not_found_after_an_acknowledged_add_is_a_lost_add_seen_live(kind):
    h = History()
    add = h.add("j", (0, 1))
    read = h.not_found(kind, "j", (2, 3))
    v = only(check(h.ops), "lost-add")
    assert v.ops == (add.index, read.index)


@pytest.mark.parametrize("case", ["read invoked before the add returned", "touch",
                                  "delete invoked before the read returned", "bulk ack",
                                  "expired", "server error"])
def test_near_misses_of_a_lost_add_seen_live(case):
    h = History()
    if case == "bulk ack":
        h.bulk(["j"], (0, 1))  # Kafka's ack: the server admits the job later
    else:
        h.add("j", (0, 1), ttl=5000 if case == "expired" else TTL_MS)
    if case == "read invoked before the add returned":
        h.not_found("inspect", "j", (0.5, 3))
    elif case == "touch":
        h.not_found("touch", "j", (2, 3))  # touch says -NOT-FOUND for a job not LEASED
    elif case == "delete invoked before the read returned":
        h.delete("j", (2.5, None), outcome=INFO)
        h.not_found("inspect", "j", (2, 3))
    elif case == "expired":
        h.not_found("inspect", "j", (4, 5.5))
    elif case == "server error":
        h.op("inspect", "j", (2, 3), FAIL, Args(), Reply(error="-SERVER-ERROR retry"))
    else:
        h.not_found("inspect", "j", (2, 3))
    assert check(h.ops) == []


# --- undone-delete --------------------------------------------------------------------


def test_an_acknowledged_delete_whose_job_is_still_there_is_undone():
    h = History()
    h.add("j", (0, 1))
    delete = h.delete("j", (2, 3))
    v = only(check(h.ops, [found("j")]), "undone-delete")
    assert v.ops == (delete.index,)


@pytest.mark.parametrize("outcome", [INFO, FAIL])
def test_a_delete_that_was_not_acknowledged_may_leave_the_job(outcome):
    h = History()
    h.add("j", (0, 1))
    h.delete("j", (2, None if outcome == INFO else 3), outcome=outcome)
    assert check(h.ops, [found("j")]) == []


# --- result-mismatch ------------------------------------------------------------------


def test_a_result_nobody_sent_is_a_mismatch():
    h = History()
    h.add("j", (0, 1))
    h.complete("j", (2, 3), result=b"done")
    result = h.result("j", (4, 5), (True, b"other"))
    v = only(check(h.ops), "result-mismatch")
    assert result.index in v.ops


def test_a_result_reading_a_fails_bytes_is_fine():
    h = History()
    h.add("j", (0, 1))
    h.fail("j", (2, 3), result=b"boom")
    h.result("j", (4, 5), (False, b"boom"))
    assert check(h.ops) == []


def test_an_empty_failure_needs_attempts_that_may_have_run_out():
    h = History()
    h.add("j", (0, 1))
    h.lease("j", (1, 2))
    empty = h.result("j", (6, 7), (False, b""))
    v = only(check(h.ops), "result-mismatch")
    assert v.ops == (empty.index,)
    for n in range(300):  # leases of its queue that may each have spent an attempt
        h.lease(None, (3 + n / 1000, None), outcome=INFO)
    assert check(h.ops) == []


def test_a_result_may_read_an_indeterminate_complete_invoked_before_it_returned():
    h = History()
    h.add("j", (0, 1))
    h.complete("j", (2, None), outcome=INFO, result=b"maybe")
    h.result("j", (1.5, 5), (True, b"maybe"))
    assert check(h.ops) == []


def test_a_result_may_not_read_a_complete_that_definitely_failed():
    h = History()
    h.add("j", (0, 1))
    h.op("complete", "j", (2, 3), FAIL, Args(result=b"refused"),
         Reply(error="-CLIENT-ERROR Duplicate result"))
    h.result("j", (4, 5), (True, b"refused"))
    only(check(h.ops), "result-mismatch")


def test_a_result_may_not_read_a_complete_invoked_after_it_returned():
    h = History()
    h.add("j", (0, 1))
    h.result("j", (2, 3), (True, b"later"))
    h.complete("j", (4, 5), result=b"later")
    only(check(h.ops), "result-mismatch")


def test_after_an_acknowledged_complete_the_result_is_that_complete():
    h = History()
    h.add("j", (0, 1))
    h.fail("j", (2, None), outcome=INFO, result=b"boom")
    complete = h.complete("j", (3, 4), result=b"done")
    result = h.result("j", (5, 6), (False, b"boom"))  # a fail's bytes, but too late
    v = only(check(h.ops), "result-mismatch")
    assert v.ops == (complete.index, result.index)


def test_a_run_reply_must_be_what_a_worker_sent():
    h = History()
    h.run("r", (0, 5), result=(True, b"worked"))
    h.lease("r", (1, 2))
    h.complete("r", (3, 4), result=b"worked")
    assert check(h.ops) == []
    h.ops[0] = replace(h.ops[0], reply=Reply(job_id="r", success=True, data=b"other"))
    only(check(h.ops), "result-mismatch")


def test_the_read_back_result_of_a_completed_job_is_its_acknowledged_complete():
    h = History()
    h.add("j", (0, 1))
    h.lease("j", (1, 2))
    h.complete("j", (3, 4), result=b"done")
    good = found("j", state=COMPLETED, attempts=1, result=(True, b"done"))
    assert check(h.ops, [good]) == []
    bad = found("j", state=COMPLETED, attempts=1, result=(True, b"nope"))
    only(check(h.ops, [bad]), "result-mismatch")


# --- double-grant ---------------------------------------------------------------------


def test_two_grants_within_the_ttr_are_a_double_grant():
    h = History()
    h.add("j", (0, 1), ttr=5000)
    first = h.lease("j", (1, 1.1), ttr=5000)
    second = h.lease("j", (2, 2.1), ttr=5000)
    v = only(check(h.ops), "double-grant")
    assert v.ops == (first.index, second.index)


def test_two_grants_farther_apart_than_the_ttr_are_fine():
    h = History()
    h.add("j", (0, 1), ttr=1000)
    h.lease("j", (1, 1.1))
    h.lease("j", (1.95, 2.1))  # window 1.1 s >= 1.0 s - tolerance
    assert check(h.ops) == []


def test_two_grants_just_inside_the_tolerance_are_reported():
    h = History()
    h.add("j", (0, 1), ttr=1000)
    h.lease("j", (1, 1.1))
    h.lease("j", (1.5, 1.85))  # window 0.85 s < 0.9 s
    only(check(h.ops), "double-grant")


@pytest.mark.parametrize("release", ["fail ok", "fail info long before"])
def test_a_fail_that_may_leave_retries_between_two_grants_explains_them(release):
    h = History()
    h.add("j", (0, 1), ttr=5000, max_fails=3)
    h.lease("j", (1, 1.1), ttr=5000)
    if release == "fail ok":
        h.fail("j", (1.5, 1.6))
    else:
        # its reply came before the first grant, but an info op may land any time later
        h.op("fail", "j", (0.2, 0.3), INFO, Args(result=b"f"),
             Reply(error=MAY_TAKE_EFFECT.format("fail")))
    h.lease("j", (2, 2.1), ttr=5000)
    assert check(h.ops) == []


@pytest.mark.parametrize("end", ["final fail", "complete info", "delete info"])
def test_an_end_that_never_makes_the_job_ready_explains_no_second_grant(end):
    """A complete or a delete (even an indeterminate one) and a fail with no retries left
    end the job for good: they never excuse a second grant inside the TTR."""
    h = History()
    h.add("j", (0, 1), ttr=5000)  # no -max-fails: every fail is final
    first = h.lease("j", (1, 1.1), ttr=5000)
    if end == "final fail":
        h.fail("j", (1.5, None), outcome=INFO)
    elif end == "complete info":
        h.complete("j", (1.5, None), outcome=INFO)
    else:
        h.delete("j", (1.5, None), outcome=INFO)
    second = h.lease("j", (2, 2.1), ttr=5000)
    assert only(check(h.ops), "double-grant").ops == (first.index, second.index)


def test_a_release_that_definitely_failed_explains_nothing():
    h = History()
    h.add("j", (0, 1), ttr=5000)
    h.lease("j", (1, 1.1), ttr=5000)
    h.op("fail", "j", (1.5, 1.6), FAIL, Args(result=b"f"), Reply(error=NOT_WRITTEN.format("fail")))
    h.lease("j", (2, 2.1), ttr=5000)
    only(check(h.ops), "double-grant")


# --- grant-after-end, double-complete -------------------------------------------------


@pytest.mark.parametrize("end", ["complete", "delete"])
def test_a_grant_after_an_acknowledged_end_is_reported(end):
    h = History()
    h.add("j", (0, 1), ttr=100)
    h.lease("j", (1, 1.1), ttr=100)
    finish = h.complete("j", (2, 3)) if end == "complete" else h.delete("j", (2, 3))
    grant = h.lease("j", (4, 4.1), ttr=100)
    v = only(check(h.ops), "grant-after-end")
    assert v.ops == (finish.index, grant.index)


@pytest.mark.parametrize("case", ["lease invoked before the complete returned",
                                  "complete info"])
def test_near_misses_of_a_grant_after_the_end(case):
    h = History()
    h.add("j", (0, 1), ttr=100)
    h.lease("j", (1, 1.1), ttr=100)
    if case == "complete info":
        h.complete("j", (2, None), outcome=INFO)
        h.lease("j", (4, 4.1), ttr=100)
    else:
        h.complete("j", (2, 3))
        h.lease("j", (2.5, 4.1), ttr=100)
    assert check(h.ops) == []


def test_two_acknowledged_completes_are_a_double_complete():
    h = History()
    h.add("j", (0, 1))
    first = h.complete("j", (2, 3), result=b"a")
    second = h.complete("j", (4, 5), result=b"b")
    v = only(check(h.ops), "double-complete")
    assert v.ops == (first.index, second.index)


def test_a_second_complete_refused_as_duplicate_is_fine():
    h = History()
    h.add("j", (0, 1))
    h.complete("j", (2, 3), result=b"a")
    h.op("complete", "j", (4, 5), FAIL, Args(result=b"b"),
         Reply(error="-CLIENT-ERROR Duplicate result"))
    assert check(h.ops) == []


# --- attempts-out-of-bounds -----------------------------------------------------------


def test_fewer_attempts_than_grants_is_out_of_bounds():
    h = History()
    h.add("j", (0, 1), ttr=100)
    h.lease("j", (1, 2), ttr=100)
    h.lease("j", (3, 4), ttr=100)
    only(check(h.ops, [found("j", state=PENDING, attempts=1)]), "attempts-out-of-bounds")


def test_an_unanswered_lease_of_the_queue_may_account_for_one_more_attempt():
    h = History()
    h.add("j", (0, 1), ttr=100)
    h.lease("j", (1, 2), ttr=100)
    h.lease(None, (3, None), outcome=INFO, queues=("other", "q"))
    assert check(h.ops, [found("j", state=PENDING, attempts=2)]) == []


def test_an_unanswered_lease_of_another_queue_cannot():
    h = History()
    h.add("j", (0, 1), ttr=100)
    h.lease("j", (1, 2), ttr=100)
    h.lease(None, (3, None), outcome=INFO, queues=("other",))
    h.lease(None, (3, 4), outcome=FAIL, error="-CLIENT-ERROR Invalid wait timeout")
    only(check(h.ops, [found("j", state=PENDING, attempts=2)]), "attempts-out-of-bounds")


def test_a_lease_answered_timeout_may_have_spent_an_attempt_elsewhere():
    """A lease takes the cluster's best job: another process claimed one for it, its
    reply came too late and the asker answered -TIMEOUT; the claiming process was
    paused past the job's TTR, which timed the attempt out before the give-back."""
    h = History()
    h.add("j", (0, 1), ttr=100)
    h.lease(None, (3, 4), outcome=FAIL, error="-TIMEOUT")
    h.lease("j", (5, 6), ttr=100)
    assert check(h.ops, [found("j", state=LEASED, attempts=2)]) == []
    only(check(h.ops, [found("j", state=LEASED, attempts=3)]), "attempts-out-of-bounds")


def test_fails_must_lie_between_ok_fails_and_ok_plus_indeterminate_fails():
    h = History()
    h.add("j", (0, 1))
    h.fail("j", (2, 3))
    h.fail("j", (4, None), outcome=INFO)
    assert check(h.ops, [found("j", state=PENDING, fails=2)]) == []
    assert check(h.ops, [found("j", state=PENDING, fails=1)]) == []
    only(check(h.ops, [found("j", state=PENDING, fails=3)]), "attempts-out-of-bounds")
    only(check(h.ops, [found("j", state=PENDING, fails=0)]), "attempts-out-of-bounds")


# --- state-mismatch -------------------------------------------------------------------


def test_completed_without_any_complete_is_a_state_mismatch():
    h = History()
    h.add("j", (0, 1))
    only(check(h.ops, [found("j", state=COMPLETED)]), "state-mismatch")


def test_completed_after_an_indeterminate_complete_is_fine():
    h = History()
    h.add("j", (0, 1))
    h.complete("j", (2, None), outcome=INFO)
    assert check(h.ops, [found("j", state=COMPLETED)]) == []


def test_an_acknowledged_complete_must_leave_the_job_completed():
    h = History()
    h.add("j", (0, 1))
    complete = h.complete("j", (2, 3))
    v = only(check(h.ops, [found("j", state=PENDING)]), "state-mismatch")
    assert v.ops == (complete.index,)


def test_unless_a_delete_was_tried():
    h = History()
    h.add("j", (0, 1))
    h.complete("j", (2, 3))
    h.delete("j", (4, None), outcome=INFO)
    assert check(h.ops, [found("j", state=PENDING)]) == []


# --- phantom-grant --------------------------------------------------------------------


def test_a_grant_of_a_job_nobody_created_is_a_phantom():
    h = History()
    h.lease("ghost", (1, 2))
    only(check(h.ops), "phantom-grant")


def test_a_grant_of_a_job_created_only_after_it_returned_is_a_phantom():
    h = History()
    h.lease("j", (1, 2))
    h.add("j", (3, 4))
    only(check(h.ops), "phantom-grant")


def test_a_grant_with_another_payload_is_a_phantom_and_the_right_one_is_not():
    h = History()
    h.add("j", (0, 1))
    h.lease("j", (2, 3), payload=b"tampered")
    only(check(h.ops), "phantom-grant")
    h.ops[-1] = replace(h.ops[-1], reply=replace(h.ops[-1].reply, payload=payload_of("j")))
    assert check(h.ops) == []


def test_a_grant_of_an_indeterminate_bulk_job_is_fine():
    h = History()
    h.bulk(["b1", "b2"], (0, None), outcome=INFO)
    h.lease("b2", (3, 4))
    assert check(h.ops) == []


# --- digests and serving --------------------------------------------------------------


def test_digests_that_differ_or_could_not_be_taken_are_violations():
    only(check([], live_digest="aa", log_digest="bb"), "digest-mismatch")
    assert check([], live_digest="aa", log_digest="aa") == []
    only(check([], live_digest=None, log_digest="bb"), "digest-missing")
    only(check([], live_digest="aa", log_digest=None), "digest-missing")
    assert check([]) == []  # not asked about


def test_a_run_with_too_few_acknowledged_ops_did_not_start():
    h = History()
    h.add("j", (0, None), outcome=INFO)
    only(check(h.ops, min_ok_ops=1), "run-not-started")
    h.add("k", (0, 1))
    assert check(h.ops, min_ok_ops=1) == []


def test_a_fault_served_again_too_late_or_never_is_slow():
    times = [("kill -9 p1", 12.0), ("sigstop p2", 31.0), ("cut p3", None)]
    violations = check([], serve_times=times, serve_bound_s=30)
    assert kinds_of(violations) == ["slow-to-serve", "slow-to-serve"]
    assert "sigstop p2" in violations[0].message and "never" in violations[1].message
    assert check([], serve_times={"kill -9 p1": 29.9}, serve_bound_s=30) == []


def test_the_summary_counts_ops_by_kind_and_outcome():
    h = History()
    h.add("a", (0, 1))
    h.add("b", (0, None), outcome=INFO)
    h.lease(None, (0, 1), outcome=FAIL)
    counted = summary(h.ops)
    assert counted.counts == {"add": {OK: 1, INFO: 1}, "lease": {FAIL: 1}}
    assert counted.total == 3 and counted.outcome_total(INFO) == 1
    assert "add" in counted.text() and "lease" in counted.text()


# --- histories of a correct model -----------------------------------------------------


@dataclass
class ModelJob:
    job_id: str
    queue: str
    ttr_ms: int
    payload: bytes
    max_fails: int
    ready_at: float
    expires_at: float
    state: int = NEW
    attempts: int = 0
    fails: int = 0
    result: tuple[bool, bytes] | None = None
    deadline: float = math.inf
    group: str | None = None  # a FAILED job's failure group
    failed_seq: int = 0  # the order of failures (retry-group takes the oldest first)

    @property
    def final(self) -> bool:
        return self.state in (COMPLETED, FAILED)

    def fields(self) -> tuple[tuple[str, bytes], ...]:
        return (("name", self.queue.encode()), ("ttr", str(self.ttr_ms).encode()),
                ("payload", self.payload), ("attempts", str(self.attempts).encode()),
                ("max-fails", str(self.max_fails).encode()), ("fails", str(self.fails).encode()),
                ("state", str(self.state).encode()))


@dataclass
class Model:
    """A correct queue, one command at a time: one job table, leases with TTR, TTL,
    complete/fail (retrying while fails < max-fails), delete, touch, result, inspect,
    and retry and retry-group of FAILED jobs (docs/workflows.md, "retry")."""

    jobs: dict[str, ModelJob] = field(default_factory=dict)
    failures: int = 0

    def advance(self, now: float) -> None:
        for job_id, job in list(self.jobs.items()):
            if now >= job.expires_at:
                del self.jobs[job_id]
            elif job.state == LEASED and now >= job.deadline:
                job.state, job.deadline = PENDING, math.inf

    def create(self, job: ModelJob) -> str:
        if job.job_id in self.jobs:
            return "-CLIENT-ERROR Duplicate job"
        self.jobs[job.job_id] = job
        return "+OK"

    def ready(self, queues, now) -> list[ModelJob]:
        return [j for j in self.jobs.values() if j.queue in queues
                and j.state in (NEW, PENDING) and j.ready_at <= now]

    def grant(self, job: ModelJob, now: float) -> None:
        job.attempts += 1
        job.state, job.deadline = LEASED, now + job.ttr_ms / 1000

    def complete(self, job_id, result) -> str:
        job = self.jobs.get(job_id)
        if job is None:
            return "-NOT-FOUND"
        if job.final:
            return "-CLIENT-ERROR Duplicate result"
        job.state, job.result, job.deadline = COMPLETED, (True, result), math.inf
        return "+OK"

    def fail(self, job_id, result, group=None) -> str:
        job = self.jobs.get(job_id)
        if job is None:
            return "-NOT-FOUND"
        if job.final:
            return "-CLIENT-ERROR Duplicate result"
        job.fails += 1
        if job.fails < job.max_fails:
            job.state, job.deadline = PENDING, math.inf
        else:
            job.state, job.result, job.deadline = FAILED, (False, result), math.inf
            self.failures += 1
            job.group, job.failed_seq = group or "failed", self.failures
        return "+OK"

    def retry(self, job_id, now, delay_s=0.0) -> str:
        job = self.jobs.get(job_id)
        if job is None or job.state != FAILED:
            return "-NOT-FOUND"
        job.state, job.attempts, job.fails, job.result, job.group = NEW, 0, 0, None, None
        job.ready_at = now + delay_s if delay_s else min(job.ready_at, now)
        return "+OK"

    def retry_group(self, group, count, now) -> str:
        failed = sorted((j for j in self.jobs.values() if j.state == FAILED
                         and j.group == group), key=lambda j: j.failed_seq)
        for job in failed[:count]:
            self.retry(job.job_id, now)
        return "+OK"

    def delete(self, job_id) -> str:
        return "+OK" if self.jobs.pop(job_id, None) is not None else "-NOT-FOUND"

    def touch(self, job_id, now) -> str:
        job = self.jobs.get(job_id)
        if job is None or job.state != LEASED:
            return "-NOT-FOUND"
        job.deadline = now + job.ttr_ms / 1000
        return "+OK"


class Choices:
    """Where a simulation's choices come from: hypothesis (shrinkable) or a seeded
    Random (``RandomChoices``, for the mutation tests). Jitter always comes from a
    Random: drawing every jitter from hypothesis is slow and shrinks nothing useful."""

    def __init__(self, draw) -> None:
        self.draw = draw
        self.jitter = draw(st.randoms(use_true_random=False))

    def integer(self, low: int, high: int) -> int:
        return self.draw(st.integers(low, high))

    def one_of(self, options):
        return self.draw(st.sampled_from(options))

    def boolean(self) -> bool:
        return self.draw(st.booleans())

    def some_of(self, options) -> tuple:
        return tuple(self.draw(st.lists(st.sampled_from(options), min_size=1,
                                        max_size=len(options), unique=True)))


class RandomChoices(Choices):
    def __init__(self, seed: int) -> None:
        self.jitter = random.Random(seed)

    def integer(self, low: int, high: int) -> int:
        return self.jitter.randint(low, high)

    def one_of(self, options):
        return self.jitter.choice(list(options))

    def boolean(self) -> bool:
        return self.jitter.random() < 0.5

    def some_of(self, options) -> tuple:
        return tuple(self.jitter.sample(list(options), self.jitter.randint(1, len(options))))


FATES = ("answered", "answered", "answered", "answered", "lost after effect",
         "lost before effect", "not written", "takes effect later")


class Simulation:
    """Clients taking turns on the model. Each op takes effect at its own moment (times
    strictly increase); its invoke and return lie a little before and after, so ops of
    different clients overlap. Writes may meet a fate: the answer lost after or before
    the effect (info, no return), a definite not-written (fail, no effect), or an
    indeterminate error whose effect lands at a later step (info with a return)."""

    def __init__(self, pick: Choices, model: Model | None = None, single: bool = False) -> None:
        self.single = single  # one job only: every op after its add is about it
        self.pick = pick
        self.model = model or Model()
        self.now = 0.0
        self.ops: list[Op] = []
        self.created: list[str] = []
        self.granted: list[str] = []
        self.open_runs: list[tuple[str, float]] = []
        self.later: list = []  # effects of indeterminate ops still to land
        self.run_args: dict[str, Args] = {}
        self.sequence = 0

    # time and recording ----------------------------------------------------------

    def tick(self) -> None:
        self.now += self.pick.integer(1, 1500) / 1000
        self.model.advance(self.now)

    def around(self) -> tuple[float, float]:
        return (self.now - self.pick.jitter.randint(0, 40) / 1000,
                self.now + self.pick.jitter.randint(0, 40) / 1000)

    def unique(self, what: str) -> bytes:
        self.sequence += 1
        return f"{what} {self.sequence}".encode()

    def record(self, kind, job_id, args, invoke, returned, outcome, reply) -> None:
        self.ops.append(Op(0, 0, 0, kind, job_id, args, invoke, returned, outcome, reply))

    def write(self, kind, job_id, args, effect) -> None:
        """Record a write whose ``effect()`` returns its reply line, under a drawn fate."""
        invoke, returned = self.around()
        fate = self.pick.one_of(FATES)
        if fate == "answered":
            line = effect()
            self.record(kind, job_id, args, invoke, returned, classify(kind, line),
                        Reply(error=None if line.startswith("+") else line))
        elif fate == "lost after effect":
            effect()
            self.record(kind, job_id, args, invoke, None, INFO, Reply(error=CONNECTION_LOST))
        elif fate == "lost before effect":
            self.record(kind, job_id, args, invoke, None, INFO, Reply(error=CONNECTION_LOST))
        elif fate == "not written":
            line = NOT_WRITTEN.format(kind)
            self.record(kind, job_id, args, invoke, returned, classify(kind, line),
                        Reply(error=line))
        else:
            line = MAY_TAKE_EFFECT.format(kind)
            self.later.append(effect)
            self.record(kind, job_id, args, invoke, returned, classify(kind, line),
                        Reply(error=line))

    # the ops ---------------------------------------------------------------------

    def new_job(self, queue=None, ttl_ms=None, delay=0.0, run=False) -> ModelJob:
        job_id = f"j{len(self.created)}"
        self.created.append(job_id)
        queue = queue or self.pick.one_of(("a", "b", "c"))
        ttl_s = math.inf if run else ttl_ms / 1000
        return ModelJob(job_id, queue, self.pick.one_of((200, 1000, 3000)),
                        self.unique("payload"), 0 if run else self.pick.one_of((0, 3)),
                        self.now + delay, self.now + delay + ttl_s)

    def add(self, kind="add") -> None:
        delay = self.pick.integer(0, 2000) / 1000 if kind == "schedule" else 0.0
        job = self.new_job(ttl_ms=self.pick.one_of((3000, 20_000, TTL_MS)),
                           delay=delay)
        args = Args(queues=(job.queue,), ttr_ms=job.ttr_ms,
                    ttl_ms=int((job.expires_at - job.ready_at) * 1000), payload=job.payload,
                    max_fails=job.max_fails)
        self.write(kind, job.job_id, args, lambda: self.model.create(job))

    def bulk(self) -> None:
        ttl_ms = self.pick.one_of((3000, TTL_MS))
        jobs = [self.new_job(ttl_ms=ttl_ms) for _ in range(self.pick.integer(1, 3))]
        args = Args(jobs=tuple(BulkJob(j.job_id, j.queue, j.ttr_ms, ttl_ms, j.payload,
                                       j.max_fails) for j in jobs))

        def effect() -> str:
            for job in jobs:
                self.model.create(job)
            return "+OK"

        self.write("bulk", None, args, effect)

    def start_run(self) -> None:
        job = self.new_job(run=True)
        self.model.create(job)
        self.open_runs.append((job.job_id, self.around()[0]))
        self.run_args[job.job_id] = Args(queues=(job.queue,), ttr_ms=job.ttr_ms,
                                         payload=job.payload, wait_ms=2000)

    def finish_run(self) -> None:
        job_id, invoke = self.open_runs.pop(self.pick.integer(0, len(self.open_runs) - 1))
        job = self.model.jobs.get(job_id)
        args = self.run_args[job_id]
        returned = self.around()[1]
        if job is not None and job.final:
            self.record("run", job_id, args, invoke, returned, OK,
                        Reply(job_id=job_id, success=job.result[0], data=job.result[1]))
        else:
            self.record("run", job_id, args, invoke, returned, FAIL, Reply(error="-TIMEOUT"))
        self.model.delete(job_id)  # whatever the outcome

    def lease(self) -> None:
        queues = self.pick.some_of(("a", "b", "c"))
        args = Args(queues=queues, wait_ms=500)
        ready = self.model.ready(queues, self.now)
        invoke, returned = self.around()
        if not ready:
            self.record("lease", None, args, invoke, returned, FAIL, Reply(error="-TIMEOUT"))
            return
        job = self.pick.one_of(sorted(ready, key=lambda j: j.job_id))
        fate = self.pick.one_of(FATES)
        if fate == "not written":
            line = NOT_WRITTEN.format("lease")
            self.record("lease", None, args, invoke, returned, FAIL, Reply(error=line))
            return
        if fate != "answered":  # the grant reached nobody: it may or may not have happened
            if fate != "lost before effect":
                self.model.grant(job, self.now)
            self.record("lease", None, args, invoke, None, INFO, Reply(error=CONNECTION_LOST))
            return
        self.model.grant(job, self.now)
        self.granted.append(job.job_id)
        self.record("lease", job.job_id, args, invoke, returned, OK,
                    Reply(job_id=job.job_id, name=job.queue, ttr_ms=job.ttr_ms,
                          payload=job.payload))

    def some_job(self) -> str:
        """Mostly a job some worker was granted (what workers act on), else any."""
        if self.granted and self.pick.boolean():
            return self.pick.one_of(self.granted[-5:])
        return self.pick.one_of(self.created)

    def complete_or_fail(self, kind) -> None:
        job_id = self.some_job()
        result = self.unique(kind)
        if kind == "complete":
            self.write(kind, job_id, Args(result=result),
                       lambda: self.model.complete(job_id, result))
            return
        group = self.pick.one_of((None, None, "g"))
        self.write(kind, job_id, Args(result=result, group=group),
                   lambda: self.model.fail(job_id, result, group))

    def retry(self) -> None:
        """Mostly a job that is FAILED now (what an operator retries), else any."""
        failed = sorted(j.job_id for j in self.model.jobs.values() if j.state == FAILED)
        job_id = self.pick.one_of(failed) if failed and self.pick.boolean() else self.some_job()
        delay_ms = self.pick.one_of((0, 0, 500))
        self.write("retry", job_id, Args(delay_ms=delay_ms or None),
                   lambda: self.model.retry(job_id, self.now, delay_ms / 1000))

    def retry_group(self) -> None:
        count = self.pick.integer(1, 3)
        self.write("retry-group", None, Args(group="g", count=count),
                   lambda: self.model.retry_group("g", count, self.now))

    def delete(self) -> None:
        job_id = self.some_job()
        self.write("delete", job_id, Args(), lambda: self.model.delete(job_id))

    def touch(self) -> None:
        # a worker touches the job it holds: mostly the latest grant
        job_id = self.granted[-1] if self.granted and self.pick.boolean() else self.some_job()
        self.write("touch", job_id, Args(), lambda: self.model.touch(job_id, self.now))

    def read(self, kind) -> None:
        job_id = self.some_job()
        job = self.model.jobs.get(job_id)
        invoke, returned = self.around()
        if job is None:
            self.record(kind, job_id, Args(), invoke, returned, FAIL, Reply(error="-NOT-FOUND"))
        elif kind == "inspect":
            self.record(kind, job_id, Args(), invoke, returned, OK, Reply(fields=job.fields()))
        elif job.final:
            self.record(kind, job_id, Args(wait_ms=0), invoke, returned, OK,
                        Reply(job_id=job_id, success=job.result[0], data=job.result[1]))
        else:
            self.record(kind, job_id, Args(wait_ms=0), invoke, returned, FAIL,
                        Reply(error="-TIMEOUT"))

    # the run ---------------------------------------------------------------------

    def step(self) -> None:
        self.tick()
        if self.later and self.pick.boolean():
            self.later.pop(0)()  # an indeterminate op's effect lands now
            return
        choices = ["add", "add", "schedule", "bulk", "run", "lease", "lease", "lease"]
        if self.single:
            choices = ["add"] if not self.created else ["lease", "lease", "lease"]
        if self.created:
            choices += ["complete", "complete", "fail", "fail", "delete", "touch", "result",
                        "inspect", "retry", "retry", "retry-group"]
        if self.open_runs:
            choices += ["finish run"]
        action = self.pick.one_of(choices)
        if action in ("add", "schedule"):
            self.add(action)
        elif action == "bulk":
            self.bulk()
        elif action == "run":
            self.start_run()
        elif action == "finish run":
            self.finish_run()
        elif action == "lease":
            self.lease()
        elif action in ("complete", "fail"):
            self.complete_or_fail(action)
        elif action == "delete":
            self.delete()
        elif action == "retry":
            self.retry()
        elif action == "retry-group":
            self.retry_group()
        elif action == "touch":
            self.touch()
        else:
            self.read(action)

    def history(self) -> list[Op]:
        """Ops numbered in invoke order, as the recorder numbers them."""
        ordered = sorted(self.ops, key=lambda op: op.invoke_s)
        return [replace(op, index=n) for n, op in enumerate(ordered)]

    def read_back(self) -> list[ReadBack]:
        for job_id, invoke in self.open_runs:  # still waiting when the load ended
            self.record("run", job_id, self.run_args[job_id], invoke, None, INFO,
                        Reply(error=CONNECTION_LOST))
        if self.pick.boolean():
            for effect in self.later:  # the last indeterminate effects land, or never
                self.tick()
                effect()
        self.tick()
        self.now += 1
        self.model.advance(self.now)
        reads = []
        for job_id in self.created:
            job = self.model.jobs.get(job_id)
            if job is None:
                reads.append(ReadBack(job_id, "not-found", self.now))
            elif job.final:
                reads.append(ReadBack(job_id, "found", self.now, job.fields(), *job.result))
            else:
                reads.append(ReadBack(job_id, "found", self.now, job.fields()))
        return reads


@pytest.mark.slow  # 200 simulated histories: 7 s of CPU
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_histories_of_a_correct_queue_have_no_violations(data):
    simulation = Simulation(Choices(data.draw))
    for _ in range(data.draw(st.integers(1, 80))):
        simulation.step()
    reads = simulation.read_back()
    history = simulation.history()
    violations = check(history, reads, "same", "same", [("kill -9 p0", 3.0)], 30.0)
    assert violations == [], violations_text(violations)
    assert [op_from_json(op_to_json(op)) for op in history] == history


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_histories_of_one_job_failed_and_retried_have_no_violations(data):
    """One job, every op about it: fails (final ones too), retries and retry-groups that
    may land late or never, grants after them, reads of every kind."""
    simulation = Simulation(Choices(data.draw), single=True)
    for _ in range(data.draw(st.integers(1, 60))):
        simulation.step()
    reads = simulation.read_back()
    violations = check(simulation.history(), reads)
    assert violations == [], violations_text(violations)


def test_the_model_test_sees_every_kind_of_op_and_outcome():
    """The generator reaches what the rules look at (else the test above proves little)."""
    seen: set[tuple[str, str]] = set()
    for seed in range(40):
        simulation = Simulation(RandomChoices(seed))
        for _ in range(80):
            simulation.step()
        simulation.read_back()
        seen.update((op.kind, op.outcome) for op in simulation.history())
    for kind in ("add", "schedule", "bulk", "lease", "complete", "fail", "delete", "touch",
                 "retry", "retry-group"):
        assert {(kind, OK), (kind, INFO)} <= seen, kind
    assert {("run", OK), ("run", FAIL), ("result", OK), ("inspect", OK),
            ("inspect", FAIL), ("lease", FAIL)} <= seen


# --- the checker catches a broken queue -----------------------------------------------
# Each model below breaks one promise of the queue; histories it generates must show the
# violation named beside it in some of a few dozen seeded runs.


class LeasesLeasedJobs(Model):
    def ready(self, queues, now):
        return [j for j in self.jobs.values() if j.queue in queues
                and j.state in (NEW, PENDING, LEASED) and j.ready_at <= now]


class DeleteThatKeeps(Model):
    def delete(self, job_id):
        return "+OK" if job_id in self.jobs else "-NOT-FOUND"


class DropsEveryThirdAdd(Model):
    adds = 0

    def create(self, job):
        self.adds += 1
        if self.adds % 3 == 0 and job.job_id not in self.jobs:
            return "+OK"
        return super().create(job)


class ForgetsCompletes(Model):
    def complete(self, job_id, result):
        job = self.jobs.get(job_id)
        if job is None:
            return "-NOT-FOUND"
        job.state, job.deadline = PENDING, math.inf
        return "+OK"


class ForgetsFinalFails(Model):
    """A fail with no retries left returns the job to PENDING as if it had some."""

    def fail(self, job_id, result, group=None):
        job = self.jobs.get(job_id)
        if job is None:
            return "-NOT-FOUND"
        if job.final:
            return "-CLIENT-ERROR Duplicate result"
        job.fails += 1
        job.state, job.deadline = PENDING, math.inf
        return "+OK"


class RetriesCompletedJobs(Model):
    """A retry runs a COMPLETED job again, as if it had FAILED."""

    def retry(self, job_id, now, delay_s=0.0):
        job = self.jobs.get(job_id)
        if job is not None and job.state == COMPLETED:
            job.state = FAILED
        return super().retry(job_id, now, delay_s)


class GarblesResults(Model):
    def complete(self, job_id, result):
        return super().complete(job_id, result + b"?")


class CountsNoAttempts(Model):
    def grant(self, job, now):
        super().grant(job, now)
        job.attempts -= 1


@pytest.mark.parametrize("model, expected", [
    (LeasesLeasedJobs, "double-grant"),
    (DeleteThatKeeps, "undone-delete"),
    (DropsEveryThirdAdd, "lost-add"),
    (ForgetsCompletes, "state-mismatch"),
    (ForgetsCompletes, "grant-after-end"),
    (ForgetsCompletes, "double-complete"),
    (ForgetsCompletes, "stale-read"),
    (DeleteThatKeeps, "alive-after-delete"),
    (ForgetsFinalFails, "grant-after-end"),
    (ForgetsFinalFails, "stale-read"),
    (GarblesResults, "result-mismatch"),
    (RetriesCompletedJobs, "grant-after-end"),
    (RetriesCompletedJobs, "retry-of-unfailed"),
    (CountsNoAttempts, "attempts-out-of-bounds"),
])
def test_a_broken_queue_is_caught(model, expected):
    seen: set[str] = set()
    for seed in range(40):
        simulation = Simulation(RandomChoices(seed), model())
        for _ in range(80):
            simulation.step()
        reads = simulation.read_back()
        seen.update(v.kind for v in check(simulation.history(), reads))
    assert expected in seen, seen


def test_the_correct_model_passes_the_same_seeded_runs():
    for seed in range(40):
        simulation = Simulation(RandomChoices(seed))
        for _ in range(80):
            simulation.step()
        reads = simulation.read_back()
        assert check(simulation.history(), reads) == [], seed


class HandsOutAnotherPayload(Model):
    def grant(self, job, now):
        super().grant(job, now)
        job.payload += b"!"


def test_a_grant_with_a_corrupted_payload_is_caught():
    seen: set[str] = set()
    for seed in range(20):
        simulation = Simulation(RandomChoices(seed), HandsOutAnotherPayload())
        for _ in range(80):
            simulation.step()
        reads = simulation.read_back()
        seen.update(v.kind for v in check(simulation.history(), reads))
    assert "phantom-grant" in seen, seen


def test_a_long_history_is_checked_in_seconds():
    """A campaign run leaves tens of thousands of jobs: no rule may be quadratic in them."""
    h = History()
    reads = []
    for n in range(20_000):
        job, t = f"j{n}", n * 0.01
        h.add(job, (t, t + 0.005), ttr=1000)
        h.lease(job, (t + 0.005, t + 0.006), ttr=1000)
        h.complete(job, (t + 0.006, t + 0.007), result=f"r{n}".encode())
        h.result(job, (t + 0.008, t + 0.009), (True, f"r{n}".encode()))
        h.lease(None, (t, None), outcome=INFO)
        reads.append(found(job, at=500.0, state=COMPLETED, attempts=1,
                           result=(True, f"r{n}".encode())))
    started = time.process_time()  # CPU time: other processes on the box do not count
    assert check(h.ops, reads) == []
    assert time.process_time() - started < 10
