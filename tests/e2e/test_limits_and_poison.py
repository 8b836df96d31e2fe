"""No input, however large, can crash the server or keep it from restarting
(docs/architecture.md, "Limits" and "Hostile inputs").

- Max-size payloads (1 MiB) and results (1 MiB) through every command of the gateway,
  then a restart that serves them again.
- A command that cannot be applied (its state record over a deliberately small limit)
  is rejected with -SERVER-ERROR, others keep being served, and two crashes later the
  server still serves every acknowledged job.
- A topic too small for eventq's largest record is refused at start, saying what to do.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from eventq.client.raw import RawClient as Client
from eventq.core import state_digest
from eventq.errors import NotFound, ServerError
from eventq.limits import MAX_PAYLOAD_BYTES, MAX_RESULT_BYTES, MIN_TOPIC_MESSAGE_BYTES
from eventq.run.replay import derive_from_commands
from tools.servers import ServerProcess, raw_exchange

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(300)]

PAYLOAD = bytes(range(256)) * (MAX_PAYLOAD_BYTES // 256)  # \r\n inside, on purpose
RESULT = b"\r\n" + b"r" * (MAX_RESULT_BYTES - 2)


def utc(seconds_from_now: float) -> str:
    moment = datetime.now(timezone.utc) + timedelta(seconds=seconds_from_now)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


async def max_size_session(port: int) -> dict[str, uuid.UUID]:
    """Every command that carries a data block, at the protocol's maximum."""
    done, failed, scheduled = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    async with await Client.connect(port=port) as c:
        await c.add(done, "big", 60000, 600000, PAYLOAD)
        leased = await c.lease("big", 5000)
        assert (leased.id, leased.payload) == (done, PAYLOAD)
        await c.complete(done, RESULT)
        result = await c.result(done, 0)
        assert (result.success, result.result) == (True, RESULT)
        job = await c.inspect_job(done)
        assert (job["payload"], job["state"]) == (PAYLOAD, b"1")
        assert int(job["payload-size"]) == MAX_PAYLOAD_BYTES

        await c.add(failed, "big-fail", 60000, 600000, PAYLOAD)
        await c.fail(failed, RESULT)
        result = await c.result(failed, 0)
        assert (result.success, result.result) == (False, RESULT)

        await c.schedule(scheduled, "big-later", 60000, 600000, utc(3600), PAYLOAD)
        [(head, values)] = await c.inspect_jobs("big-later", scheduled=True)
        assert head.startswith(str(scheduled)) and values["payload"] == PAYLOAD

        async with await Client.connect(port=port) as worker:
            run_id = uuid.uuid4()
            run = asyncio.create_task(c.run(run_id, "big-run", 60000, 10000, PAYLOAD))
            leased = await worker.lease("big-run", 10000)
            assert leased.payload == PAYLOAD
            await worker.complete(run_id, RESULT)
            outcome = await run
            assert (outcome.id, outcome.success, outcome.result) == (run_id, True, RESULT)
    return {"done": done, "failed": failed, "scheduled": scheduled}


def test_max_size_payloads_and_results_everywhere_then_a_restart(kafka_bootstrap, tmp_path):
    server = ServerProcess(kafka_bootstrap, f"big{uuid.uuid4().hex[:6]}", tmp_path, partitions=2)
    server.create_topics()
    server.start()
    try:
        jobs = asyncio.run(max_size_session(server.port))
        # A payload one byte over the limit is a framing error that closes only that
        # connection (docs/protocol.md, "Connections and framing"); the server goes on.
        over = raw_exchange(server.port, f"add {uuid.uuid4()} big 1 1 {MAX_PAYLOAD_BYTES + 1}\r\n".encode())
        assert over == b"-CLIENT-ERROR Invalid payload size\r\n"
        code = server.stop()
        assert code == 0, server.log_tail()
        server.start()

        async def still_there():
            async with await Client.connect(port=server.port) as c:
                assert (await c.result(jobs["done"], 0)).result == RESULT
                assert (await c.result(jobs["failed"], 0)).result == RESULT
                assert (await c.inspect_job(jobs["scheduled"]))["payload"] == PAYLOAD
                return await c.digest()

        digest = asyncio.run(still_there())
        replayed = derive_from_commands(kafka_bootstrap, server.settings["commands-topic"])
        assert state_digest(replayed.jobs.values()) == digest
    finally:
        server.stop()
    assert "Traceback" not in server.log_path.read_text()


