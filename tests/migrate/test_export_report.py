"""What ``eventq export-cmdlog`` reports of eventq's own flags, exactly (text, JSON, exit
status): -backoff, -after and -tags (docs/workflows.md, "Dependencies" and "Tags") cannot
be held in workq's log, so a job with any is listed with the jobs that do not replay
exactly, one line per flag, and a WAITING job is written as NEW. Its jobs are real folds
of core commands; only the read of the state log is handed them instead of Kafka's
(tests/migrate/test_export_roundtrip.py reads a real one)."""

from __future__ import annotations

import time
import uuid

import pytest

from eventq.cmdlog import iter_commands, replay
from eventq.cmdlog.replay import WorkqState
from eventq.core import Accepted, Add, Job, State, Upstream, UpstreamOutcome, apply
from eventq.kafka import logreader
from eventq.migrate import kafka_io
from eventq.migrate.mapping import (
    AFTER_LOST,
    BACKOFF_LOST,
    TAGS_LOST,
    WAITING_LOST,
    export_notes,
)
from support.migrate_support import run_cli

UP = uuid.UUID("6ba7b810-9dad-41d1-80b4-00c04fd430c4")
PLAIN = uuid.UUID("00000000-0000-4000-8000-000000000001")
BACKOFF = uuid.UUID("00000000-0000-4000-8000-000000000002")
WAITING = uuid.UUID("00000000-0000-4000-8000-000000000003")
RELEASED = uuid.UUID("00000000-0000-4000-8000-000000000004")
BOTH = uuid.UUID("00000000-0000-4000-8000-000000000005")
TAGGED = uuid.UUID("00000000-0000-4000-8000-000000000006")
HOUR_MS = 3_600_000


def added(command: Add, at_ms: int, offset: int) -> Job:
    outcome, job = apply(None, command, at_ms, offset)
    assert isinstance(outcome, Accepted) and job is not None
    return job


def live_jobs() -> dict[uuid.UUID, Job]:
    """One job of each kind, created a millisecond apart (the export's order)."""
    now_ms = time.time_ns() // 1_000_000
    jobs = [
        added(Add(PLAIN, "q", 1000, HOUR_MS, b"p"), now_ms, 10),
        added(Add(BACKOFF, "q", 1000, HOUR_MS, b"b", backoff_ms=500), now_ms + 1, 11),
        added(Add(WAITING, "q", 1000, HOUR_MS, b"w", after=(UP,)), now_ms + 2, 12),
        added(Add(BOTH, "q", 1000, HOUR_MS, b"x", backoff_ms=500, after=(UP,)), now_ms + 4, 14),
        added(Add(TAGGED, "q", 1000, HOUR_MS, b"t", tags=("nightly", "etl")), now_ms + 5, 16),
    ]
    waiting = added(Add(RELEASED, "q", 1000, HOUR_MS, b"r", after=(UP,)), now_ms + 3, 13)
    notice = Upstream(RELEASED, 13, UP, UpstreamOutcome.COMPLETED, 9, now_ms, b"done")
    outcome, released = apply(waiting, notice, now_ms + 3, 15)
    assert isinstance(outcome, Accepted) and released is not None
    assert (waiting.state, released.state) == (State.WAITING, State.NEW)
    return {job.id: job for job in [*jobs, released]}


def test_a_job_with_upstreams_is_noted_waiting_or_not() -> None:
    jobs = live_jobs()
    assert export_notes(jobs[WAITING]) == [WAITING_LOST]
    assert export_notes(jobs[RELEASED]) == [AFTER_LOST]
    assert export_notes(jobs[BOTH]) == [BACKOFF_LOST, WAITING_LOST]
    assert export_notes(jobs[PLAIN]) == []
    assert export_notes(jobs[TAGGED]) == [TAGS_LOST]


