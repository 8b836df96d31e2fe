"""The checker's log-time rules (tools/faults/logrules.py): for each, a job log that
breaks it (as a broken core would have decided it: ``forged``) and a legal one folded
by the real core that does not; then random legal logs, which never break any."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.fault_history import History, found, only
from tests.support.faultlog import JobLogBuilder, forged
from tools.faults.checker import check
from tools.faults.history import COMPLETED, INFO, LEASED
from tools.faults.logrules import history_against_log, log_violations, unreleased_grants
from tools.faults.logview import LogView, log_view


def kinds(log):
    return [v.kind for v in log_violations(log)]


# --- log-overlapping-grant ------------------------------------------------------------


def test_a_grant_while_the_lease_runs_overlaps():
    log = JobLogBuilder()
    log.add(0, ttr_ms=1000)
    log.start(10, 1)
    log.start(20, 2)
    assert kinds(forged(log, "ADDED", "ATTEMPT_STARTED", "ATTEMPT_STARTED")) == [
        "log-overlapping-grant"]
    assert kinds(log.fold()) == []  # the real core refused the second


def test_a_touch_keeps_the_lease_running_and_a_timeout_ends_it():
    log = JobLogBuilder()
    log.add(0, ttr_ms=1000)
    log.start(10, 1)
    log.touch(500, 1)
    log.start(600, 2)
    assert kinds(forged(log, "ADDED", "ATTEMPT_STARTED", "TOUCHED", "ATTEMPT_STARTED")) == [
        "log-overlapping-grant"]
    legal = JobLogBuilder()
    legal.add(0, ttr_ms=1000)
    legal.start(10, 1)
    legal.touch(500, 1)
    legal.timeout(1500, 1)
    legal.start(1600, 2)
    assert kinds(legal.fold()) == []
    assert sum(e.event == "ATTEMPT_STARTED" for e in legal.fold().entries) == 2


@given(st.sampled_from(["release", "retry-fail"]))
def test_a_release_or_a_fail_with_retries_left_ends_the_lease(how):
    log = JobLogBuilder()
    log.add(0, ttr_ms=1000, max_fails=3)
    log.start(10, 1)
    if how == "release":
        log.release(20, 1)
        log.start(30, 1)
    else:
        log.fail(20)
        log.start(30, 2)
    assert kinds(log.fold()) == []
    assert log.fold().entries[-1].event == "ATTEMPT_STARTED"


# --- log-grant-after-end --------------------------------------------------------------


@given(st.sampled_from([("complete", "COMPLETED"), ("fail", "FAILED"),
                        ("delete", "DELETED"), ("expire", "EXPIRED")]))
def test_a_grant_after_the_job_ended_is_reported(end):
    verb, event = end
    log = JobLogBuilder()
    log.add(0, ttr_ms=1000, ttl_ms=100 if verb == "expire" else 3_600_000)
    getattr(log, verb)(200)
    log.start(300, 1)
    # After an expiry the TTL has ended too.
    assert kinds(forged(log, "ADDED", event, "ATTEMPT_STARTED")) == (
        ["log-grant-after-end", "log-grant-after-ttl"] if verb == "expire"
        else ["log-grant-after-end"])
    assert kinds(log.fold()) == []


def test_a_grant_after_a_final_fail_and_a_retry_is_fine_and_without_the_retry_is_not():
    log = JobLogBuilder()
    log.add(0, ttr_ms=1000)
    log.start(10, 1)
    log.fail(20)  # -max-fails 0: FAILED
    log.retry(30)
    log.start(40, 1)  # attempts start afresh
    folded = log.fold()
    assert [e.event for e in folded.entries] == [
        "ADDED", "ATTEMPT_STARTED", "FAILED", "RETRIED", "ATTEMPT_STARTED"]
    assert kinds(folded) == []
    refused = forged(log, "ADDED", "ATTEMPT_STARTED", "FAILED", None, "ATTEMPT_STARTED")
    assert kinds(refused) == ["log-grant-after-end"]


def test_a_retry_with_a_delay_is_ready_only_after_it():
    log = JobLogBuilder()
    log.add(0, ttr_ms=1000)
    log.start(10, 1)
    log.fail(20)
    log.retry(30, delay_ms=500)
    log.start(100, 1)
    log.start(530, 1)
    assert kinds(forged(log, "ADDED", "ATTEMPT_STARTED", "FAILED", "RETRIED",
                        "ATTEMPT_STARTED", None)) == ["log-grant-before-ready"]
    assert kinds(log.fold()) == []
    assert [e.outcome for e in log.fold().entries][-2:] == ["ignored", "accepted"]


def test_a_dependent_an_upstream_failed_has_ended():
    log = JobLogBuilder()
    log.add(0, ttr_ms=1000)
    log.fail(20)  # stands for the upstream's notice: a broken core accepted it so
    log.start(30, 1)
    assert kinds(forged(log, "ADDED", "UPSTREAM_FAILED", "ATTEMPT_STARTED")) == [
        "log-grant-after-end"]
    assert kinds(forged(log, "ADDED", "UPSTREAM_RETRIED", "ATTEMPT_STARTED")) == []


def test_a_recurrence_slot_job_starts_with_the_add_its_slot_wrote():
    """A fire writes its slot's add (eventq/core/recurrence.py): the job's log begins
    there, as any added job's; a second fire of the slot is a Duplicate job."""
    log = JobLogBuilder()
    log.add(0, ttr_ms=1000)
    log.start(10, 1)
    log.complete(20)
    log.add(2000, ttr_ms=1000)  # the slot fired again: refused while the job lives
    log.start(2010, 2)
    folded = log.fold()
    assert [e.outcome for e in folded.entries] == [
        "accepted", "accepted", "accepted", "rejected", "ignored"]
    assert kinds(folded) == []
    assert kinds(forged(log, "ADDED", "ATTEMPT_STARTED", "COMPLETED", None,
                        "ATTEMPT_STARTED")) == ["log-grant-after-end"]


