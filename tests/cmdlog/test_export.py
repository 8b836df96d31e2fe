from __future__ import annotations

import os
import tempfile
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventq.cmdlog import (
    WorkqJob,
    WorkqState,
    WqAdd,
    WqComplete,
    WqFail,
    WqSchedule,
    WqStartAttempt,
    WqTimeoutAttempt,
    iter_commands,
    job_commands,
    list_segments,
    replay,
    write_jobs,
)
from support.cmdlog_strategies import MS, NOW_NS

A = uuid.UUID(int=1)


def job(id_=A, **kw) -> WorkqJob:
    base = dict(
        id=id_,
        name="q",
        ttr_ms=1000,
        ttl_ms=3_600_000,
        priority=0,
        max_attempts=0,
        max_fails=0,
        payload=b"p",
        time_ns=None,
        created_ns=NOW_NS - 1000 * MS,
    )
    base.update(kw)
    return WorkqJob(**base)


def read_back(d, now=NOW_NS):
    return replay(iter_commands(d), now)


ROUND_TRIP_CASES = {
    "new": job(),
    "new-scheduled": job(time_ns=NOW_NS + 60_000 * MS),
    "pending-once": job(state=WorkqState.PENDING, attempts=1),
    "pending-never-leased": job(state=WorkqState.PENDING, attempts=0),
    "pending-3-of-5": job(state=WorkqState.PENDING, attempts=3, max_attempts=5),
    "leased-1": job(state=WorkqState.LEASED, attempts=1),
    "leased-4": job(state=WorkqState.LEASED, attempts=4, max_attempts=4),
    "completed": job(state=WorkqState.COMPLETED, attempts=2, result=b"ok", result_ok=True),
    "completed-unleased": job(state=WorkqState.COMPLETED, result=b"", result_ok=True),
    "failed": job(state=WorkqState.FAILED, attempts=1, fails=1, result=b"no"),
    "failed-by-timeouts": job(state=WorkqState.FAILED, attempts=3, max_attempts=3, result=b""),
    "scheduled-completed": job(
        time_ns=NOW_NS - 10 * MS, state=WorkqState.COMPLETED, attempts=1, result=b"r", result_ok=True
    ),
}


@pytest.mark.parametrize("name", list(ROUND_TRIP_CASES))
def test_round_trip_each_state(tmp_path, name):
    j = ROUND_TRIP_CASES[name]
    report = write_jobs(tmp_path / "out", [j], now_ns=NOW_NS)
    assert report.inexact == []
    assert read_back(tmp_path / "out") == {j.id: j}


def test_round_trip_many_jobs_rolling_segments(tmp_path):
    jobs = [
        ROUND_TRIP_CASES[name].__class__(
            **{**{f: getattr(ROUND_TRIP_CASES[name], f) for f in WorkqJob.__slots__}, "id": uuid.UUID(int=i)}
        )
        for i, name in enumerate(list(ROUND_TRIP_CASES) * 20)
    ]
    report = write_jobs(tmp_path / "out", jobs, now_ns=NOW_NS, max_segment_bytes=1000)
    assert report.inexact == [] and report.jobs == len(jobs)
    assert len(report.paths) > 1 and report.paths == [p for _, p in list_segments(tmp_path / "out")]
    assert all(os.path.getsize(p) <= 1000 for p in report.paths)
    back = read_back(tmp_path / "out")
    assert back == {j.id: j for j in jobs}
    assert list(back) == [j.id for j in jobs]  # order kept


def test_records_written_per_state():
    assert [type(c) for c in job_commands(job())] == [WqAdd]
    assert [type(c) for c in job_commands(job(time_ns=NOW_NS))] == [WqSchedule]
    assert [type(c) for c in job_commands(job(state=WorkqState.LEASED, attempts=2))] == [
        WqAdd,
        WqStartAttempt,
        WqTimeoutAttempt,
        WqStartAttempt,
    ]
    assert [type(c) for c in job_commands(job(state=WorkqState.PENDING, attempts=1))] == [
        WqAdd,
        WqStartAttempt,
        WqTimeoutAttempt,
    ]
    cmds = job_commands(job(state=WorkqState.COMPLETED, attempts=1, result=b"r", result_ok=True))
    assert [type(c) for c in cmds] == [WqAdd, WqStartAttempt, WqComplete]
    assert cmds[-1] == WqComplete(A, b"r")
    cmds = job_commands(job(state=WorkqState.FAILED, attempts=1, fails=1, result=b"x"))
    assert [type(c) for c in cmds] == [WqAdd, WqStartAttempt, WqFail]
    assert cmds[0].created_ns == NOW_NS - 1000 * MS


