"""The bulk lane (docs/architecture.md, "Lanes"): a bulk load written to
`eventq.bulk` never stalls interactive clients, and a slice admitted twice is applied
once, across kill -9, with the live digest equal to the replay of the command log."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from confluent_kafka import Producer

from eventq.client.raw import RawClient as Client
from eventq.core import Add, encode_command, state_digest
from eventq.core.batch import encode_batch, read_record
from eventq.core.partitioner import job_key, partition_for_key
from eventq.errors import EventqError, NotFound
from eventq.kafka.logreader import end_offsets, read_topic
from eventq.kafka.topics import bulk_name_for
from eventq.run.replay import derive_from_commands
from tools.servers import ServerProcess

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(600)]

BULK_JOBS = 100_000
RECORD_COMMANDS = 500  # what Spark enqueue puts in one bulk record


def bulk_load(bootstrap: str, topic: str, partitions: int, name: str, count: int) -> list:
    """Write ``count`` adds as a pipeline would: batch records per partition (the
    documented format for plain Kafka producers: docs/spark.md, "Bulk loads beside
    workers")."""
    ids = [uuid.uuid4() for _ in range(count)]
    by_partition: dict[int, list[bytes]] = {}
    for job_id in ids:
        command = Add(job_id, name, 60_000, 3_600_000, b"bulk")
        by_partition.setdefault(partition_for_key(job_key(job_id), partitions), []).append(
            encode_command(command))
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random",
                         "acks": "all", "enable.idempotence": True, "linger.ms": 5})
    for partition, commands in by_partition.items():
        for i in range(0, len(commands), RECORD_COMMANDS):
            producer.produce(topic, encode_batch(commands[i:i + RECORD_COMMANDS]),
                             partition=partition)
            producer.poll(0)
    assert producer.flush(60) == 0
    return ids


async def ready_len(port: int, name: str) -> int:
    async with await Client.connect(port=port) as c:
        try:
            return (await c.inspect_queue(name))["ready-len"]
        except NotFound:
            return 0


async def wait_ready_len(port: int, name: str, want: int, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while (have := await ready_len(port, name)) != want:
        assert time.monotonic() < deadline, f"{name}: {have} ready, not {want}"
        await asyncio.sleep(0.2)


def test_workers_are_not_stalled_by_a_bulk_load(server):
    asyncio.run(workers_during_a_bulk_load(server))


async def workers_during_a_bulk_load(server):
    tag = uuid.uuid4().hex[:8]
    bulk_name, bulk = f"bulk-{tag}", bulk_name_for(server.settings["commands-topic"])
    errors: list[str] = []
    cycles = 0
    loading = True

    async def worker(n: int) -> None:
        nonlocal cycles
        name = f"inter-{tag}-{n}"
        async with await Client.connect(port=server.port) as c:
            while loading:
                try:
                    job_id = uuid.uuid4()
                    await c.add(job_id, name, 60_000, 600_000, b"i")
                    leased = await c.lease(name, 1000)
                    await c.complete(leased.id, b"ok")
                    cycles += 1
                except EventqError as error:
                    errors.append(f"{type(error).__name__}: {error}")

    workers = [asyncio.ensure_future(worker(n)) for n in range(8)]
    await asyncio.sleep(0.5)
    began = time.monotonic()
    load = asyncio.ensure_future(asyncio.to_thread(
        bulk_load, server.bootstrap, bulk, server.partitions, bulk_name, BULK_JOBS))
    # While the load is applied: a lease with wait 1 s on the bulk queue gets a job.
    while await ready_len(server.port, bulk_name) == 0:
        await asyncio.sleep(0.05)
    async with await Client.connect(port=server.port) as c:
        leased = await c.lease(bulk_name, 1000)
        await c.complete(leased.id, b"done")
    during = await ready_len(server.port, bulk_name)
    await load
    ends = {p: high for p, (_low, high) in (await asyncio.to_thread(
        end_offsets, server.bootstrap, bulk)).items()}
    async with await Client.connect(port=server.port) as c:
        # inspect bulk: admitted + backlog is the bulk topic's end, per partition
        shown = await c.inspect_bulk()
    assert sorted(shown) == sorted(ends)
    assert {p: v["admitted"] + v["backlog"] for p, v in shown.items()} == ends
    backlog_seen = sum(v["backlog"] for v in shown.values())
    await wait_ready_len(server.port, bulk_name, BULK_JOBS - 1)
    async with await Client.connect(port=server.port) as c:
        shown = await c.inspect_bulk()
    assert {p: (v["admitted"], v["backlog"]) for p, v in shown.items()} == {
        p: (end, 0) for p, end in ends.items()}
    elapsed = time.monotonic() - began
    loading = False
    await asyncio.gather(*workers)
    print(f"{BULK_JOBS:,} bulk jobs applied in {elapsed:.1f}s; the interactive clients "
          f"completed {cycles:,} cycles meanwhile; {backlog_seen:,} bulk records were "
          "waiting when the load was written")
    assert errors == []
    assert during < BULK_JOBS - 1, "the lease came after the load, not during it"
    assert cycles > 0


def test_a_slice_admitted_twice_is_applied_once_across_kill_9(
    kafka_bootstrap, topic_prefix, tmp_path
):
    server = ServerProcess(kafka_bootstrap, topic_prefix, tmp_path, partitions=2)
    server.create_topics()
    server.start()
    try:
        asyncio.run(admitted_twice(server))
    finally:
        server.stop()
    assert "second copies skipped" in server.log_tail(200)


async def admitted_twice(server) -> None:
    commands, bulk = server.settings["commands-topic"], bulk_name_for(
        server.settings["commands-topic"])
    count = 60_000
    ids = await asyncio.to_thread(bulk_load, server.bootstrap, bulk, 2, "q", count)
    # kill -9 while the load is being admitted and applied
    while await ready_len(server.port, "q") < count // 6:
        await asyncio.sleep(0.02)
    server.kill()
    server.start()
    await wait_ready_len(server.port, "q", count)

    # A second copy of an admitted slice (what a crash between admitting a range and
    # recording it leaves): its jobs were deleted meanwhile, and must stay deleted.
    slices = [(r.partition, r.value, read_record(r.value)[1])
              for r in read_topic(server.bootstrap, commands)
              if r.value and read_record(r.value)[0] is not None]
    partition, value, items = slices[len(slices) // 2]
    from eventq.core import decode_command

    gone = [decode_command(item).command.job_id for item in items[:10]]
    async with await Client.connect(port=server.port) as c:
        for job_id in gone:
            await c.delete(job_id)
    producer = Producer({"bootstrap.servers": server.bootstrap})
    producer.produce(commands, value, partition=partition)
    assert producer.flush(30) == 0
    # An add to that partition through the gateway is answered once applied, after it.
    sentinel = next(j for j in (uuid.uuid4() for _ in range(100))
                    if partition_for_key(job_key(j), 2) == partition)
    async with await Client.connect(port=server.port) as c:
        await c.add(sentinel, "sentinel", 1000, 600_000, b"")
        for job_id in gone:
            with pytest.raises(NotFound):
                await c.inspect_job(job_id)
        assert (await c.inspect_queue("q"))["ready-len"] == count - len(gone)
        live = await c.digest()
    derived = await asyncio.to_thread(derive_from_commands, server.bootstrap, commands)
    assert derived.readmitted >= 1
    assert state_digest(derived.jobs.values()) == live
    assert set(ids) - set(gone) <= set(derived.jobs)
