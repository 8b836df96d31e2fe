"""The core rules against retries (docs/workflows.md, "retry"): a ``retry``, a
``retry-group`` of a group the job failed into, or a retry of its upstream may make a
FAILED job run again. For each rule that takes a final fail as final: a history a
possible retry explains (not reported) and its near miss where no retry could have
happened (reported)."""

from __future__ import annotations

import pytest

from tests.support.fault_history import History, found, kinds_of, only
from tools.faults.checker import check
from tools.faults.history import COMPLETED, FAIL, FAILED, INFO, NEW, Reply
from tools.faults.jobops import final_fails, group_by_job

# --- grant-after-end ------------------------------------------------------------------


def _failed_then_granted(retry=None, retry_t=(3, 4)) -> History:
    h = History()
    h.add("j", (0, 1))  # -max-fails 0: every fail is final
    h.lease("j", (1, 1.5))
    h.fail("j", (2, 2.5))
    if retry == "retry":
        h.retry("j", retry_t)
    elif retry in ("retry info", "retry fail"):
        h.retry("j", retry_t, outcome=INFO if retry == "retry info" else FAIL)
    h.lease("j", (5, 6))
    return h


@pytest.mark.parametrize("retry", ["retry", "retry info"])
def test_a_grant_after_a_final_fail_and_a_retry_is_fine(retry):
    assert check(_failed_then_granted(retry).ops) == []


@pytest.mark.parametrize("case", ["no retry", "retry fail", "retry after the grant"])
def test_a_grant_after_a_final_fail_no_retry_explains_is_after_the_end(case):
    h = {"no retry": lambda: _failed_then_granted(),
         "retry fail": lambda: _failed_then_granted("retry fail"),
         "retry after the grant": lambda: _failed_then_granted("retry", (7, 8)),
         }[case]()
    v = only(check(h.ops), "grant-after-end")
    grant = [op for op in h.ops if op.kind == "lease"][-1]
    assert v.ops == (2, grant.index)


def test_a_retry_group_of_the_fail_s_group_explains_a_later_grant_and_another_does_not():
    h = History()
    h.add("j", (0, 1))
    h.lease("j", (1, 1.5))
    h.fail("j", (2, 2.5), group="g")
    h.retry_group("other", (3, 4), retried=0)
    h.lease("j", (5, 6))
    only(check(h.ops), "grant-after-end")
    h.retry_group("g", (3, 4))
    assert check(h.ops) == []


def test_a_retry_of_an_upstream_may_revive_its_dependents_down_the_graph():
    h = History()
    h.add("up", (0, 1))
    h.add("mid", (0, 1), after=["up"])
    h.add("last", (0, 1), after=["mid"])
    h.add("other", (0, 1))
    retry = h.retry("up", (3, 4), outcome=INFO)
    jobs = group_by_job(h.ops)
    assert [jobs[j].revivals for j in ("up", "mid", "last")] == [(retry,)] * 3
    assert jobs["other"].revivals == ()


def test_fails_before_a_retry_do_not_count_towards_max_fails_after_it():
    h = History()
    h.add("j", (0, 1), max_fails=2)
    h.lease("j", (1, 1.1))
    h.fail("j", (1.2, 1.3))
    h.lease("j", (3, 3.1))
    second = h.fail("j", (3.2, 3.3))  # final
    h.retry("j", (6, 6.1))
    h.lease("j", (6.2, 6.3))
    third = h.fail("j", (6.4, 6.5))  # fails 1 of 2 since the retry: PENDING again
    h.lease("j", (8, 8.1))
    finals = final_fails(group_by_job(h.ops)["j"])
    assert second in finals and third not in finals
    assert check(h.ops) == []
    h.lease("j", (4.5, 4.6))  # after the second fail, before any retry: after the end
    v = only(check(h.ops), "grant-after-end")
    assert v.ops == (second.index, len(h.ops) - 1)


# --- stale-read and result-mismatch after a final fail --------------------------------


def _reply(error):
    return Reply(error=error)


def test_a_read_after_a_final_fail_and_a_retry_may_see_the_job_unfinished():
    h = History()
    h.add("j", (0, 1))
    h.lease("j", (1, 1.5))
    h.fail("j", (2, 2.5))
    timeout = h.op("result", "j", (5, 5.1), FAIL, reply=_reply("-TIMEOUT"))
    h.inspect("j", (5, 5.1), state=NEW)
    assert kinds_of(check(h.ops)) == ["stale-read", "stale-read"]
    h.retry("j", (3, 4))
    assert check(h.ops) == []
    assert timeout.index == 3


def test_a_result_after_a_final_fail_and_a_retry_may_be_a_later_complete():
    h = History()
    h.add("j", (0, 1))
    h.lease("j", (1, 1.5))
    fail = h.fail("j", (2, 2.5), result=b"first run failed")
    h.lease("j", (4.5, 4.8))
    h.complete("j", (5, None), outcome=INFO, result=b"second run done")
    result = h.result("j", (6, 6.5), (True, b"second run done"))
    violations = check(h.ops)
    assert kinds_of(violations) == ["result-mismatch", "grant-after-end"]
    assert violations[0].ops == (fail.index, result.index)
    h.retry("j", (3, 4))
    assert check(h.ops, [found("j", state=COMPLETED, attempts=1,
                              result=(True, b"second run done"))]) == []


def test_the_read_back_of_a_retried_job_is_not_held_to_its_first_failure():
    h = History()
    h.add("j", (0, 1))
    h.lease("j", (1, 1.5))
    h.fail("j", (2, 2.5), result=b"first")
    read = found("j", state=FAILED, attempts=1, fails=1, result=(False, b"second"))
    assert "result-mismatch" in kinds_of(check(h.ops, [read]))
    h.retry("j", (3, 4))
    h.lease("j", (4.5, 4.8))
    h.fail("j", (5, None), outcome=INFO, result=b"second")
    assert check(h.ops, [read]) == []


# --- double-grant ---------------------------------------------------------------------


def test_two_grants_inside_a_ttr_with_a_final_fail_and_a_retry_between_are_fine():
    h = History()
    h.add("j", (0, 0.05), ttr=5000)
    h.lease("j", (0.1, 0.2), ttr=5000)
    h.fail("j", (0.3, 0.4))
    h.lease("j", (0.7, 0.8), ttr=5000)
    assert kinds_of(check(h.ops)) == ["double-grant", "grant-after-end"]
    h.retry("j", (0.5, 0.6))
    assert check(h.ops) == []


# --- attempts-out-of-bounds -----------------------------------------------------------


def test_attempts_and_fails_count_from_the_last_retry():
    h = History()
    h.add("j", (0, 1))
    h.lease("j", (1, 1.5))
    h.fail("j", (2, 2.5))
    h.retry("j", (3, 4))
    h.lease("j", (5, 6))
    assert check(h.ops, [found("j", state=4, attempts=1, fails=0)]) == []
    v = only(check(h.ops, [found("j", state=4, attempts=0, fails=0)]),
             "attempts-out-of-bounds")
    assert "attempts 0" in v.message
    h.retry("j", (7, None), outcome=INFO)  # may land any time: nothing is sure after it
    assert check(h.ops, [found("j", state=NEW, attempts=0, fails=0)]) == []
