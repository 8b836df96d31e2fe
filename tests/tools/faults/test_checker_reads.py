"""The checker's per-job read rules (tools/faults/readrules.py) and the ends that make
a job final: for each, a small history that breaks it and a near miss that does not."""

from __future__ import annotations

import pytest

from tests.support.fault_history import History, found, kinds_of, only
from tools.faults.checker import check
from tools.faults.history import COMPLETED, FAIL, FAILED, INFO, LEASED, NEW, PENDING, Reply

# --- stale-read -----------------------------------------------------------------------


def test_a_result_timing_out_after_an_acknowledged_complete_is_stale():
    h = History()
    h.add("j", (0, 1))
    done = h.complete("j", (2, 3))
    late = h.op("result", "j", (4, 5), FAIL, reply=Reply(error="-TIMEOUT"))
    assert only(check(h.ops), "stale-read").ops == (done.index, late.index)


def test_a_result_racing_the_complete_may_time_out():
    h = History()
    h.add("j", (0, 1))
    h.complete("j", (2, 3))
    h.op("result", "j", (2.5, 5), FAIL, reply=Reply(error="-TIMEOUT"))
    h.complete("k", (2, None), outcome=INFO)
    assert check(h.ops) == []


@pytest.mark.parametrize("state", [NEW, PENDING, LEASED, FAILED])
def test_an_inspect_after_an_acknowledged_complete_must_show_it_completed(state):
    h = History()
    h.add("j", (0, 1))
    h.complete("j", (2, 3))
    h.inspect("j", (4, 5), state=state)
    only(check(h.ops), "stale-read")


def test_an_inspect_showing_completed_or_invoked_before_the_return_is_fine():
    h = History()
    h.add("j", (0, 1))
    h.inspect("j", (2.5, 3.5), state=LEASED)  # invoked before the complete returned
    h.complete("j", (2, 3))
    h.inspect("j", (4, 5), state=COMPLETED)
    assert check(h.ops) == []


def test_after_a_final_fail_a_result_must_be_that_fail_and_never_time_out():
    h = History()
    h.add("j", (0, 1))  # no -max-fails: the first fail is final
    h.fail("j", (2, 3), result=b"boom")
    h.op("result", "j", (4, 5), FAIL, reply=Reply(error="-TIMEOUT"))
    h.result("j", (6, 7), (False, b"other"))
    h.inspect("j", (8, 9), state=PENDING)
    assert kinds_of(check(h.ops)) == ["result-mismatch", "stale-read", "stale-read"]


def test_a_fail_with_retries_left_leaves_reads_free():
    h = History()
    h.add("j", (0, 1), max_fails=3)
    h.fail("j", (2, 3), result=b"boom")
    h.op("result", "j", (4, 5), FAIL, reply=Reply(error="-TIMEOUT"))
    h.inspect("j", (8, 9), state=PENDING)
    assert check(h.ops) == []


# --- alive-after-delete ---------------------------------------------------------------


@pytest.mark.parametrize("kind", ["touch", "complete", "fail", "inspect", "result"])
def test_an_acknowledged_op_after_an_acknowledged_delete_is_reported(kind):
    h = History()
    h.add("j", (0, 1))
    gone = h.delete("j", (2, 3))
    if kind == "result":
        late = h.result("j", (4, 5), (True, b"x"))
    elif kind == "inspect":
        late = h.inspect("j", (4, 5), state=NEW)
    else:
        late = getattr(h, kind)("j", (4, 5))
    violations = check(h.ops)
    assert "alive-after-delete" in kinds_of(violations)
    assert next(v for v in violations if v.kind == "alive-after-delete").ops == (
        gone.index, late.index)


def test_an_op_racing_the_delete_or_after_a_re_creation_is_fine():
    h = History()
    h.add("j", (0, 1))
    h.delete("j", (2, 3))
    h.touch("j", (2.5, 4))  # invoked before the delete returned
    h.add("j", (5, 6))  # the id made again
    h.inspect("j", (7, 8), state=NEW)
    assert check(h.ops) == []


# --- grant-after-end: a final fail ----------------------------------------------------


def test_a_grant_after_a_final_fail_is_reported_and_after_a_retrying_one_is_not():
    h = History()
    h.add("j", (0, 1), ttr=100)
    h.lease("j", (1, 1.1), ttr=100)
    h.fail("j", (2, 3))
    h.lease("j", (4, 5), ttr=100)
    only(check(h.ops), "grant-after-end")
    retrying = History()
    retrying.add("j", (0, 1), ttr=100, max_fails=2)
    retrying.lease("j", (1, 1.1), ttr=100)
    retrying.fail("j", (2, 3))
    retrying.lease("j", (4, 5), ttr=100)
    assert check(retrying.ops) == []


def test_the_read_back_of_a_finally_failed_job_is_its_fail():
    h = History()
    h.add("j", (0, 1))
    h.fail("j", (2, 3), result=b"boom")
    fine = found("j", state=FAILED, fails=1, result=(False, b"boom"))
    assert check(h.ops, [fine]) == []
    wrong = found("j", state=FAILED, fails=1, result=(False, b""))
    only(check(h.ops, [wrong]), "result-mismatch")
