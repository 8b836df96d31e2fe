"""The campaign's schedule of faults (tools/faults/campaign.py ``plan_faults``): a pure
function of the seed, and within the rules every run relies on."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tools.faults.campaign import (
    BROKER_FAULTS,
    PROCESS_FAULTS,
    QUIET_S,
    SESSION_TIMEOUT_MS,
    SUITE_SECONDS,
    SUITE_SEED,
    plan_faults,
)


def active_at(faults, moment):
    return [f for f in faults if f.start_s <= moment < f.end_s]


@given(st.integers(0, 10**9), st.floats(20, 600))
@settings(max_examples=300, deadline=None)
def test_a_plan_keeps_the_rules(seed, seconds):
    faults = plan_faults(seed, seconds)
    assert plan_faults(seed, seconds) == faults  # the seed alone decides
    for fault in faults:
        assert fault.kind in PROCESS_FAULTS + BROKER_FAULTS
        assert 0 < fault.start_s and fault.duration_s > 0
        assert fault.end_s <= seconds - QUIET_S + 1e-9  # healed before the quiet end
        overlapping = active_at(faults, fault.start_s)
        assert len(overlapping) <= 2  # at most two at once
        assert sum(f.on_broker for f in overlapping) <= 1  # one broker at a time
        targets = [(f.on_broker, f.target) for f in overlapping]
        assert len(targets) == len(set(targets))  # never the same target twice at once


def test_a_minute_has_several_faults_and_some_runs_have_two_at_once():
    plans = [plan_faults(seed, 60) for seed in range(200)]
    assert min(len(plan) for plan in plans) >= 2
    assert any(len(active_at(plan, f.start_s)) == 2 for plan in plans for f in plan)
    kinds = {f.kind for plan in plans for f in plan}
    assert kinds == set(PROCESS_FAULTS + BROKER_FAULTS)
    pauses = [f for plan in plans for f in plan if f.kind == "pause-process"]
    assert sum(f.duration_s > 6 for f in pauses) > len(pauses) / 2  # mostly past the session


def test_the_suites_one_run_has_every_kind_of_fault():
    """The suite runs the campaign once (tests/e2e/test_fault_campaign.py): its plan has
    each kind, two at once, a pause past the session timeout, and a kill -9 of an eventq
    process before one of a broker (what the suite's scale-out test did by hand)."""
    plan = plan_faults(SUITE_SEED, SUITE_SECONDS)
    assert {f.kind for f in plan} == set(PROCESS_FAULTS + BROKER_FAULTS)
    assert any(len(active_at(plan, f.start_s)) == 2 for f in plan)
    assert any(f.kind == "pause-process" and f.duration_s > SESSION_TIMEOUT_MS / 1000
               for f in plan)
    kills = [f.kind for f in plan if f.kind.startswith("kill-")]
    assert kills.index("kill-process") < kills.index("kill-broker")
