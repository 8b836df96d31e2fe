"""Abandoned commands cost nothing (docs/architecture.md, "Abandoned commands"): a
lease whose reply never reached a client gives its attempt back, so a job with one
attempt is later leased and completed normally; every write error says whether the
command was written."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import time
import uuid

import pytest

from eventq.client.raw import RawClient as Client
from eventq.core import Delete, ReleaseAttempt, StartAttempt, State, decode_command
from eventq.core.batch import position, split_record
from eventq.errors import NotFound, ServerError, Timeout
from eventq.kafka.logreader import read_topic
from tools.servers import ServerProcess

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

NOT_WRITTEN = "nothing happened, retrying is safe"
MAY_TAKE_EFFECT = ("may still take effect", "will still take effect")


async def wait_for_job(port: int, job_id, predicate, timeout_s: float = 30.0) -> dict:
    """The job's `inspect job` fields once ``predicate`` holds for them."""
    deadline = time.monotonic() + timeout_s
    fields: dict = {}
    while time.monotonic() < deadline:
        try:
            async with await Client.connect(port=port) as client:
                fields = await client.inspect_job(job_id)
            if predicate(fields):
                return fields
        except Exception as error:  # not yet added, or still recovering
            fields = {"error": repr(error)}
        await asyncio.sleep(0.05)
    raise AssertionError(f"job {job_id} never got there: {fields}")


def field(fields: dict, name: str) -> str:
    value = fields.get(name.encode(), fields.get(name))
    return value.decode() if isinstance(value, bytes) else str(value)


def waiting_with_no_attempt(fields: dict) -> bool:
    return (field(fields, "state"), field(fields, "attempts")) == ("0", "0")


def commands_for(bootstrap: str, topic: str, job_id) -> list:
    """Every command of ``job_id`` in the command log, in order (batches split). A
    give-back's claim, the log position of the start-attempt it names, is checked here
    and left out (tests name the release by attempt and state)."""
    found, positions = [], {}
    for record in read_topic(bootstrap, topic):
        for index, data in enumerate(split_record(record.value)):
            command = decode_command(data).command
            if command.job_id != job_id:
                continue
            if isinstance(command, StartAttempt):
                positions[command.attempt] = position(record.offset, index)
            if isinstance(command, ReleaseAttempt):
                assert command.claim == positions.get(command.attempt), command
                command = dataclasses.replace(command, claim=None)
            found.append(command)
    return found


async def wait_for_commands(server, job_id, expected: list, timeout_s: float = 30.0) -> None:
    topic = server.settings["commands-topic"]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = await asyncio.to_thread(commands_for, server.bootstrap, topic, job_id)
        if found[-len(expected):] == expected:
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"the log of {job_id} holds {found}, not {expected} last")


async def add_until_present(port: int, job_id, name: str) -> None:
    """Add under a write deadline too short to wait for: each error says whether the add
    was written; retry only what was not, until the job exists."""
    while True:
        async with await Client.connect(port=port) as client:
            try:
                await client.add(job_id, name, 60_000, 600_000, b"work", max_attempts=1)
                return
            except ServerError as error:
                text = str(error)
                assert NOT_WRITTEN in text or any(m in text for m in MAY_TAKE_EFFECT), text
                if NOT_WRITTEN in text:
                    continue
        await wait_for_job(port, job_id, lambda f: field(f, "state") == "0")
        return


def test_a_lease_nobody_received_gives_its_attempt_back(kafka_bootstrap, topic_prefix, tmp_path):
    asyncio.run(lease_nobody_received(kafka_bootstrap, topic_prefix, tmp_path))


async def lease_nobody_received(kafka_bootstrap, topic_prefix, tmp_path):
    # 1. The write deadline forced far below Kafka's round trip: the lease's claim is
    #    in the log but the gateway gives up on it, and says so.
    server = ServerProcess(kafka_bootstrap, topic_prefix, tmp_path, partitions=2,
                           write_timeout_ms=1)
    server.create_topics()
    server.start()
    try:
        abandoned = None
        for attempt in range(20):
            job_id = uuid.uuid4()
            await add_until_present(server.port, job_id, f"q{attempt}")
            async with await Client.connect(port=server.port) as client:
                try:
                    await client.lease(f"q{attempt}", 1000)
                except ServerError as error:
                    if any(m in str(error) for m in MAY_TAKE_EFFECT):
                        assert "lease" in str(error), str(error)
                        abandoned = job_id
                        break
                    assert NOT_WRITTEN in str(error), str(error)
                    continue
        assert abandoned is not None, "no lease was abandoned after it was written"
        # Given back: ready again, no attempt spent (the release is applied after it).
        await wait_for_commands(server, abandoned, [StartAttempt(abandoned, 1),
                                                    ReleaseAttempt(abandoned, 1, State.NEW)])
        await wait_for_job(server.port, abandoned, waiting_with_no_attempt)

        # A run whose add the gateway gave up on: its job (no TTL, spec: deleted when
        # run returns) is deleted after it, not left in the queue for good.
        for _ in range(20):
            run_id = uuid.uuid4()
            async with await Client.connect(port=server.port) as client:
                try:
                    await client.run(run_id, "runs", 60_000, 1000, b"work")
                except ServerError as error:
                    if any(m in str(error) for m in MAY_TAKE_EFFECT):
                        break
                    assert NOT_WRITTEN in str(error), str(error)
                except Timeout:
                    pass  # the add was applied in time: the run was deleted as usual
        else:
            raise AssertionError("no run's add was abandoned after it was written")
        await wait_for_commands(server, run_id, [Delete(run_id)])
        async with await Client.connect(port=server.port) as client:
            with pytest.raises(NotFound):
                await client.inspect_job(run_id)
    finally:
        assert server.stop() == 0

    # 2. A normal deadline: the job with max-attempts 1 is leased and completed.
    server.settings["write-timeout-ms"] = "5000"
    server.start()
    try:
        async with await Client.connect(port=server.port) as client:
            fields = await client.inspect_job(abandoned)
            assert (field(fields, "state"), field(fields, "attempts")) == ("0", "0")
            leased = await client.lease(f"q{attempt}", 5000)
            assert leased.id == abandoned
            await client.complete(abandoned, b"done")
            fields = await client.inspect_job(abandoned)
            assert (field(fields, "state"), field(fields, "attempts")) == ("1", "1")

        # 3. A client that leaves while its lease waits: the job it would have got
        #    goes back, and the next worker leases and completes it.
        gone = socket.create_connection(("127.0.0.1", server.port))
        gone.sendall(b"lease gone 60000\r\n")
        await asyncio.sleep(0.3)  # the lease is waiting
        gone.close()
        await asyncio.sleep(0.3)
        job_id = uuid.uuid4()
        async with await Client.connect(port=server.port) as client:
            await client.add(job_id, "gone", 60_000, 600_000, b"work", max_attempts=1)
        # The waiting lease claims it, finds its client gone, and gives it back.
        await wait_for_commands(server, job_id, [StartAttempt(job_id, 1),
                                                 ReleaseAttempt(job_id, 1, State.NEW)])
        await wait_for_job(server.port, job_id, waiting_with_no_attempt)
        async with await Client.connect(port=server.port) as client:
            leased = await client.lease("gone", 5000)
            assert leased.id == job_id
            await client.complete(job_id, b"done")
            fields = await client.inspect_job(job_id)
            assert (field(fields, "state"), field(fields, "attempts")) == ("1", "1")
    finally:
        assert server.stop() == 0
