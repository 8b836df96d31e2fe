"""Job: validation on construction, readiness and lease order."""

from __future__ import annotations

import dataclasses
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventq.core import (
    Job,
    State,
    attempt_limit,
    is_final,
    is_ready,
    is_scheduled_waiting,
    job_with,
    lease_order_key,
)
from eventq.core import make_job as core_make_job
from eventq.core.job import JOB_FIELD_NAMES
from eventq.limits import MAX_ATTEMPTS_LIMIT, MAX_DEADLINE_MS, MAX_PAYLOAD_BYTES, MAX_TTL_MS
from support.core_strategies import live_jobs

JID = uuid.UUID("61a444a0-6128-41c0-8078-cc757d3bd2d8")


def make_job(**changes) -> Job:
    fields = dict(
        id=JID,
        name="q",
        ttr_ms=1000,
        ttl_ms=60_000,
        payload=b"p",
        priority=0,
        max_attempts=0,
        max_fails=0,
        attempts=0,
        fails=0,
        state=State.NEW,
        created_ms=10_000,
        scheduled_ms=None,
        expires_ms=70_000,
        lease_deadline_ms=None,
        result=None,
        result_ok=None,
        version=7,
    )
    fields.update(changes)
    return Job(**fields)


def test_state_numbers_are_the_protocols():
    assert [(s.name, int(s)) for s in State] == [
        ("NEW", 0), ("COMPLETED", 1), ("FAILED", 2), ("PENDING", 3), ("LEASED", 4),
        ("WAITING", 5),
    ]  # fmt: skip


def test_valid_jobs_construct():
    make_job()
    make_job(ttl_ms=0, expires_ms=None)  # a run job
    make_job(scheduled_ms=50_000, expires_ms=110_000)
    make_job(scheduled_ms=5_000, expires_ms=65_000)  # scheduled in the past of creation
    make_job(state=State.LEASED, attempts=1, lease_deadline_ms=11_000)
    make_job(state=State.COMPLETED, result=b"r", result_ok=True)
    make_job(state=State.FAILED, result=b"", result_ok=False, fails=1)
    make_job(ttl_ms=MAX_TTL_MS, expires_ms=MAX_DEADLINE_MS)  # saturated expiry
    make_job(payload=b"x" * MAX_PAYLOAD_BYTES)


def test_state_int_is_coerced():
    assert make_job(state=3).state is State.PENDING


@pytest.mark.parametrize(
    "changes",
    [
        dict(id="61a444a0-6128-41c0-8078-cc757d3bd2d8"),
        dict(name=""),
        dict(name="a b"),
        dict(name="é"),
        dict(name="x" * 256),
        dict(name=b"q"),
        dict(ttr_ms=0),
        dict(ttr_ms=86_400_001),
        dict(ttr_ms=True),
        dict(ttr_ms=1.0),
        dict(ttl_ms=-1),
        dict(payload="p"),
        dict(payload=b"x" * (MAX_PAYLOAD_BYTES + 1)),
        dict(priority=2**31),
        dict(priority=-(2**31) - 1),
        dict(max_attempts=256),
        dict(max_fails=256),
        dict(max_attempts=2, attempts=3),
        dict(attempts=MAX_ATTEMPTS_LIMIT + 1),
        dict(attempts=-1),
        dict(state=5),
        dict(state="NEW"),
        dict(state=True),
        dict(fails=1),  # a live job with max_fails 0 has never failed
        dict(max_fails=3, fails=3),  # live: fails < max_fails
        dict(state=State.FAILED, result=b"", result_ok=False, fails=2),  # > max(max_fails,1)
        dict(expires_ms=None),  # ttl but no expiry
        dict(expires_ms=70_001),  # expiry not created + ttl
        dict(ttl_ms=0),  # no ttl but expiry
        dict(ttl_ms=0, expires_ms=None, scheduled_ms=20_000),  # scheduled run job
        dict(scheduled_ms=50_000),  # expiry must count from the scheduled time
        dict(scheduled_ms=-100_000, expires_ms=-40_000),  # TTL ends before creation
        dict(lease_deadline_ms=11_000),  # deadline while NEW
        dict(state=State.LEASED),  # LEASED without deadline
        dict(state=State.LEASED, lease_deadline_ms=11_000),  # LEASED with 0 attempts
        dict(result=b"r"),  # result while NEW
        dict(result_ok=True),
        dict(state=State.COMPLETED),  # final without result
        dict(state=State.COMPLETED, result=b"r", result_ok=False),
        dict(state=State.FAILED, result=b"r", result_ok=True, fails=1),
        dict(state=State.COMPLETED, result=b"r", result_ok=1),
        dict(state=State.COMPLETED, result="r", result_ok=True),
        dict(created_ms=2**62),
        dict(version=-1),
        dict(version=2**63),
    ],
)
def test_impossible_jobs_are_refused(changes):
    with pytest.raises(ValueError):
        make_job(**changes)


