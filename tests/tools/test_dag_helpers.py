"""The DAG checker's rule "each job worked once, each after its upstreams" on histories
built by hand (tools/dag_helpers.py): a lease given back because no client got it
is not a second working; any lease before the upstream's complete is a fault."""

from __future__ import annotations

import uuid

from eventq.core.job import UpstreamOutcome
from tools.dag_helpers import Moment, Notice, Timeline, edge_order_faults

UP, DOWN = uuid.UUID(int=1), uuid.UUID(int=2)
UP_COMPLETE = Moment(position=10, at_ms=1_000)


def history(*, leases, given_back=(), notice_at=20):
    """UP completed once; DOWN told of that complete at position ``notice_at``."""
    up = Timeline(0, leases=[Moment(5, 500)], completes=[UP_COMPLETE])
    notice = Notice(UP, UpstreamOutcome.COMPLETED, UP_COMPLETE.position, UP_COMPLETE.at_ms,
                    Moment(notice_at, 1_100))
    down = Timeline(1, upstreams=(UP,), leases=list(leases), given_back=list(given_back),
                    completes=[Moment(40, 3_000)], notices=[notice])
    return {UP: up, DOWN: down}


def test_one_lease_after_the_notice_is_right():
    assert edge_order_faults(history(leases=[Moment(30, 2_000)])) == []


def test_a_lease_given_back_then_leased_again_is_worked_once():
    lines = history(leases=[Moment(30, 2_000), Moment(35, 2_500)], given_back=[Moment(32, 2_100)])
    assert edge_order_faults(lines) == []


def test_two_leases_none_given_back_is_a_fault():
    [fault] = edge_order_faults(history(leases=[Moment(30, 2_000), Moment(35, 2_500)]))
    assert fault == f"{DOWN}: 2 leases (0 given back), 1 completes"


def test_a_given_back_lease_before_the_notice_is_still_a_fault():
    lines = history(leases=[Moment(15, 2_000), Moment(35, 2_500)], given_back=[Moment(16, 2_100)])
    assert edge_order_faults(lines) == [f"{DOWN} after {UP}: leased before the notice was applied"]