def test_attempts_are_bounded_by_the_log_since_the_last_retry():
    log = JobLogBuilder()
    log.add(0)
    log.start(150, 1)
    log.fail(250)
    log.retry(350)
    log.start(550, 1)
    h, job = _history_of(log)
    h.add(job, (0, 0.1))
    h.lease(job, (0.1, 0.2))
    h.fail(job, (0.2, 0.3))
    h.retry(job, (0.3, 0.4))
    h.lease(job, (0.5, 0.6))
    assert check(h.ops, [found(job, state=LEASED, attempts=1)], log=log.view()) == []
    v = only(check(h.ops, [found(job, state=LEASED, attempts=2)], log=log.view()),
             "attempts-out-of-bounds")
    assert "up to attempt 1" in v.message


def test_a_grant_of_a_job_the_log_was_not_read_for_is_not_judged_by_it():
    slot = JobLogBuilder()  # a recurrence's slot job: no op of ours created it
    other = JobLogBuilder()
    other.add(0)
    h, job = _history_of(slot)
    h.lease(job, (0.1, 0.2))
    asked = log_view(other.commands, [other.job_id])
    assert "unexplained-grant" not in [v.kind for v in check(h.ops, log=asked)]
    everything = log_view(other.commands)  # read for every job: its log is empty
    assert "unexplained-grant" in [v.kind for v in check(h.ops, log=everything)]


def test_a_grant_after_the_last_attempt_timed_out_is_reported():
    log = JobLogBuilder()
    log.add(0, ttr_ms=1000)
    log.start(10, 1)
    log.timeout(1010, 1)
    log.start(1020, 2)
    events = ("ADDED", "ATTEMPT_STARTED", ("ATTEMPT_TIMED_OUT", False), "ATTEMPT_STARTED")
    assert kinds(forged(log, *events)) == ["log-grant-after-end"]
    requeued = ("ADDED", "ATTEMPT_STARTED", ("ATTEMPT_TIMED_OUT", True), "ATTEMPT_STARTED")
    assert kinds(forged(log, *requeued)) == []


