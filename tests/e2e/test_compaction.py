"""Compaction in practice: deleted and expired jobs become tombstones and `eventq.jobs`
shrinks to exactly the live jobs; replaying the compacted topic gives the live state."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from eventq.client.raw import RawClient as Client
from eventq.core import state_digest
from eventq.kafka.logreader import latest_jobs, read_topic
from eventq.kafka.topics import TopicSpec, bulk_name_for, bulk_topic, commands_topic, ensure_topics
from tools.servers import ServerProcess

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(300)]

AGGRESSIVE_CLEANER = {
    "cleanup.policy": "compact",
    "segment.ms": "500",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": "200",
    "min.compaction.lag.ms": "0",
    "max.message.bytes": str(4 * 1024 * 1024),
}


def test_state_log_compacts_to_exactly_the_live_jobs(kafka_bootstrap, tmp_path):
    server = ServerProcess(kafka_bootstrap, f"compact{uuid.uuid4().hex[:6]}", tmp_path, partitions=2)
    names = server.settings
    reports = ensure_topics(kafka_bootstrap, [
        commands_topic(names["commands-topic"], 2),
        TopicSpec(names["jobs-topic"], 2, 1, AGGRESSIVE_CLEANER),
        bulk_topic(bulk_name_for(names["commands-topic"]), 2),
    ])
    assert all(r.ok for r in reports)
    server.start()
    live: set[uuid.UUID] = set()

    async def workload() -> str:
        async with await Client.connect(port=server.port) as c:
            for i in range(60):
                job = uuid.uuid4()
                short = i % 4 == 0
                await c.add(job, "c", 60000, 700 if short else 600000, b"p%d" % i)
                if not short:
                    live.add(job)
            for job in list(live)[:15]:
                await c.delete(job)
                live.discard(job)
            for _ in range(15):
                leased = await c.lease("c", 1000)
                await c.complete(leased.id, b"done")  # several records for one job
            await asyncio.sleep(1.5)  # short TTLs pass, expire commands are applied
            return await c.digest()

    async def churn(rounds: int) -> None:
        # Compaction only cleans closed segments, and a segment rolls only on an
        # append after segment.ms: keep the server writing. The active segment is
        # never cleaned, so what is written here is one record of a new live job.
        async with await Client.connect(port=server.port) as c:
            for _ in range(rounds):
                job = uuid.uuid4()
                await c.add(job, "churn", 1000, 600000, b"")
                live.add(job)
                await asyncio.sleep(0.3)

    async def digest() -> str:
        async with await Client.connect(port=server.port) as c:
            return await c.digest()

    try:
        asyncio.run(workload())
        topic = names["jobs-topic"]
        deadline = time.monotonic() + 120
        while True:
            asyncio.run(churn(4))
            records = list(read_topic(kafka_bootstrap, topic))
            job_keys = [r.key for r in records if not r.key.startswith(b"\x00")]
            live_keys = sorted(str(job).encode() for job in live)
            if sorted(job_keys) == live_keys:
                break
            assert time.monotonic() < deadline, (
                f"{len(job_keys)} job records ({len(set(job_keys))} keys) for {len(live)} live jobs"
            )
        # Besides one record per live job, at most one watermark record per partition.
        meta = [r for r in records if r.key.startswith(b"\x00")]
        assert len(meta) <= 2
        assert all(r.value is not None for r in records), "tombstones remain after cleaning"
        jobs, bad = latest_jobs(kafka_bootstrap, topic)
        assert bad.count == 0 and set(jobs) == live
        assert state_digest(jobs.values()) == asyncio.run(digest())
        print(f"{topic}: {len(records)} records for {len(live)} live jobs after compaction")
    finally:
        server.stop()
