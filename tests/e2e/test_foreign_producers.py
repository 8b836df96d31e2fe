"""Commands written by other producers (librdkafka here, like Spark or an importer) are
applied whatever compression they use; without a codec library the processor stopped."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from confluent_kafka import Producer

from eventq import core
from eventq.client.raw import RawClient as Client
from eventq.core.partitioner import CONFLUENT_PRODUCER_PARTITIONER, job_key
from eventq.errors import NotFound

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(120)]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd", "none"])
def test_compressed_command_batches_are_applied(server, codec):
    producer = Producer({
        "bootstrap.servers": server.bootstrap,
        "partitioner": CONFLUENT_PRODUCER_PARTITIONER,
        "compression.type": codec,
        "linger.ms": 50,  # several commands per (compressed) batch
    })
    jobs = [uuid.uuid4() for _ in range(20)]
    for job in jobs:
        command = core.Add(job, f"codec-{codec}", 1000, 600000, b"from librdkafka " * 4)
        producer.produce(server.settings["commands-topic"], key=job_key(job),
                         value=core.encode_command(command))
    assert producer.flush(10) == 0

    async def check() -> None:
        async with await Client.connect(port=server.port) as c:
            deadline = time.monotonic() + 30
            for job in jobs:
                while True:
                    try:
                        info = await c.inspect_job(job)
                        break
                    except NotFound:
                        assert time.monotonic() < deadline, f"{codec}: {job} never applied"
                        await asyncio.sleep(0.1)
                assert info["payload"] == b"from librdkafka " * 4
            # and the server still serves its own clients
            leased = await c.lease(f"codec-{codec}", 1000)
            assert leased.id in jobs
    asyncio.run(check())