# --- log-grant-before-ready -----------------------------------------------------------


def test_a_grant_before_the_schedule_time_is_reported():
    log = JobLogBuilder()
    log.schedule(time_ms=5000, at_ms=0)
    log.start(4000, 1)
    log.start(5000, 1)
    broken = forged(log, "ADDED", "ATTEMPT_STARTED", None)
    assert kinds(broken) == ["log-grant-before-ready"]
    folded = log.fold()
    assert [e.outcome for e in folded.entries] == ["accepted", "ignored", "accepted"]
    assert kinds(folded) == []


def test_a_grant_inside_a_backoff_wait_is_reported():
    log = JobLogBuilder()
    log.add(0, ttr_ms=1000, max_fails=3, backoff_ms=200)
    log.start(10, 1)
    log.fail(20)  # return 1: ready at 220
    log.start(100, 2)
    log.start(220, 2)
    assert kinds(forged(log, "ADDED", "ATTEMPT_STARTED", "FAIL_RETRIED", "ATTEMPT_STARTED",
                        None)) == ["log-grant-before-ready"]
    assert kinds(log.fold()) == []
    assert [e.outcome for e in log.fold().entries][-2:] == ["ignored", "accepted"]


# --- log-early-timeout, log-early-expiry ----------------------------------------------


def test_a_timeout_before_the_deadline_is_reported():
    log = JobLogBuilder()
    log.add(0, ttr_ms=1000)
    log.start(10, 1)
    log.touch(800, 1, ttr_ms=1000)  # deadline 1800
    log.timeout(1500, 1)
    log.timeout(1800, 1)
    assert kinds(forged(log, "ADDED", "ATTEMPT_STARTED", "TOUCHED",
                        ("ATTEMPT_TIMED_OUT", True), None)) == ["log-early-timeout"]
    assert kinds(log.fold()) == []
    assert log.fold().entries[-1].event == "ATTEMPT_TIMED_OUT"


def test_an_expiry_before_the_ttl_ends_is_reported():
    log = JobLogBuilder()
    log.schedule(time_ms=1000, at_ms=0, ttl_ms=2000)  # expires at 3000
    log.expire(2500)
    log.expire(3000)
    assert kinds(forged(log, "ADDED", "EXPIRED", None)) == ["log-early-expiry"]
    assert kinds(log.fold()) == []
    assert log.fold().entries[-1].event == "EXPIRED"


def test_a_grant_once_the_ttl_ended_is_reported_though_the_expiry_is_not_in_yet():
    log = JobLogBuilder()
    log.add(0, ttl_ms=1000)  # its TTL ends at 1000
    log.start(1000, 1)
    assert kinds(forged(log, "ADDED", "ATTEMPT_STARTED")) == ["log-grant-after-ttl"]
    assert kinds(log.fold()) == []
    assert log.fold().entries[-1].outcome == "ignored"  # the real core refuses it
    scheduled = JobLogBuilder()
    scheduled.schedule(time_ms=5000, at_ms=0, ttl_ms=1000)  # counts from its time: 6000
    scheduled.start(5999, 1)
    assert kinds(scheduled.fold()) == []
    assert scheduled.fold().entries[-1].event == "ATTEMPT_STARTED"


def test_a_retry_leaves_the_ttl_where_it_was():
    log = JobLogBuilder()
    log.add(0, ttl_ms=1000)
    log.start(10, 1)
    log.fail(20)
    log.retry(900)
    log.start(1100, 1)
    assert kinds(forged(log, "ADDED", "ATTEMPT_STARTED", "FAILED", "RETRIED",
                        "ATTEMPT_STARTED")) == ["log-grant-after-ttl"]


def test_a_job_without_ttl_never_expires():
    log = JobLogBuilder()
    log.add(0, ttl_ms=0)
    log.expire(10**9)
    assert kinds(forged(log, "ADDED", "EXPIRED")) == ["log-early-expiry"]
    assert kinds(log.fold()) == []


