"""Batch records of the command log through a real server (docs/architecture.md,
"Batches"): several commands for one job in one record, batch and single records
interleaved, and kill -9 while batches are being applied, after which every command
counts exactly once in effect."""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid

import pytest
from confluent_kafka import Producer

from eventq.client.raw import RawClient as Client
from eventq.core import (
    Add,
    Complete,
    Delete,
    Fail,
    StartAttempt,
    encode_command,
    state_digest,
)
from eventq.core.batch import MAX_BATCH_COMMANDS, encode_batch
from eventq.core.partitioner import job_key, partition_for_key
from eventq.errors import ClientError, NotFound, ServerError
from eventq.kafka.logreader import latest_jobs
from eventq.run.replay import compare, derive_from_commands
from tools.servers import ServerProcess

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]


def ids_in(partition: int, partitions: int, count: int) -> list[uuid.UUID]:
    """``count`` new job ids that murmur2 places in ``partition``."""
    found = []
    while len(found) < count:
        job = uuid.uuid4()
        if partition_for_key(job_key(job), partitions) == partition:
            found.append(job)
    return found


def produce(bootstrap: str, topic: str, partition: int, records: list[list]) -> None:
    """Write each list of commands as one record (a batch unless it holds one) to
    ``partition``, in order, and wait for Kafka's acknowledgements."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "message.max.bytes": 4 << 20})
    for commands in records:
        encoded = [encode_command(c) for c in commands]
        value = encoded[0] if len(encoded) == 1 else encode_batch(encoded)
        producer.produce(topic, value=value, partition=partition)
    assert producer.flush(30) == 0


async def applied_through(port: int, partition: int, partitions: int) -> None:
    """Return once everything written to ``partition`` before the call is applied: an
    add through the gateway to that partition is answered only once applied, and a
    partition is applied in log order."""
    [sentinel] = ids_in(partition, partitions, 1)
    async with await Client.connect(port=port) as c:
        while True:
            try:
                await c.add(sentinel, "sentinel", 1000, 600_000, b"")
                return
            except ClientError:  # Duplicate job: an earlier try took effect
                return
            except ServerError:  # behind a backlog of ~50,000 commands (CI: > 5 s)
                for _ in range(50):
                    try:
                        await c.inspect_job(sentinel)
                        return
                    except NotFound:
                        await asyncio.sleep(0.2)


def test_several_commands_for_one_job_in_one_record_and_singles_between(server):
    name = "batch-" + uuid.uuid4().hex[:8]
    topic = server.settings["commands-topic"]
    partition = 1
    j, k, l = ids_in(partition, server.partitions, 3)  # noqa: E741 (j, k, l: three jobs, named as their payloads)
    produce(server.bootstrap, topic, partition, [[
        Add(j, name, 60_000, 600_000, b"j", max_fails=2),
        StartAttempt(j, 1),
        Fail(j, b"first"),  # retried: PENDING, fails 1
        StartAttempt(j, 2),
        Complete(j, b"done"),
        Add(k, name, 60_000, 600_000, b"k"),
        Delete(k),
        Add(k, name, 60_000, 600_000, b"k again"),  # after its delete: a new job
        Add(l, name, 60_000, 600_000, b"l"),
        Add(l, name, 60_000, 600_000, b"l twice"),  # a duplicate: rejected
        StartAttempt(l, 1),
    ]])

    async def check_first() -> None:
        await applied_through(server.port, partition, server.partitions)
        async with await Client.connect(port=server.port) as c:
            shown = await c.inspect_job(j)
            assert (shown["state"], shown["attempts"], shown["fails"]) == (b"1", b"2", b"1")
            assert (await c.result(j, 0)).result == b"done"
            shown = await c.inspect_job(k)
            assert (shown["state"], shown["payload"]) == (b"0", b"k again")
            shown = await c.inspect_job(l)
            assert (shown["state"], shown["payload"], shown["attempts"]) == (b"4", b"l", b"1")  # LEASED
            # A single record between batches, through the gateway: l's lease ends.
            await c.complete(l, b"via the gateway")

    asyncio.run(check_first())
    produce(server.bootstrap, topic, partition, [
        [Fail(j, b"late"), Delete(j)],  # a completed job cannot fail; then it is gone
        [StartAttempt(k, 1)],  # a single record
        [Complete(k, b"k done"), Complete(l, b"twice")],  # l is completed already
    ])

    async def check_second() -> None:
        await applied_through(server.port, partition, server.partitions)
        async with await Client.connect(port=server.port) as c:
            with pytest.raises(NotFound):
                await c.inspect_job(j)
            assert (await c.result(k, 0)).result == b"k done"
            assert (await c.result(l, 0)).result == b"via the gateway"

    asyncio.run(check_second())
    # The log folded from scratch (every reader's rule) says the same as the server.
    derived = derive_from_commands(server.bootstrap, topic)
    assert j not in derived.jobs and derived.jobs[k].result == b"k done"
    assert derived.jobs[l].result == b"via the gateway"


def script(jobs: list[uuid.UUID], name: str, rounds: int) -> list:
    """Commands whose double application would show: every job is added, then leased
    and failed ``rounds`` times (each fail counts), then every third job is deleted and
    added again (a re-read add must not revive the deleted job's state, nor a re-read
    delete remove the new one)."""
    commands: list = [Add(job, name, 600_000, 3_600_000, job.bytes, max_fails=50)
                      for job in jobs]
    for attempt in range(1, rounds + 1):
        commands += [StartAttempt(job, attempt) for job in jobs]
        commands += [Fail(job, b"again") for job in jobs]
    for job in jobs[::3]:
        commands += [Delete(job), Add(job, name, 600_000, 3_600_000, b"new", max_fails=50)]
    return commands


def in_records(commands: list, size: int) -> list[list]:
    it = iter(commands)
    return [chunk for chunk in iter(lambda: list(itertools.islice(it, size)), [])]


@pytest.mark.slow
def test_kill_9_while_batches_are_applied_then_every_command_counts_once(
    kafka_bootstrap, tmp_path
):
    prefix = f"killbatch-{uuid.uuid4().hex[:6]}"
    server = ServerProcess(kafka_bootstrap, prefix, tmp_path / "server", partitions=2)
    server.create_topics()
    server.start()
    topic, name, rounds = server.settings["commands-topic"], "crash", 5
    jobs = {p: ids_in(p, 2, 1500) for p in range(2)}
    try:
        for kill_after_s in (0.4, 1.2):
            # ~50,000 commands in records of MAX_BATCH_COMMANDS, then kill -9 while the
            # processor is applying them (the changelog, RocksDB and the committed
            # offset each a different distance behind).
            for p in range(2):
                produce(kafka_bootstrap, topic, p,
                        in_records(script(jobs[p], name, rounds), MAX_BATCH_COMMANDS))
            time.sleep(kill_after_s)
            server.kill()
            server.start()
        for p in range(2):
            asyncio.run(applied_through(server.port, p, 2))

        async def digest() -> str:
            async with await Client.connect(port=server.port) as c:
                return await c.digest()

        live = asyncio.run(digest())
    finally:
        code = server.stop()
    assert code == 0, server.log_tail()
    log = server.log_path.read_text()
    assert log.count("did not stop cleanly; rebuilding state") == 2, server.log_tail()
    # The fetcher read the command log, and only it (faust's consumer left it alone).
    assert log.count("in whole fetches on the main loop") == 3
    assert "although its partitions are left to the fetcher" not in log
    derived = derive_from_commands(kafka_bootstrap, topic)
    deadline = time.monotonic() + 60
    while True:  # the state log is written a moment after the processor applies
        state, bad = latest_jobs(kafka_bootstrap, f"{prefix}.jobs")
        if compare(derived.jobs, state) == [] or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert bad.count == 0
    assert compare(derived.jobs, state) == []
    assert state_digest(state.values()) == state_digest(derived.jobs.values()) == live
    # What the script means, so the comparison above cannot pass vacuously: in the
    # second run the adds are duplicates and the leases refused, but a fail counts in
    # any state that is not final (docs/protocol.md, "complete and fail"), so each job was failed
    # exactly twice
    # ``rounds`` times (no re-read fail counted again), or is the re-added job.
    for p in range(2):
        for i, job in enumerate(jobs[p]):
            got = state[job]
            if i % 3 == 0:
                assert (got.payload, got.fails, got.attempts) == (b"new", 0, 0), got
            else:
                assert (got.fails, got.attempts) == (2 * rounds, rounds), got
