"""Failure groups and retry (docs/workflows.md, "Failure groups and retry") through a
live server and broker: a group of 10,000 failures is retried with one ``retry-group``
(the same ids, leasable again), and a dependent failed in ``upstream-failed`` comes back
WAITING with its upstream, then runs; ``inspect failed`` and ``failed-jobs`` say so."""

from __future__ import annotations

import time
import uuid

import pytest

from eventq.client import Client, FailedGroup, NewJob, calls
from eventq.client.errors import NotFound
from eventq.client.sync import pipeline

pytestmark = pytest.mark.kafka

JOBS = 10_000


def label(text: str) -> str:
    return f"{text}-{time.monotonic_ns()}"


def test_a_group_of_10000_failures_is_retried_with_one_command(server):
    q, group = label("groups"), label("deploy")
    with Client(port=server.port) as client:
        # 9,999 jobs and an upstream of its own queue, with a dependent: 10,000 in the group
        ids = client.add_many(NewJob(q, b"p", id=uuid.uuid4()) for _ in range(JOBS - 1))
        upstream, dependent = client.add(q + "-up", b"u"), uuid.uuid4()
        client.add(q + "-down", b"d", id=dependent, after=[upstream])
        everyone = [*ids, upstream]
        failed = pipeline(client, [calls.fail(job_id, b"boom", group=group)
                                   for job_id in everyone])
        assert failed == [None] * JOBS
        info = client.result(dependent, wait_timeout_ms=30_000)
        assert (info.ok, info.data) == (False, f"upstream {upstream} failed".encode())
        groups = {g.name: g.failed for g in client.inspect_failed(0, 100)}
        assert groups[group] == JOBS and groups["upstream-failed"] >= 1
        seen = []
        while len(seen) < JOBS:  # oldest failure first, every one of them once
            page = client.inspect_failed_jobs(group, len(seen), 100)
            assert page and all(job.state == "failed" and job.group == group for job in page)
            seen += [job.id for job in page]
        assert set(seen) == set(everyone) and len(seen) == JOBS
        assert client.inspect_job(dependent).group == "upstream-failed"

        began = time.monotonic()
        assert client.retry_group(group, JOBS) == JOBS
        elapsed = time.monotonic() - began
        print(f"retry-group of {JOBS:,} jobs: {elapsed:.1f} s, {JOBS / elapsed:,.0f} jobs/s")

        assert group not in {g.name for g in client.inspect_failed(0, 100)}
        assert client.retry_group(group, JOBS) == 0
        with pytest.raises(NotFound):
            client.retry(ids[1])  # NEW now: not FAILED
        job = client.inspect_job(ids[1])
        assert (job.state, job.attempts, job.fails, job.group) == ("new", 0, 0, None)
        assert client.inspect_queue(q).ready == JOBS - 1  # all leasable again, same ids
        assert client.lease(q, wait_timeout_ms=10_000).id in set(ids)

        # The dependent came back WAITING with its upstream (in cascade), then runs.
        deadline = time.monotonic() + 30
        while client.inspect_job(dependent).state != "waiting":
            assert time.monotonic() < deadline, client.inspect_job(dependent)
            time.sleep(0.1)
        assert client.lease(q + "-up", wait_timeout_ms=10_000).id == upstream
        client.complete(upstream, b"ok")
        assert client.lease(q + "-down", wait_timeout_ms=30_000).id == dependent
        client.complete(dependent, b"done")
        assert client.result(dependent, wait_timeout_ms=10_000).ok


def test_retry_with_a_delay_and_inspect_failed_groups_by_name(server):
    q, group = label("delay"), label("g")
    with Client(port=server.port) as client:
        a = client.add(q, b"a")
        b = client.add(q, b"b", max_fails=2)
        client.fail(a, b"x", group=group)
        client.fail(b, b"y", group="kept-not")  # fails left: the group is not kept
        assert client.inspect_job(b).state == "pending"
        client.fail(b, b"z")
        assert client.inspect_job(b).group is None  # in "failed", hidden like workq's
        assert FailedGroup(group, 1) in client.inspect_failed(0, 100)
        client.retry(a, delay_ms=60_000)
        job = client.inspect_job(a)
        assert job.state == "new" and job.time is not None
        assert [j.id for j in client.inspect_jobs(q, 0, 10, scheduled=True)] == [a]
        client.retry(b)
        assert [j.id for j in client.inspect_jobs(q, 0, 10)] == [b]


def test_the_log_folded_again_gives_the_live_state_groups_and_retries_included(server):
    """docs/workflows.md, "Determinism": the digest (which covers groups and a retry's
    time) of the live server equals the fold of the command log and the state log's,
    after the retries above (this module's server, its topics)."""
    from eventq.kafka.logreader import latest_state
    from eventq.run.replay import derive_from_commands

    with Client(port=server.port) as client:
        live, previous, deadline = None, "", time.monotonic() + 60
        while live != previous:  # the digest once two reads a poll apart agree
            assert time.monotonic() < deadline, "the digest never settled"
            previous, live = live, client.digest()
            time.sleep(0.5)
    derived = derive_from_commands(server.bootstrap, f"{server.prefix}.commands")
    assert derived.digest() == live
    assert latest_state(server.bootstrap, f"{server.prefix}.jobs").digest() == live