def test_job_is_frozen_and_slotted():
    job = make_job()
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.state = State.LEASED  # type: ignore[misc]
    assert not hasattr(job, "__dict__")


def test_is_final():
    assert not is_final(make_job())
    assert not is_final(make_job(state=State.PENDING))
    assert not is_final(make_job(state=State.LEASED, attempts=1, lease_deadline_ms=1))
    assert is_final(make_job(state=State.COMPLETED, result=b"", result_ok=True))
    assert is_final(make_job(state=State.FAILED, result=b"", result_ok=False, fails=1))


def test_ready_and_scheduled_waiting():
    new = make_job()
    assert is_ready(new, 0) and not is_scheduled_waiting(new, 0)
    pending = make_job(state=State.PENDING)
    assert is_ready(pending, 10_000)
    leased = make_job(state=State.LEASED, attempts=1, lease_deadline_ms=11_000)
    assert not is_ready(leased, 10_000) and not is_scheduled_waiting(leased, 0)
    done = make_job(state=State.COMPLETED, result=b"", result_ok=True)
    assert not is_ready(done, 10_000)
    sched = make_job(scheduled_ms=50_000, expires_ms=110_000)
    assert not is_ready(sched, 49_999) and is_scheduled_waiting(sched, 49_999)
    assert is_ready(sched, 50_000) and not is_scheduled_waiting(sched, 50_000)
    sched_done = make_job(
        scheduled_ms=50_000, expires_ms=110_000, state=State.COMPLETED, result=b"",
        result_ok=True,
    )  # fmt: skip
    assert not is_scheduled_waiting(sched_done, 0)


def test_attempt_limit():
    assert attempt_limit(make_job()) == MAX_ATTEMPTS_LIMIT == 255
    assert attempt_limit(make_job(max_attempts=3)) == 3


def test_lease_order():
    a = make_job(id=uuid.UUID(int=1), priority=0, created_ms=10_000)
    b = make_job(id=uuid.UUID(int=2), priority=0, created_ms=10_000)
    older = make_job(id=uuid.UUID(int=9), created_ms=9_000, expires_ms=69_000)
    high = make_job(id=uuid.UUID(int=8), priority=5, created_ms=20_000, expires_ms=80_000)
    low = make_job(id=uuid.UUID(int=7), priority=-5, created_ms=1, expires_ms=60_001)
    sched_early = make_job(
        id=uuid.UUID(int=5), scheduled_ms=0, expires_ms=60_000, created_ms=5_000
    )
    sched_late = make_job(
        id=uuid.UUID(int=4), scheduled_ms=1_000, expires_ms=61_000, created_ms=1_000
    )
    jobs = [low, sched_late, b, sched_early, a, high, older]
    ordered = sorted(jobs, key=lease_order_key)
    assert ordered == [high, older, a, b, sched_early, sched_late, low]


def test_lease_order_unscheduled_first_even_with_time_zero():
    plain = make_job(id=uuid.UUID(int=2), created_ms=10_000)
    at_zero = make_job(id=uuid.UUID(int=1), scheduled_ms=0, expires_ms=60_000, created_ms=0)
    assert lease_order_key(plain) < lease_order_key(at_zero)


@given(live_jobs())
def test_lease_order_key_ignores_changing_fields(job):
    """The key depends only on fields fixed at creation: a requeued job keeps its place."""
    base = dataclasses.replace(
        job, state=State.NEW, attempts=0, fails=0, lease_deadline_ms=None, result=None,
        result_ok=None, version=0, group=None,  # a final fail's -group: FAILED only
    )  # fmt: skip
    assert lease_order_key(base) == lease_order_key(job)


@given(st.lists(live_jobs(), min_size=2, max_size=5))
@settings(max_examples=50)
def test_lease_order_keys_are_comparable(jobs):
    ordered = sorted(jobs, key=lease_order_key)
    for a, b in zip(ordered, ordered[1:]):
        assert -a.priority <= -b.priority


# ------------------------------------------------------------ building jobs by name


def test_job_field_names_are_the_dataclass_fields_in_order():
    assert JOB_FIELD_NAMES == tuple(f.name for f in dataclasses.fields(Job))


@given(live_jobs())
def test_job_with_changes_only_what_it_names(job):
    assert job_with(job) == job
    changed = job_with(job, version=job.version + 1)
    assert changed == dataclasses.replace(job, version=job.version + 1)
    assert core_make_job({name: getattr(job, name) for name in JOB_FIELD_NAMES}) == job


def test_job_with_validates_and_refuses_unknown_fields():
    job = make_job()
    with pytest.raises(ValueError):
        job_with(job, state=State.LEASED)  # no lease deadline
    with pytest.raises(TypeError):
        job_with(job, atempts=1)
