"""Three eventq processes on three Kafka brokers (docs/architecture.md, "Scaling out"):
any process serves any job, and a worker anywhere leases jobs from everywhere.

That losing a process, then a broker, under load loses nothing that was acknowledged is
the fault campaign's run in the suite (tests/e2e/test_fault_campaign.py: a kill -9 of an
eventq process, then of a broker, among its faults, and every check of
tools/faults/checker.py after); the time to serve again after each is bench/faults.py's
and bench/cluster_bench.py's figure."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from eventq.client.raw import RawClient as Client
from eventq.errors import Timeout

pytestmark = [pytest.mark.kafka]

COMPLETED = b"1"
BLOCKED_LEASE_WAIT_MS = 60_000


def run(coro):
    return asyncio.run(coro)


@pytest.mark.timeout(120)
def test_pause_through_one_process_holds_the_queue_at_every_process(eventq_cluster):
    """pause/resume (docs/protocol.md, "pause and resume") go to every partition, and
    +OK waits until every process applied them: no process hands out the queue's jobs
    after a pause's +OK, and a resume wakes a lease waiting at another process."""
    from eventq.client import Client as Sync
    from eventq.client import QueueInfo, TimedOut

    name = "paused-" + uuid.uuid4().hex[:12]
    a, b, c = [Sync(port=p.port) for p in eventq_cluster.processes]
    try:
        b.pause(name)
        ids = [c.add(name, b"%d" % n) for n in range(12)]  # on every process's partitions
        assert a.inspect_queue(name) == QueueInfo(name, 12, 0, paused=True)
        for client in (a, b, c):
            with pytest.raises(TimedOut):
                client.lease(name, 200)
        c.resume(name)
        leased = {a.lease(name, 2_000).id for _ in ids}
        assert leased == set(ids)
    finally:
        for client in (a, b, c):
            client.close()


@pytest.mark.timeout(120)
def test_one_processs_dashboard_shows_the_whole_cluster(eventq_cluster):
    """The dashboard reads through its gateway (docs/architecture.md, "Metrics and the
    dashboard"), so a queue's counts and jobs are the cluster's, an action reaches every
    process, and /cluster names every process and each partition's owner."""
    import re
    import urllib.request

    from eventq.client import Client as Sync

    name = "dash-" + uuid.uuid4().hex[:12]
    a, b = eventq_cluster.processes[:2]
    with Sync(port=b.port) as client:
        ids = [client.add(name, b"%d" % n) for n in range(12)]  # partitions of all three

    def page(path: str) -> str:
        with urllib.request.urlopen(a.http_url() + path, timeout=30) as response:
            return response.read().decode()

    counts = re.sub(r"<[^>]+>", " ", page(f"queues/{name}").split('id="counts"')[1])
    assert counts.split("failed", 1)[1].split()[:2] == ["12", "0"], counts  # ready, scheduled
    listed = set(re.findall(r"/jobs/([0-9a-f-]{36})", page(f"queues/{name}")))
    assert listed == {str(i) for i in ids}
    cluster = page("cluster")
    for process in eventq_cluster.processes:
        assert f"127.0.0.1:{process.port}" in cluster
    owners = re.findall(r"<tr><td class=\"l\">\d+</td><td class=\"l\">127\.0\.0\.1:(\d+)", cluster)
    assert len(owners) == 6 and len(set(owners)) == 3, owners


@pytest.mark.timeout(180)
def test_one_worker_on_a_leases_every_job_added_through_b_and_c(eventq_cluster):
    name = "q-" + uuid.uuid4().hex[:12]

    async def scenario():
        a, b, c = [await Client.connect(port=p.port) for p in eventq_cluster.processes]
        added = set()
        for i in range(60):
            job = uuid.uuid4()
            await (b if i % 2 else c).add(job, name, 60000, 600000, b"%d" % i)
            added.add(job)
        assert (await a.inspect_queue(name)) == {"ready-len": 60, "scheduled-len": 0}
        leased = []
        for _ in range(60):
            job = await a.lease(name, 2000)
            leased.append(job.id)
            await a.complete(job.id, b"done")
        assert sorted(leased) == sorted(added)
        with pytest.raises(Timeout):
            await a.lease(name, 200)
        for job in added:
            assert (await a.inspect_job(job))["state"] == COMPLETED

        # A worker blocked on A gets a job added through C, not its timeout: the lease
        # waits a minute and must return the job in far less (how soon is
        # bench/cluster_bench.py's figure).
        latencies = []
        for _ in range(5):
            waiting = asyncio.ensure_future(a.lease(name, BLOCKED_LEASE_WAIT_MS))
            await asyncio.sleep(0.3)
            job = uuid.uuid4()
            await c.add(job, name, 60000, 600000, b"late")
            added_at = time.monotonic()
            got = await waiting
            latencies.append((time.monotonic() - added_at) * 1000)
            assert got.id == job
            await a.complete(job, b"done")
        print(f"blocked lease on A woken by an add through C after "
              f"{', '.join(f'{ms:.0f}' for ms in latencies)} ms")
        assert max(latencies) < BLOCKED_LEASE_WAIT_MS / 2  # woken by the job, not timed out
        for client in (a, b, c):
            await client.close()

    run(scenario())