POISON_LIMIT_BYTES = 2000  # a state record over this cannot be stored


def test_a_command_that_cannot_be_applied_is_rejected_and_never_stops_the_server(
    kafka_bootstrap, tmp_path
):
    server = ServerProcess(
        kafka_bootstrap, f"poison{uuid.uuid4().hex[:6]}", tmp_path, partitions=2,
        max_state_record_bytes=POISON_LIMIT_BYTES,
    )
    server.create_topics()
    server.start()
    poison = uuid.uuid4()
    acknowledged: list[uuid.UUID] = []

    async def others_keep_working(stop: asyncio.Event) -> None:
        async with await Client.connect(port=server.port) as c:
            while not stop.is_set():
                job = uuid.uuid4()
                await c.add(job, "fine", 60000, 600000, b"small")
                acknowledged.append(job)

    async def poison_while_others_work() -> None:
        stop = asyncio.Event()
        others = [asyncio.create_task(others_keep_working(stop)) for _ in range(4)]
        await asyncio.sleep(0.3)
        async with await Client.connect(port=server.port) as c:
            with pytest.raises(ServerError) as rejected:
                await c.add(poison, "fine", 60000, 600000, b"x" * 4000)
            assert "cannot be applied" in rejected.value.text
            assert f"over the limit of {POISON_LIMIT_BYTES:,}" in rejected.value.text
            # The same connection goes on (a rejection is an answer, not a failure).
            small = uuid.uuid4()
            await c.add(small, "fine", 60000, 600000, b"ok")
            acknowledged.append(small)
            # A job that fits becomes too big to store when its result comes in.
            grows = uuid.uuid4()
            await c.add(grows, "fine", 60000, 600000, b"p" * 1000)
            acknowledged.append(grows)
            with pytest.raises(ServerError):
                await c.complete(grows, b"r" * 1500)
            assert (await c.inspect_job(grows))["state"] == b"0"  # unchanged
        await asyncio.sleep(0.3)
        stop.set()
        await asyncio.gather(*others)

    asyncio.run(poison_while_others_work())
    assert len(acknowledged) > 10
    try:
        for _ in range(2):  # each crash leaves the poison in the re-read, uncommitted tail
            server.kill()
            server.start()

            async def all_there() -> None:
                async with await Client.connect(port=server.port) as c:
                    for job in acknowledged:
                        assert (await c.inspect_job(job))["name"] == b"fine"
                    with pytest.raises(NotFound):
                        await c.inspect_job(poison)
                    await c.add(uuid.uuid4(), "fine", 60000, 600000, b"after")

            asyncio.run(all_there())
        code = server.stop()
        assert code == 0, server.log_tail()
    finally:
        server.stop()
    log = server.log_path.read_text()
    assert f"command at {server.settings['commands-topic']}[" in log
    assert "rejected: the command cannot be applied" in log
    assert "Traceback" not in log
    replayed = derive_from_commands(
        kafka_bootstrap, server.settings["commands-topic"],
        max_state_record_bytes=POISON_LIMIT_BYTES,
    )
    assert poison not in replayed.jobs and set(acknowledged) <= set(replayed.jobs)


def test_topics_too_small_for_the_largest_record_are_refused_at_start(kafka_bootstrap, tmp_path):
    from eventq.kafka.topics import TopicNames, ensure_topics, eventq_topics

    prefix = f"small{uuid.uuid4().hex[:6]}"
    specs = eventq_topics(TopicNames(f"{prefix}.commands", f"{prefix}.jobs"), 2)
    specs[1].configs["max.message.bytes"] = str(1024 * 1024)  # Kafka's usual default
    ensure_topics(kafka_bootstrap, specs)
    server = ServerProcess(kafka_bootstrap, prefix, tmp_path, partitions=2)
    out = subprocess.run(
        [sys.executable, "-m", "eventq.cli", "serve", *server.flags],
        capture_output=True, text=True, timeout=120,
    )
    assert out.returncode == 2, out.stderr
    assert f"topic {prefix}.jobs max.message.bytes=1048576 cannot hold" in out.stderr
    assert f"{MIN_TOPIC_MESSAGE_BYTES:,} bytes" in out.stderr
    assert f"--entity-name {prefix}.jobs --add-config max.message.bytes=" in out.stderr
    assert f"{prefix}.commands" not in out.stderr  # only what is wrong is named