# --- random legal logs ----------------------------------------------------------------

ACTIONS = ("start",) * 6 + ("timeout",) * 4 + ("release", "touch", "touch", "complete",
                                              "fail", "fail", "delete", "expire", "retry",
                                              "retry")


def _current_attempts(log) -> int:
    """The attempts of the job as the real core has it now (0 when gone)."""
    entries = log.fold().entries
    job = entries[-1].job_after if entries else None
    return 0 if job is None else job.attempts


@st.composite
def legal_logs(draw):
    """A job's log with commands in any order at growing times: whatever they are,
    the real core decides them, so the log is one a correct processor writes."""
    log = JobLogBuilder()
    ttr = draw(st.sampled_from((100, 1000)))
    ttl = draw(st.sampled_from((0, 500, 3_600_000)))
    config = dict(ttr_ms=ttr, max_fails=draw(st.integers(0, 3)),
                  backoff_ms=draw(st.sampled_from((0, 200))))
    if draw(st.booleans()):
        log.schedule(time_ms=draw(st.integers(0, 2000)), at_ms=0, ttr_ms=ttr,
                     ttl_ms=ttl or 3_600_000)
    else:
        log.add(0, ttl_ms=ttl, **config)
    now = 0
    for _ in range(draw(st.integers(0, 25))):
        now += draw(st.integers(0, 700))
        action = draw(st.sampled_from(ACTIONS))
        # mostly the attempt the core expects (the next one for a start), at times any
        expected = max(1, _current_attempts(log) + (action == "start"))
        attempt = draw(st.sampled_from((expected, expected, expected, 1, 2)))
        if action in ("start", "timeout", "release"):
            getattr(log, action)(now, attempt)
        elif action == "touch":
            log.touch(now, attempt, draw(st.sampled_from((None, 100, 2000))))
        elif action in ("complete", "fail"):
            getattr(log, action)(now, result=f"{action} {len(log.commands)}".encode())
        elif action == "retry":
            log.retry(now, draw(st.sampled_from((0, 0, 300))))
        else:
            getattr(log, action)(now)
    return log


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(legal_logs())
def test_a_log_the_real_core_decided_breaks_no_rule(log):
    assert kinds(log.fold()) == []


# --- the history against the log: unlogged-ack, unexplained-grant ---------------------


def clients_of(log, rng) -> History:
    """The ok ops clients saw of a legal log: each accepted add, complete, fail and
    delete, and each start-attempt no release gave back (a lease that got the job; a
    released one reached nobody: an info lease), invoked and answered up to 5 s around
    its command's place (position p at p seconds): latencies far past any TTR."""
    h = History()
    released = {e.position for e in log.fold().entries} - {
        e.position for e in unreleased_grants(log.fold())}
    for entry in log.fold().entries:
        if not entry.accepted:
            continue
        t = (entry.position - rng.uniform(0, 5), entry.position + rng.uniform(0, 5))
        if entry.event == "ADDED":
            h.add(log.job_id, t, kind=entry.kind.lower())
        elif entry.event == "ATTEMPT_STARTED" and entry.position in released:
            h.lease(None, (t[0], None), outcome=INFO)
        elif entry.event == "ATTEMPT_STARTED":
            h.lease(log.job_id, t)
        elif entry.kind in ("COMPLETE", "FAIL"):
            getattr(h, entry.kind.lower())(log.job_id, t, result=entry.result)
        elif entry.kind == "DELETE":
            h.delete(log.job_id, t)
        elif entry.kind == "RETRY":
            h.retry(log.job_id, t)
    return h


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(legal_logs(), st.randoms(use_true_random=False))
def test_clients_of_a_legal_log_are_all_explained_and_one_grant_more_is_not(log, rng):
    h = clients_of(log, rng)
    others = [op for op in h.ops if op.kind != "lease"]
    grants = [op for op in h.ops if op.kind == "lease" and op.outcome == "ok"]
    assert history_against_log(grants, others, log.fold()) == []
    if grants:  # the same attempt handed to a second client
        twice = h.lease(log.job_id, (grants[0].invoke_s, grants[0].return_s))
        found = history_against_log([*grants, twice], others, log.fold())
        assert [v.kind for v in found] == ["unexplained-grant"]


