"""The processor's live statistics against the Spark job's rule (pure, no Kafka)."""

from __future__ import annotations

import uuid

from hypothesis import given, settings

from eventq.core import Accepted, Add, Complete, Fail, StartAttempt, apply
from eventq.core.fold import JobFold
from eventq.state.livestats import LiveStats
from support.core_strategies import histories

T0 = 1_700_000_000_000


def fold_samples(steps) -> dict[tuple[str, str], list[int]]:
    """(queue, metric) -> samples, as ``eventq spark stats`` folds each job's commands."""
    folds: dict[uuid.UUID, JobFold] = {}
    samples: dict[tuple[str, str], list[int]] = {}
    for command, at, offset, _outcome, _after in steps:
        row = folds.setdefault(command.job_id, JobFold()).step(command, at, offset)
        for metric in ("wait", "run"):
            if row.get(f"{metric}_ms") is not None:
                samples.setdefault((row["queue"], metric), []).append(row[f"{metric}_ms"])
    return samples


def live(steps, stats: LiveStats | None = None) -> LiveStats:
    """What the processor does: observe every accepted event with the job before/after."""
    stats = stats or LiveStats()
    jobs: dict[uuid.UUID, object] = {}
    for command, at, _offset, outcome, after in steps:
        if isinstance(outcome, Accepted):
            stats.observe(outcome.event, jobs.get(command.job_id), after, at)
        if after is None:
            jobs.pop(command.job_id, None)
        else:
            jobs[command.job_id] = after
    return stats


@given(histories(max_steps=60))
@settings(max_examples=200, deadline=None)
def test_live_samples_are_the_spark_folds_samples(steps):
    """Same count and sum of wait and run times per queue as the command log's fold,
    for any history of the machine (fails, retries with backoff, timeouts, touches,
    releases, deletes, expiries)."""
    expected = fold_samples(steps)
    stats = live(steps)
    got = {}
    for name, queue in stats.queues.items():
        for metric in ("wait", "run"):
            durations = getattr(queue, metric)
            if durations.count:
                got[(name, metric)] = (durations.count, durations.sum_ms)
    assert got == {key: (len(v), sum(max(x, 0) for x in v)) for key, v in expected.items()}
    assert stats.remembered_jobs <= 2 * len({c.job_id for c, *_ in steps})


def history_of(*commands_at):
    steps, jobs = [], {}
    for offset, (command, at) in enumerate(commands_at, start=1):
        outcome, after = apply(jobs.get(command.job_id), command, at, offset)
        jobs[command.job_id] = after
        steps.append((command, at, offset, outcome, after))
    return steps


def test_buckets_are_qless_resolutions_with_labels():
    job = uuid.uuid4()
    steps = history_of(
        (Add(job, "q", 600_000, 86_400_000, b""), T0),
        (StartAttempt(job, 1), T0 + 75_000),  # waited 1m15s: the 1m bucket
        (Complete(job, b"ok"), T0 + 75_000 + 3_600_000 + 16 * 60_000),  # ran 1h16m
    )
    rows = live(steps).histogram_rows()
    assert [(r["metric"], r["label"], r["width_s"], r["count"]) for r in rows] == [
        ("wait", "1m", 60, 1), ("run", "1h15m", 900, 1)]


def test_a_lease_from_before_a_restart_is_estimated_from_its_deadline():
    job = uuid.uuid4()
    steps = history_of(
        (Add(job, "q", 30_000, 86_400_000, b""), T0),
        (StartAttempt(job, 1), T0 + 1_000),
        (Complete(job, b"ok"), T0 + 8_000),
    )
    restarted = LiveStats()  # saw nothing before the complete: as after a restart
    _, at, _, outcome, after = steps[2]
    restarted.observe(outcome.event, steps[1][4], after, at)
    assert restarted.queues["q"].run.sum_ms == 7_000  # deadline - ttr = the lease time


def test_a_wait_after_a_fail_with_a_backoff_counts_from_the_fail():
    """Found by the property above (its falsifying example): the fail requeues the job
    at its own time, the state keeps only the backoff's end, and the live statistics
    measured the next wait from that end (0 ms here) while the fold measures from the
    fail (eventq/core/timing.py). A fail in the add's millisecond hid the requeue: it
    equals the add's ready time, so it was not remembered."""
    job = uuid.uuid4()
    steps = history_of(
        (Add(job, "q", 30_000, 86_400_000, b"", max_fails=2, backoff_ms=5_000), T0),
        (Fail(job, b"no"), T0),  # fails left: ready again at T0 + 5,000
        (StartAttempt(job, 1), T0 + 5_000),
    )
    assert live(steps).queues["q"].wait.sum_ms == 5_000
    assert fold_samples(steps) == {("q", "wait"): [5_000]}


def test_remembered_times_are_bounded():
    stats = LiveStats(max_remembered_jobs=10)
    for _ in range(50):
        job = uuid.uuid4()
        live(history_of((Add(job, "q", 30_000, 86_400_000, b""), T0),
                        (StartAttempt(job, 1), T0 + 5)), stats)
    assert stats.remembered_jobs == 10
    assert stats.queues["q"].wait.count == 50


def test_queues_past_the_limit_are_counted_together():
    from eventq.state.livestats import OTHER_QUEUES

    stats = LiveStats(max_queues=3)
    for n in range(10):
        live(history_of((Add(uuid.uuid4(), f"q{n}", 30_000, 86_400_000, b""), T0)), stats)
    assert sorted(stats.queues) == sorted([OTHER_QUEUES, "q0", "q1", "q2"])
    assert stats.queues[OTHER_QUEUES].events[1] == 7  # EventType.ADDED