@pytest.mark.parametrize(
    "j, what",
    [
        (job(state=WorkqState.PENDING, attempts=1, fails=2), "fails: 2 -> 0"),
        (job(state=WorkqState.FAILED, attempts=1, fails=3, result=b"x"), "fails: 3 -> 1"),
        (job(state=WorkqState.COMPLETED, attempts=1, result=None, result_ok=True), "result: None -> b''"),
        (job(state=WorkqState.NEW, attempts=2), "attempts: 2 -> 0"),
        (job(created_ns=NOW_NS - 10**7 * MS, ttl_ms=1000), "not live"),
    ],
)
def test_inexact_jobs_are_reported(tmp_path, j, what):
    report = write_jobs(tmp_path / "out", [j, job(uuid.UUID(int=2))], now_ns=NOW_NS)
    assert [i for i, _ in report.inexact] == [j.id]
    assert what in report.inexact[0][1]
    back = read_back(tmp_path / "out")
    assert back[uuid.UUID(int=2)] == job(uuid.UUID(int=2))
    assert back.get(j.id) != j


def test_refuses_directory_with_segments_and_duplicate_ids(tmp_path):
    write_jobs(tmp_path, [job()], now_ns=NOW_NS)
    with pytest.raises(FileExistsError):
        write_jobs(tmp_path, [job(uuid.UUID(int=5))], now_ns=NOW_NS)
    with pytest.raises(ValueError, match="duplicate"):
        write_jobs(tmp_path / "other", [job(), job()], now_ns=NOW_NS)


def test_records_are_stamped_with_now(tmp_path):
    write_jobs(tmp_path, [job(state=WorkqState.LEASED, attempts=1)], now_ns=NOW_NS + 5)
    assert {t for _, _, t, _ in iter_commands(tmp_path)} == {NOW_NS + 5}


# Any job that can round-trip does.
states = st.sampled_from(list(WorkqState))


@st.composite
def exportable_jobs(draw, id_):
    state = draw(states)
    max_attempts = draw(st.integers(0, 255))
    cap = max_attempts if max_attempts else 255
    if state == WorkqState.NEW:
        attempts = 0
    elif state == WorkqState.PENDING:
        attempts = draw(st.integers(0, cap - 1 if max_attempts else cap))
    elif state == WorkqState.LEASED:
        attempts = draw(st.integers(1, max(cap, 1)))
    else:
        attempts = draw(st.integers(0, cap))
    result = None
    fails = 0
    if state == WorkqState.COMPLETED:
        result = draw(st.binary(max_size=20))
    elif state == WorkqState.FAILED:
        result = draw(st.binary(max_size=20))
        fails = 1
    if state == WorkqState.PENDING and max_attempts and attempts >= max_attempts:
        attempts = max_attempts - 1
    if state == WorkqState.LEASED and max_attempts == 0:
        attempts = max(attempts, 1)
    scheduled = draw(st.booleans())
    return WorkqJob(
        id=id_,
        name=draw(st.text(max_size=10)),
        ttr_ms=draw(st.integers(1, 86_400_000)),
        ttl_ms=draw(st.integers(2000, 2**40)),  # outlives created/time below
        priority=draw(st.integers(-(2**31), 2**31 - 1)),
        max_attempts=max_attempts,
        max_fails=draw(st.integers(0, 255)),
        payload=draw(st.binary(max_size=50)),
        time_ns=NOW_NS + draw(st.integers(-1000, 10**12)) * MS if scheduled else None,
        created_ns=NOW_NS - draw(st.integers(0, 1000)) * MS,
        attempts=attempts,
        fails=fails,
        state=state,
        result=result,
        result_ok=state == WorkqState.COMPLETED,
    )


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 2**32), unique=True, max_size=6).flatmap(
    lambda ns: st.tuples(*[exportable_jobs(uuid.UUID(int=n)) for n in ns])
))
def test_export_read_replay_round_trip_property(jobs):
    jobs = list(jobs)
    with tempfile.TemporaryDirectory() as d:
        report = write_jobs(d, jobs, now_ns=NOW_NS)
        assert report.inexact == []
        assert read_back(d) == {j.id: j for j in jobs}