def _history_of(log):
    """A history whose job is ``log``'s (its id a UUID, as the load's are)."""
    h = History()
    return h, log.job_id


def test_a_client_grant_without_a_start_attempt_in_the_log_is_unexplained():
    """Two grants 2 s apart under a 1 s TTR: the client-time double-grant rule cannot
    tell them from a timed-out lease granted again; the log, with one start-attempt,
    can."""
    log = JobLogBuilder()
    log.add(0, ttr_ms=1000)
    log.start(10, 1)
    h, job = _history_of(log)
    h.add(job, (0, 1))
    h.lease(job, (1, 2))
    assert check(h.ops, log=log.view()) == []
    second = h.lease(job, (3, 4))  # the log granted the job once only
    v = only(check(h.ops, log=log.view()), "unexplained-grant")
    assert v.ops == (second.index,)


def test_a_start_attempt_given_back_explains_no_client_grant():
    log = JobLogBuilder()
    log.add(0, ttr_ms=1000)
    log.start(10, 1)
    log.release(20, 1)
    h, job = _history_of(log)
    h.add(job, (0, 1))
    h.lease(job, (1, 2))
    only(check(h.ops, log=log.view()), "unexplained-grant")


def test_a_grant_is_explained_only_by_a_start_attempt_inside_its_bounds():
    """The log's first start-attempt came before the fail that returned before the
    second lease was invoked: it explains one of the leases before the fail, never both."""
    log = JobLogBuilder()
    log.add(0, ttr_ms=1000, max_fails=3)
    log.start(10, 1)
    log.fail(20, result=b"f1")
    log.start(30, 2)
    h, job = _history_of(log)
    h.add(job, (0, 1), max_fails=3)
    first = h.lease(job, (1, 2))
    h.fail(job, (3, 4), result=b"f1")
    assert check(h.ops, log=log.view()) == []
    late = h.lease(job, (5, 6))
    assert check(h.ops, log=log.view()) == []  # start-attempt 2 explains it
    early = h.lease(job, (0.5, 0.9))  # returned before the fail was invoked
    v = only(check(h.ops, log=log.view()), "unexplained-grant")
    assert v.ops in ((first.index,), (early.index,))
    assert late.index not in v.ops


def test_a_repeated_fail_that_landed_twice_bounds_a_grant_by_either_of_its_commands():
    """A fail with no reply is repeated with the same bytes, and both land (a fail with
    fails left is accepted twice); a lease between them is explained by the start-attempt
    between the two commands, though the first of them comes before it (campaign seed
    9003: the checker bounded the grant by the first and reported it unexplained)."""
    log = JobLogBuilder()
    log.add(0, ttr_ms=1000, max_fails=3)
    log.start(10, 1)
    log.fail(20, result=b"f1")  # the first attempt's, whose reply was lost
    log.start(30, 2)
    log.fail(40, result=b"f1")  # its repeat
    h, job = _history_of(log)
    h.add(job, (0, 1), max_fails=3)
    h.lease(job, (1, 2))
    h.fail(job, (3, None), outcome=INFO, result=b"f1")
    h.lease(job, (3.5, 4))
    h.fail(job, (5, 6), result=b"f1")  # the repeat, invoked after the lease returned
    assert [v.kind for v in check(h.ops, log=log.view())
            if v.kind == "unexplained-grant"] == []