@pytest.fixture
def state_log(monkeypatch):
    """The state log's live jobs, read as from Kafka (nothing undecodable)."""
    jobs = live_jobs()
    monkeypatch.setattr(kafka_io, "topic_partitions", lambda bootstrap, topics: {"t": 1})
    monkeypatch.setattr(logreader, "latest_state",
                        lambda bootstrap, topic, progress=None: logreader.LoggedState(jobs))
    return jobs


def test_export_reports_backoff_and_after_as_not_replaying_exactly(state_log, tmp_path,
                                                                    capsys) -> None:
    target = tmp_path / "out"
    r = run_cli(capsys, "export-cmdlog", target, "--no-progress", "--jobs-topic", "eventq.jobs")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[2].startswith("  wrote 6 records in 1 segment file(s) (read ")
    assert lines[:2] + lines[3:] == [
        f"Exported 6 of 6 live jobs from eventq.jobs to {target}",
        "  jobs by state: NEW 6",
        "  jobs that do not replay exactly (workq's records cannot express it): 6",
        f"    {BACKOFF}: {BACKOFF_LOST}",
        f"    {WAITING}: {WAITING_LOST}",
        f"    {RELEASED}: {AFTER_LOST}",
        f"    {BOTH}: {BACKOFF_LOST}",
        f"    {BOTH}: {WAITING_LOST}",
        f"    {TAGGED}: {TAGS_LOST}",
    ]
    assert WAITING_LOST == ("WAITING (-after): workq has no dependencies; written as NEW, so "
                            "it is ready at once instead of waiting for its upstreams, and "
                            "imports back without them")
    assert AFTER_LOST == "-after: workq has no dependencies; imports back without its upstreams"
    # the WAITING jobs are in workq's log as NEW jobs
    replayed = replay(iter_commands(target), time.time_ns())
    assert {replayed[i].state for i in (WAITING, BOTH)} == {WorkqState.NEW}

    r = run_cli(capsys, "export-cmdlog", tmp_path / "json", "--json", "--no-progress")
    assert r.code == 0 and r.report["ok"] is True
    assert r.report["inexact"][1:3] == [{"id": str(WAITING), "difference": WAITING_LOST},
                                        {"id": str(RELEASED), "difference": AFTER_LOST}]


def test_export_reports_the_recurrences_it_leaves_behind(monkeypatch, tmp_path, capsys) -> None:
    """docs/workflows.md, "Recurring jobs": workq has no recurring jobs; the jobs they
    added are jobs."""
    jobs = live_jobs()
    monkeypatch.setattr(kafka_io, "topic_partitions", lambda bootstrap, topics: {"t": 1})
    monkeypatch.setattr(logreader, "latest_state", lambda bootstrap, topic, progress=None: (
        logreader.LoggedState(jobs, recurrences=["hourly", "nightly"])))
    target = tmp_path / "out"
    r = run_cli(capsys, "export-cmdlog", target, "--no-progress", "--jobs-topic", "eventq.jobs")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    at = lines.index("  recurrences not exported (workq has no recurring jobs; the jobs they "
                     "added are exported): 2")
    assert lines[at + 1:at + 3] == ["    hourly", "    nightly"]


def test_a_named_group_and_a_retrys_time_are_noted() -> None:
    """[eventq] docs/workflows.md, "Failure groups and retry": a failure group workq's
    commands do not produce, and the time a retry gave a job, cannot be held in workq's
    log."""
    from eventq.core import Fail, Retry
    from eventq.migrate.mapping import GROUP_LOST, RETRY_LOST

    now_ms = time.time_ns() // 1_000_000
    job = added(Add(PLAIN, "q", 1000, HOUR_MS, b"p"), now_ms, 10)
    _, plain_failed = apply(job, Fail(PLAIN, b"x"), now_ms, 11)
    _, named = apply(job, Fail(PLAIN, b"x", "deploy-7"), now_ms, 11)
    _, retried = apply(named, Retry(PLAIN, 5000), now_ms, 12)
    assert export_notes(plain_failed) == []
    assert export_notes(named) == [GROUP_LOST]
    assert export_notes(retried) == [RETRY_LOST]
