"""The workload's rules: for each, a small history that breaks it (reported) and a near
miss that must not be."""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from tools.faults.checker import Violation, check
from tools.faults.history import (
    COMPLETED,
    FAIL,
    FOUND,
    INFO,
    LEASED,
    NEW,
    NOT_FOUND,
    OK,
    PENDING,
    Args,
    Op,
    ReadBack,
    Reply,
    op_from_json,
    op_to_json,
)
from tools.faults.workload_rules import (
    WAITING,
    check_workload,
    early_releases,
    grants_while_paused,
    index_ops,
    liveness,
    parse_time,
    retries_of_unfailed,
    retry_group_overcounts,
    slot_job_id,
    slot_violations,
    wrong_inputs,
)

TTL_MS = 3_600_000
WALL0 = 1_800_000_000.0  # the wall clock at the run's 0 s
QUIET_MS = 30_000


def jid(n: int) -> str:
    return str(uuid.UUID(int=n, version=4))


A, B, C = jid(1), jid(2), jid(3)


def iso(wall_s: float) -> str:
    return dt.datetime.fromtimestamp(wall_s, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class History:
    def __init__(self) -> None:
        self.ops: list[Op] = []

    def op(self, kind, job, t, outcome=OK, args=Args(), reply=Reply()) -> Op:
        op = Op(len(self.ops), 0, 0, kind, job, args, t[0], t[1], outcome, reply)
        self.ops.append(op)
        return op

    def add(self, job, t, outcome=OK, queue="q", ttl_ms=TTL_MS, after=()) -> Op:
        return self.op("add", job, t, outcome, Args(queues=(queue,), ttr_ms=1000,
                                                    ttl_ms=ttl_ms, payload=job.encode(),
                                                    after=tuple(after)))

    def schedule(self, job, t, at_wall_s, outcome=OK, queue="q") -> Op:
        return self.op("schedule", job, t, outcome, Args(
            queues=(queue,), ttr_ms=1000, ttl_ms=TTL_MS, payload=job.encode(),
            time=iso(at_wall_s), wall_s=WALL0 + t[0]))

    def lease(self, job, t, outcome=OK, queue="q") -> Op:
        reply = Reply(job_id=job, name=queue, ttr_ms=1000,
                      payload=None if job is None else job.encode())
        if outcome != OK:
            reply = Reply(error="-TIMEOUT" if outcome == FAIL else "connection lost")
        return self.op("lease", None, t, outcome, Args(queues=(queue,), wait_ms=500), reply)

    def complete(self, job, t, outcome=OK, result=b"done") -> Op:
        return self.op("complete", job, t, outcome, Args(result=result))

    def fail(self, job, t, outcome=OK, group=None) -> Op:
        return self.op("fail", job, t, outcome, Args(result=b"oops", group=group))

    def drain(self, t, outcome=OK, queues=("q", "r")) -> Op:
        """The drain, and its leases of ``queues`` (empty: what it found)."""
        for queue in queues:
            self.op("lease", None, (t[0], t[0] + 0.5), FAIL,
                    Args(queues=(queue,), wait_ms=500), Reply(error="-TIMEOUT"))
        return self.op("drain", None, t, outcome, Args(wait_ms=QUIET_MS, wall_s=WALL0 + t[0]),
                       Reply(error=None if outcome == OK else "not quiet"))


def read(job, state=None, at_s=100.0) -> ReadBack:
    if state is None:
        return ReadBack(job, NOT_FOUND, at_s)
    return ReadBack(job, FOUND, at_s, (("state", str(state).encode()),))


def kinds(violations: list[Violation]) -> list[str]:
    return [v.kind for v in violations]


# --- liveness ---------------------------------------------------------------------------


def test_a_job_left_new_after_the_drain_is_not_final():
    h = History()
    h.add(A, (1, 2))
    h.drain((10, 60))
    assert kinds(liveness(h.ops, {A: read(A, NEW)})) == ["not-final"]
    assert kinds(liveness(h.ops, {A: read(A, PENDING)})) == ["not-final"]
    assert liveness(h.ops, {A: read(A, COMPLETED)}) == []


def test_a_job_of_a_queue_the_drain_never_leased_is_not_judged_but_said_so():
    """Seed 9002: with a process gone, the drain left its pausable queue out; its jobs
    were reported not final, a fault of the campaign, not of eventq."""
    h = History()
    h.add(A, (1, 2), queue="fp2")
    h.drain((10, 60))
    assert kinds(liveness(h.ops, {A: read(A, NEW)})) == ["drain-missed-queue"]
    h2 = History()
    h2.add(A, (1, 2), queue="fp2")
    h2.drain((10, 60), queues=("q", "fp2"))
    assert kinds(liveness(h2.ops, {A: read(A, NEW)})) == ["not-final"]


def test_a_job_acknowledged_and_never_delivered_and_gone_is_undelivered():
    h = History()
    h.add(A, (1, 2))
    h.drain((10, 60))
    assert kinds(liveness(h.ops, {A: read(A)})) == ["undelivered"]


def test_near_misses_are_not_judged_deleted_expired_unacknowledged_run():
    h = History()
    h.add(A, (1, 2))
    h.op("delete", A, (3, None), INFO)
    h.add(B, (1, 2), ttl_ms=5_000)  # expired before the read-back
    h.add(C, (1, 2), outcome=FAIL)
    h.drain((10, 60))
    reads = {A: read(A, NEW), B: read(B), C: read(C, NEW)}
    assert liveness(h.ops, reads) == []


def test_no_drain_no_liveness_and_a_drain_that_never_went_quiet_is_reported():
    h = History()
    h.add(A, (1, 2))
    assert liveness(h.ops, {A: read(A, NEW)}) == []
    h.drain((10, 300), outcome=FAIL)
    assert kinds(liveness(h.ops, {A: read(A, NEW)})) == ["drain-not-quiet"]


def test_a_leased_job_whose_deadline_is_long_past_is_stuck():
    h = History()
    h.add(A, (1, 2))
    h.lease(A, (3, 4))
    h.drain((10, 60))
    assert kinds(liveness(h.ops, {A: read(A, LEASED, at_s=61)})) == ["stuck-leased"]
    # a lease that did not answer, invoked late, may hold it legitimately
    h.lease(None, (55, None), outcome=INFO)
    assert liveness(h.ops, {A: read(A, LEASED, at_s=61)}) == []


def test_a_schedule_pushed_past_the_drain_is_left_out_one_due_inside_is_judged():
    h = History()
    h.schedule(A, (1, 2), WALL0 + 600)
    h.schedule(B, (1, 2), WALL0 + 20)
    h.drain((10, 60))
    reads = {A: read(A, NEW), B: read(B, NEW)}
    assert [v.job_id for v in liveness(h.ops, reads)] == [B]


def test_a_dependent_of_an_unacknowledged_upstream_is_left_out_of_one_judged_is_not():
    h = History()
    h.add(A, (1, 2), outcome=FAIL)
    h.add(B, (1, 2), after=[A])
    h.drain((10, 60))
    assert liveness(h.ops, {A: read(A), B: read(B, WAITING)}) == []
    h2 = History()
    h2.add(A, (1, 2))
    h2.add(B, (1, 2), after=[A])
    h2.drain((10, 60))
    reads = {A: read(A, COMPLETED), B: read(B, WAITING)}
    assert [(v.kind, v.job_id) for v in liveness(h2.ops, reads)] == [("not-final", B)]


# --- workflows --------------------------------------------------------------------------


def test_a_dependent_granted_before_its_upstream_completed_is_an_early_release():
    h = History()
    h.add(A, (0, 1))
    h.add(B, (0, 1))
    h.add(C, (2, 3), after=[A, B])
    h.complete(A, (3, 4))
    h.lease(C, (4, 5))
    h.complete(B, (6, 7))  # invoked after the grant returned
    assert [(v.kind, v.job_id) for v in early_releases(index_ops(h.ops))] == [
        ("early-release", C)]
    h.ops.pop()
    h.ops.pop()
    h.complete(B, (3.5, None), outcome=INFO)  # may have landed before the grant
    h.lease(C, (4, 5))
    assert early_releases(index_ops(h.ops)) == []


def _inputs(h, job, t, entries):
    return h.op("inputs", job, t, OK, Args(),
                Reply(fields=tuple((up, flag + data) for up, flag, data in entries)))


def test_inputs_of_a_leased_dependent_name_every_upstream_with_a_sent_result():
    h = History()
    h.add(A, (0, 1))
    h.add(B, (0, 1))
    h.add(C, (2, 3), after=[A, B])
    h.complete(A, (3, 4), result=b"ra")
    h.complete(B, (3, 4), result=b"rb")
    h.lease(C, (5, 6))
    good = [(A, b"1", b"ra"), (B, b"1", b"rb")]
    _inputs(h, C, (7, 8), good)
    assert wrong_inputs(index_ops(h.ops)) == []
    for bad in ([(A, b"1", b"ra")], [(B, b"1", b"rb"), (A, b"1", b"ra")],
                [(A, b"1", b"ra"), (B, b"1", b"other")], [(A, b"0", b"ra"), (B, b"1", b"rb")]):
        h.ops.pop()
        _inputs(h, C, (7, 8), bad)
        assert kinds(wrong_inputs(index_ops(h.ops))) == ["wrong-inputs"], bad


# --- recurring jobs ---------------------------------------------------------------------


def test_slot_ids_follow_the_documented_derivation():
    # docs/workflows.md, "recur": the worked example
    assert slot_job_id("nightly", 86_400_000, 19723) == "d2c902db-9ba1-4266-92d6-ba506aadfd75"


def _recurring(h, t=(10, 11), every_ms=2000):
    return h.op("recur", None, t, OK, Args(queues=("r",), name="rec", every_ms=every_ms,
                                            wall_s=WALL0 + t[0]))


def test_a_slot_handed_out_after_it_ended_was_refired():
    h = History()
    _recurring(h)
    slot = int((WALL0 + 20) // 2)
    job = slot_job_id("rec", 2000, slot)
    h.lease(job, (20, 21), queue="r")
    h.complete(job, (21, 22))
    assert slot_violations(index_ops(h.ops)) == []
    h.lease(job, (23, 24), queue="r")
    assert kinds(slot_violations(index_ops(h.ops))) == ["slot-refired"]


def test_a_slot_due_before_its_recur_or_after_its_unrecur_is_outside():
    h = History()
    _recurring(h)
    early = slot_job_id("rec", 2000, int((WALL0 + 4) // 2))
    h.lease(early, (20, 21), queue="r")
    assert kinds(slot_violations(index_ops(h.ops))) == ["slot-outside-recurrence"]
    h = History()
    _recurring(h)
    h.op("unrecur", None, (30, 31), OK, Args(name="rec", wall_s=WALL0 + 30))
    late = slot_job_id("rec", 2000, int((WALL0 + 40) // 2))
    inside = slot_job_id("rec", 2000, int((WALL0 + 20) // 2))
    h.lease(inside, (35, 36), queue="r")
    assert slot_violations(index_ops(h.ops)) == []
    h.lease(late, (41, 42), queue="r")
    assert kinds(slot_violations(index_ops(h.ops))) == ["slot-outside-recurrence"]


# --- pause, retry -----------------------------------------------------------------------


def test_a_grant_of_a_paused_queue_between_pause_and_resume_is_reported():
    h = History()
    h.add(A, (0, 1), queue="p")
    h.op("pause", None, (2, 3), OK, Args(queues=("p",)))
    h.lease(A, (4, 5), queue="p")
    h.op("resume", None, (6, 7), OK, Args(queues=("p",)))
    assert kinds(grants_while_paused(index_ops(h.ops))) == ["grant-while-paused"]
    # near misses: a lease invoked before the pause returned, or returning after a resume
    h.ops[2] = Op(2, 0, 0, "lease", None, Args(queues=("p",)), 2.5, 5, OK,
                  Reply(job_id=A, name="p", ttr_ms=1000, payload=A.encode()))
    assert grants_while_paused(index_ops(h.ops)) == []
    h.ops[2] = Op(2, 0, 0, "lease", None, Args(queues=("p",)), 4, 6.5, OK,
                  Reply(job_id=A, name="p", ttr_ms=1000, payload=A.encode()))
    h.ops[3] = Op(3, 0, 0, "resume", None, Args(queues=("p",)), 6, 7, OK)
    assert grants_while_paused(index_ops(h.ops)) == []


def test_an_indeterminate_resume_voids_the_pause_window():
    h = History()
    h.op("resume", None, (0, None), INFO, Args(queues=("p",)))
    h.op("pause", None, (2, 3), OK, Args(queues=("p",)))
    h.lease(A, (4, 5), queue="p")
    assert grants_while_paused(index_ops(h.ops)) == []


def test_an_ok_retry_of_a_job_never_failed_or_completed_is_reported():
    h = History()
    h.add(A, (0, 1))
    h.op("retry", A, (2, 3), OK)
    assert kinds(retries_of_unfailed(index_ops(h.ops))) == ["retry-of-unfailed"]
    h = History()
    h.add(A, (0, 1))
    h.fail(A, (1.5, None), outcome=INFO)
    h.op("retry", A, (2, 3), OK)
    assert retries_of_unfailed(index_ops(h.ops)) == []
    h = History()
    h.add(A, (0, 1))
    h.fail(A, (1.2, 1.3))
    h.complete(A, (1.4, 1.5))
    h.op("retry", A, (2, 3), OK)
    assert kinds(retries_of_unfailed(index_ops(h.ops))) == ["retry-of-unfailed"]


# --- the core rules know the workload's features (nothing is dropped) -------------------


def test_a_retried_job_is_held_to_attempt_bounds_counted_since_its_retry():
    h = History()
    h.add(A, (0, 1))
    h.lease(A, (1, 2))
    h.fail(A, (2, 3))
    reads = {A: ReadBack(A, FOUND, 50, (("state", b"0"), ("attempts", b"0"), ("fails", b"0"),
                                        ("name", b"q")))}
    assert kinds(check(h.ops, reads)).count("attempts-out-of-bounds") == 2
    h.op("retry", A, (4, 5), OK)
    assert "attempts-out-of-bounds" not in kinds(check(h.ops, reads))
    h.lease(A, (6, 7))  # a grant after the retry counts again
    assert kinds(check(h.ops, reads)).count("attempts-out-of-bounds") == 1


def _slot_lease(h, job, t, payload=b"tick", ttr_ms=1000) -> Op:
    return h.op("lease", None, t, OK, Args(queues=("r",), wait_ms=500),
                Reply(job_id=job, name="r", ttr_ms=ttr_ms, payload=payload))


def test_a_recurrence_slot_grant_is_created_by_its_recur_and_must_match_it():
    h = History()
    h.op("recur", None, (10, 11), OK, Args(queues=("r",), name="rec", every_ms=2000,
                                           ttr_ms=1000, ttl_ms=TTL_MS, payload=b"tick",
                                           wall_s=WALL0 + 10))
    job = slot_job_id("rec", 2000, int((WALL0 + 20) // 2))
    _slot_lease(h, job, (20, 21))
    assert "phantom-grant" not in kinds(check(h.ops))
    _slot_lease(h, job, (22, 23), payload=b"not the recurrence's")
    assert kinds(check(h.ops)).count("phantom-grant") == 1
    h.ops.pop()
    _slot_lease(h, A, (22, 23))  # not a slot of any recurrence: nobody created it
    assert kinds(check(h.ops)).count("phantom-grant") == 1


def test_an_upstream_failed_result_of_a_dependent_needs_an_upstream_that_may_end_so():
    h = History()
    h.add(A, (0, 1))
    h.add(B, (0, 1), after=[A])
    h.op("result", B, (5, 6), OK, Args(wait_ms=0),
         Reply(job_id=B, success=False, data=f"upstream {A} failed".encode()))
    assert kinds(check(h.ops)) == ["result-mismatch"]  # A can only complete
    h.fail(A, (2, None), outcome=INFO)
    assert kinds(check(h.ops)) == []
    h.ops[2] = replace(h.ops[2], reply=Reply(job_id=B, success=False,
                                             data=f"upstream {A} deleted".encode()))
    assert kinds(check(h.ops)) == ["result-mismatch"]  # no delete of A was tried
    h.ops[2] = replace(h.ops[2], reply=Reply(job_id=B, success=False,
                                             data=f"upstream {C} failed".encode()))
    assert kinds(check(h.ops)) == ["result-mismatch"]  # C is not its upstream


def test_a_job_failed_into_a_group_that_was_retried_is_held_to_bounds_since():
    h = History()
    h.add(A, (0, 1))
    h.lease(A, (0.5, 1.5))
    h.fail(A, (2, 3), group="g")
    reads = {A: ReadBack(A, FOUND, 50, (("state", b"0"), ("attempts", b"0"), ("fails", b"0"),
                                        ("name", b"q")))}
    assert "attempts-out-of-bounds" in kinds(check(h.ops, reads))
    h.op("retry-group", None, (4, 5), OK, Args(group="other", count=5))
    assert "attempts-out-of-bounds" in kinds(check(h.ops, reads))  # not its group
    h.op("retry-group", None, (4, 5), OK, Args(group="g", count=5))
    assert "attempts-out-of-bounds" not in kinds(check(h.ops, reads))


@given(st.integers(min_value=0, max_value=2_000_000_000), st.floats(min_value=0, max_value=0.99))
def test_protocol_times_parse_back_to_their_whole_second(whole_s, fraction_s):
    assert parse_time(iso(whole_s + fraction_s)) == float(whole_s)
    fractional = dt.datetime.fromtimestamp(whole_s, dt.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%S.250Z")
    assert parse_time(fractional) == whole_s + 0.25


def test_a_retry_group_that_retried_more_than_asked_or_than_failed_into_it_is_reported():
    h = History()
    h.add(A, (0, 1))
    h.add(B, (0, 1))
    h.fail(A, (2, 3), group="g")
    h.fail(B, (2, None), outcome=INFO, group="g")
    h.fail(C, (2, 3), group="other")

    def group_retry(retried, count):
        return h.op("retry-group", None, (4, 5), OK, Args(group="g", count=count),
                    Reply(fields=(("retried", str(retried).encode()),)))

    group_retry(2, 5)
    assert retry_group_overcounts(index_ops(h.ops)) == []
    h.ops.pop()
    group_retry(3, 5)  # only A and B may be in g
    assert kinds(retry_group_overcounts(index_ops(h.ops))) == ["retry-group-overcount"]
    h.ops.pop()
    group_retry(2, 1)  # more than asked
    assert kinds(retry_group_overcounts(index_ops(h.ops))) == ["retry-group-overcount"]


def test_a_repeated_recur_does_not_move_the_recurrence_s_start_later():
    h = History()
    first = h.op("recur", None, (10, None), INFO, Args(queues=("r",), name="rec",
                                                       every_ms=2000, wall_s=WALL0 + 10))
    h.op("recur", None, (30, 31), OK, Args(queues=("r",), name="rec", every_ms=2000,
                                           wall_s=WALL0 + 30, retry_of=first.index))
    job = slot_job_id("rec", 2000, int((WALL0 + 20) // 2))  # the first may have fired it
    h.lease(job, (40, 41), queue="r")
    assert slot_violations(index_ops(h.ops)) == []


VIOLATION_KINDS = st.sampled_from(["lost-add", "double-grant", "attempts-out-of-bounds",
                                   "result-mismatch", "phantom-grant", "digest-mismatch"])


@given(st.lists(st.tuples(VIOLATION_KINDS, st.sampled_from([A, B, C, None])), max_size=12),
       st.booleans())
def test_every_core_violation_is_kept_whatever_the_workload_did(found, retried):
    h = History()
    h.add(A, (0, 1))
    h.add(B, (0, 1), after=[A])
    h.lease(A, (1, 2))
    h.fail(A, (2, None), outcome=INFO, group="g")
    if retried:
        h.op("retry", A, (3, 4), OK)
        h.op("retry-group", None, (3, 4), OK, Args(group="g", count=5))
    _recurring(h)
    core = [Violation(kind, job, (0,), "x") for kind, job in found]
    assert check_workload(h.ops, {}, core)[:len(core)] == core


def test_the_workload_s_ops_come_back_from_a_history_file_as_they_were():
    h = History()
    ops = [
        h.add(C, (0, None), outcome=INFO, after=[A, B]),
        h.op("add", C, (1, 2), FAIL, Args(queues=("q",), after=(A, B), retry_of=0),
             Reply(error="-CLIENT-ERROR Duplicate job")),
        h.op("recur", None, (3, 4), OK, Args(name="rec", every_ms=2000, wall_s=WALL0 + 3.5)),
        h.op("retry", A, (5, 6), OK, Args(delay_ms=300)),
        h.op("inputs", C, (7, 8), OK, Args(), Reply(fields=((A, b"1ra\r\n"),))),
        h.drain((9, 50)),
    ]
    assert [op_from_json(op_to_json(op)) for op in ops] == ops