@pytest.mark.parametrize("kind", ["add", "complete", "fail", "delete"])
def test_an_acknowledged_op_whose_command_the_log_lacks_is_unlogged(kind):
    log = JobLogBuilder()
    log.add(0, ttr_ms=1000)
    h, job = _history_of(log)
    h.add(job, (0, 1))
    if kind == "add":
        log.commands.clear()
        missing = h.ops[0]
    else:
        missing = getattr(h, kind)(job, (2, 3))
    v = only(check(h.ops, log=log.view()), "unlogged-ack")
    assert v.ops == (missing.index,)
    if kind != "add":
        getattr(log, kind)(20, **({"result": b"done"} if kind == "complete" else
                                  {"result": b"failed"} if kind == "fail" else {}))
        assert check(h.ops, log=log.view()) == []


def test_a_complete_is_found_in_the_log_by_its_bytes():
    log = JobLogBuilder()
    log.add(0)
    log.complete(20, result=b"someone else's")
    h, job = _history_of(log)
    h.add(job, (0, 1))
    h.complete(job, (2, 3), result=b"mine")
    only(check(h.ops, log=log.view()), "unlogged-ack")


# --- attempts and empty failures from the log -----------------------------------------


def test_attempts_are_bounded_by_the_log_s_start_attempts():
    log = JobLogBuilder()
    log.add(0, ttr_ms=1000)
    log.start(10, 1)
    h, job = _history_of(log)
    h.add(job, (0, 1))
    for n in range(5):  # leases of the queue that may have spent attempts unseen
        h.lease(None, (1 + n, None), outcome=INFO)
    too_many = found(job, state=LEASED, attempts=3)
    assert check(h.ops, [too_many]) == []  # the old, loose bound lets it pass
    only(check(h.ops, [too_many], log=log.view()), "attempts-out-of-bounds")
    assert check(h.ops, [found(job, state=LEASED, attempts=1)], log=log.view()) == []


def test_an_empty_failure_needs_the_log_to_show_attempts_exhausted():
    log = JobLogBuilder()
    log.add(0, ttr_ms=100)
    log.start(10, 1)
    h, job = _history_of(log)
    h.add(job, (0, 1))
    h.result(job, (5, 6), (False, b""))
    only(check(h.ops, log=log.view()), "result-mismatch")
    exhausted = forged(log, "ADDED", "ATTEMPTS_EXHAUSTED")
    assert check(h.ops, log=LogView({job: exhausted})) == []


def test_a_legal_history_with_its_log_passes():
    log = JobLogBuilder()
    log.add(0, ttr_ms=1000, max_fails=2)
    log.start(10, 1)
    log.fail(20, result=b"f1")
    log.start(30, 2)
    log.timeout(1030, 2)
    log.start(1040, 3)
    log.complete(1050, result=b"r")
    h, job = _history_of(log)
    h.add(job, (0, 1), max_fails=2)
    h.lease(job, (1, 2))
    h.fail(job, (2.5, 3), result=b"f1")
    h.lease(None, (3.5, None), outcome=INFO)  # start-attempt 2 reached nobody
    h.lease(job, (4, 5))
    h.complete(job, (6, 7), result=b"r")
    h.result(job, (8, 9), (True, b"r"))
    read = found(job, state=COMPLETED, attempts=3, fails=1, result=(True, b"r"))
    assert check(h.ops, [read], "d", "d", log=log.view(), min_ok_ops=1) == []


def test_a_long_history_with_its_log_is_checked_in_seconds():
    """A campaign run leaves tens of thousands of jobs: the fold and the log rules stay
    linear in them."""
    h, commands, reads = History(), [], []
    for n in range(10_000):
        log, t, result = JobLogBuilder(), n * 0.01, f"r{n}".encode()
        log.add(0)
        log.start(10, 1)
        log.complete(20, result=result)
        commands += log.commands
        h.add(log.job_id, (t, t + 0.005))
        h.lease(log.job_id, (t + 0.005, t + 0.006))
        h.complete(log.job_id, (t + 0.006, t + 0.007), result=result)
        reads.append(found(log.job_id, at=500.0, state=COMPLETED, attempts=1,
                           result=(True, result)))
    started = time.process_time()  # CPU time: other processes on the box do not count
    assert check(h.ops, reads, log=log_view(commands)) == []
    assert time.process_time() - started < 10
