"""The campaign's schedule of faults (tools/faults/plan.py ``plan_faults``): a pure
function of the seed and the kinds it draws from, and within the rules every run
relies on."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tools.faults.campaign import SUITE_RUNS, SUITE_SECONDS
from tools.faults.plan import (
    KINDS,
    QUIET_S,
    SESSION_TIMEOUT_MS,
    SHORT_PAUSE_TTR_MS,
    Fault,
    Kind,
    plan_faults,
)

KILLS = {"kill-process", "graceful-restart"}
PAUSES = {"pause-process", "pause-short"}
CUTS = {"isolate-process", "one-way-cut", "cut-leaders", "cut-clients", "cut-peers"}


def active_at(faults, moment):
    return [f for f in faults if f.start_s <= moment < f.end_s]


def members_at(faults: list[Fault], fault: Fault, processes: int = 3) -> set[int]:
    """The processes that are members when ``fault`` begins, by the plan itself."""
    members = set(range(processes))
    for earlier in faults:
        if earlier is fault:
            break
        if earlier.kind == "scale-out":
            members.add(earlier.target)
        elif earlier.kind == "scale-in":
            members.discard(earlier.target)
    return members


@given(st.integers(0, 10**9), st.floats(20, 600),
       st.none() | st.sets(st.sampled_from(sorted(KINDS)), min_size=1))
@settings(max_examples=300, deadline=None)
def test_a_plan_keeps_the_rules(seed, seconds, kinds):
    kinds = tuple(sorted(kinds)) if kinds else None
    faults = plan_faults(seed, seconds, kinds=kinds)
    assert plan_faults(seed, seconds, kinds=kinds) == faults  # the seed alone decides
    for fault in faults:
        assert fault.kind in (kinds or KINDS)
        assert 0 < fault.start_s and fault.duration_s > 0
        assert fault.end_s <= seconds - QUIET_S + 1e-9  # healed before the quiet end
        overlapping = active_at(faults, fault.start_s)
        assert len(overlapping) <= 2  # at most two at once
        if fault.spec.alone:
            assert overlapping == [fault]
        else:
            assert sum(f.on_broker for f in overlapping) <= 1  # one broker at a time
        held = [t for f in overlapping for t in f.targets()]
        assert len(held) == len(set(held))  # never the same target twice at once
        if fault.spec.aim in ("process", "pair"):
            aimed = {fault.target} | ({fault.other} if fault.other is not None else set())
            assert aimed <= members_at(faults, fault)  # never one that left, or not yet there
    for kind in ("scale-out", "scale-in", "rolling-restart"):
        assert sum(f.kind == kind for f in faults) <= 1


def test_a_minute_has_several_faults_and_some_runs_have_two_at_once():
    plans = [plan_faults(seed, 60) for seed in range(300)]
    assert min(len(plan) for plan in plans) >= 2
    assert any(len(active_at(plan, f.start_s)) == 2 for plan in plans for f in plan)
    assert {f.kind for plan in plans for f in plan} == set(KINDS)
    pauses = [f for plan in plans for f in plan if f.kind == "pause-process"]
    assert sum(f.duration_s > 6 for f in pauses) > len(pauses) / 2  # mostly past the session


def test_one_kind_alone_is_all_a_run_has():
    for kind in KINDS:
        plans = [plan_faults(seed, 60, kinds=(kind,)) for seed in range(20)]
        assert any(plans), kind
        assert {f.kind for plan in plans for f in plan} == {kind}


def test_a_short_pause_outlasts_the_ttr_but_not_the_session():
    pauses = [f for seed in range(200) for f in plan_faults(seed, 60, kinds=("pause-short",))]
    assert pauses
    assert all(SHORT_PAUSE_TTR_MS / 1000 < f.duration_s < SESSION_TIMEOUT_MS / 1000
               for f in pauses)


def test_unknown_kinds_and_bad_kinds_are_refused():
    with pytest.raises(ValueError, match="unknown fault kinds"):
        plan_faults(1, 60, kinds=("kill-everyone",))
    with pytest.raises(ValueError, match="aim"):
        Kind("x", "planet", (1, 2))
    with pytest.raises(ValueError, match="duration"):
        Kind("x", "process", (3, 2))


@pytest.mark.parametrize("seed, kinds", SUITE_RUNS)
def test_each_suite_run_has_a_kill_a_pause_and_a_cut(seed, kinds):
    """The suite's short runs (tests/e2e/test_fault_campaign.py) must each have a process
    killed or restarted, a pause and a cut: the test then asserts each took effect."""
    plan = plan_faults(seed, SUITE_SECONDS, kinds=kinds)
    planned = {f.kind for f in plan}
    assert planned & KILLS and planned & PAUSES and planned & CUTS, planned


def test_every_kind_is_in_exactly_one_family_mix():
    from tools.faults.plan import KINDS, MIXES

    families = [kinds for name, kinds in MIXES.items() if name != "all"]
    assert sorted(k for kinds in families for k in kinds) == sorted(KINDS)
    assert MIXES["all"] == tuple(KINDS)
