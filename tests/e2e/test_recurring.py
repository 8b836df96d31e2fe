"""Recurring jobs on a real broker (docs/workflows.md, "Recurring jobs"): a
recurrence of every=1000 ms adds a job per second, each with the spec's id for its
slot; across a kill -9 of the server and its restart, and across a fail-over of the
recurrence's partition to another process, no slot fires twice (each slot's job exists
once) and none is skipped but the missed ones: of the slots due while nothing served
the recurrence, only the latest fires.
"""

from __future__ import annotations

import os
import socket
import time

import pytest

from eventq.core.commands import recurrence_key
from eventq.core.partitioner import job_key, partition_for_key
from eventq.core.recurrence import slot_job_id
from eventq.kafka.logreader import latest_state
from eventq.protocol.reply_reader import parse_blocks
from eventq.run.replay import derive_from_commands
from tools.servers import EventqCluster, ServerProcess, raw_exchange

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(600)]

NAME = "tick"
QUEUE = "ticks"
EVERY = 1000
RECUR = b"recur %s %s 60000 3600000 %d 5 -tags=e2e\r\nhello\r\n" % (
    NAME.encode(), QUEUE.encode(), EVERY)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def blocks_complete(data: bytes) -> bool:
    try:
        parse_blocks(data)
    except Exception:
        return data.startswith(b"-")
    return True


def exchange(port: int, request: bytes, peer: bool = False) -> bytes:
    """One request on a fresh connection (a ``peer`` one: this process's own answer)."""
    if not peer:
        return raw_exchange(port, request, timeout_s=30.0, until=blocks_complete
                            if request.startswith(b"inspect") else None)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(b"peer\r\n" + request)
        data = b""
        while not (data.startswith(b"+OK\r\n") and blocks_complete(data[5:])):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        assert data.startswith(b"+OK\r\n"), data
        return data[5:]


def until_ok(port: int, request: bytes, timeout_s: float = 120.0) -> bytes:
    deadline = time.monotonic() + timeout_s
    while True:
        reply = exchange(port, request)
        if reply.startswith(b"+OK"):
            return reply
        assert time.monotonic() < deadline, reply
        time.sleep(0.2)


def ready_ids(port: int) -> list[str]:
    """Every ready job of the queue (a page of 100 at a time)."""
    ids: list[str] = []
    while True:
        reply = until_ok(port, b"inspect jobs %s %d 100\r\n" % (QUEUE.encode(), len(ids)))
        page = [block.head.decode() for block in parse_blocks(reply)]
        ids += page
        if len(page) < 100:
            return ids


class Slots:
    """The slots the recurrence may have fired, by id."""

    def __init__(self, from_ms: int) -> None:
        self.first = from_ms // EVERY

    def of(self, ids: list[str]) -> list[int]:
        """The slot of each id (ids of no slot in the range fail)."""
        by_id = {str(slot_job_id(NAME, EVERY, n)): n
                 for n in range(self.first, now_ms() // EVERY + 2)}
        unknown = [i for i in ids if i not in by_id]
        assert not unknown, f"jobs of no slot: {unknown}"
        return sorted(by_id[i] for i in ids)


def check_across_an_outage(port: int, slots: Slots, down_from_ms: int, served_ms: int) -> None:
    """The queue's jobs: one per slot, every slot fired but those missed while nothing
    served the recurrence (from ``down_from_ms`` until it served again at ``served_ms``),
    of which only the latest fired."""
    ids = ready_ids(port)
    assert len(ids) == len(set(ids)), "a job listed twice"
    fired = slots.of(ids)
    assert len(fired) == len(set(fired)), f"a slot fired twice: {fired}"
    before = [n for n in fired if n * EVERY < down_from_ms]
    after = [n for n in fired if n * EVERY >= down_from_ms]
    assert before and after, (fired, down_from_ms, served_ms)
    # Serving, every slot fires (the timer wakes at each due time).
    assert before == list(range(before[0], before[-1] + 1)), f"a slot skipped while serving: {before}"
    assert after == list(range(after[0], after[-1] + 1)), f"a slot skipped while serving: {after}"
    # The outage: the slots due meanwhile were missed, and only the latest one fired,
    # when the recurrence was served again (not the first one missed).
    missed = after[0] - before[-1] - 1
    assert missed >= 2, (before[-1], after[0])
    assert after[0] * EVERY >= served_ms - 2 * EVERY, (after[0], served_ms)
    for n in fired:  # and each slot's job exists once, with its definition
        reply = until_ok(port, b"inspect job %s\r\n" % str(slot_job_id(NAME, EVERY, n)).encode())
        [block] = parse_blocks(reply)
        assert block.value(b"name") == QUEUE.encode() and block.value(b"payload") == b"hello"


def wait_for_slots(port: int, slots: Slots, count: int, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while len(ready_ids(port)) < count:
        assert time.monotonic() < deadline, "the recurrence does not fire"
        time.sleep(0.25)


def test_a_recurrence_fires_each_second_and_across_a_kill_9(kafka_bootstrap, tmp_path):
    prefix = f"recur{os.getpid()}"
    server = ServerProcess(kafka_bootstrap, prefix, tmp_path / "server", partitions=4)
    server.create_topics()
    server.start()
    try:
        slots = Slots(now_ms())
        assert exchange(server.port, RECUR) == b"+OK\r\n"
        [block] = parse_blocks(until_ok(server.port, b"inspect recurring 0 10\r\n"))
        assert block.head == NAME.encode() and block.value(b"every") == b"1000"
        assert block.value(b"tags") == b"e2e" and len(block.lines) == 12  # 11 and tags
        wait_for_slots(server.port, slots, 4)
        # kill -9 right after a slot fired (its fire's commit may be pending), stay down
        # for several slots, then restart: the missed slots fire once, the latest.
        time.sleep((EVERY - now_ms() % EVERY + 150) / 1000)
        server.kill()
        down_from_ms = now_ms()
        time.sleep(3.5)
        server.start()  # returns once it serves its recovered state
        served_ms = now_ms()
        time.sleep(3.5)
        # The record is in the state log beside the jobs (export-cmdlog reports it).
        assert latest_state(kafka_bootstrap, f"{prefix}.jobs").recurrences == [NAME]
        assert exchange(server.port, b"unrecur %s\r\n" % NAME.encode()) == b"+OK\r\n"
        assert exchange(server.port, b"unrecur %s\r\n" % NAME.encode()) == b"-NOT-FOUND\r\n"
        assert until_ok(server.port, b"inspect recurring 0 10\r\n") == b"+OK 0\r\n"
        check_across_an_outage(server.port, slots, down_from_ms, served_ms)
        live_digest = until_ok(server.port, b"inspect digest\r\n")
    finally:
        server.stop()
    # A fold of the command log (the slots' adds are commands in it) gives the same jobs.
    derived = derive_from_commands(kafka_bootstrap, f"{prefix}.commands")
    assert derived.digest().encode() in live_digest
    logged = latest_state(kafka_bootstrap, f"{prefix}.jobs")
    assert logged.recurrences == [] and logged.digest().encode() in live_digest


def owns(process: ServerProcess) -> bool:
    """Whether the process's own answer (a peer's request) lists the recurrence: it
    owns the recurrence's partition and serves it."""
    reply = exchange(process.port, b"inspect recurring 0 10\r\n", peer=True)
    return not reply.startswith(b"-") and bool(parse_blocks(reply))


def owner_of_the_recurrence(cluster: EventqCluster) -> int:
    for process in cluster.live():
        if owns(process):
            return cluster.processes.index(process)
    raise AssertionError("no process owns the recurrence")


def test_a_recurrence_fails_over_with_its_partition(kafka_cluster, tmp_path):
    prefix = f"recur3{os.getpid()}"
    cluster = EventqCluster(kafka_cluster, prefix, tmp_path, processes=3, partitions=6,
                            session_timeout_ms=6000).start()
    try:
        slots = Slots(now_ms())
        entry = cluster[0]
        assert exchange(entry.port, RECUR) == b"+OK\r\n"  # forwarded to the owner
        wait_for_slots(entry.port, slots, 3)
        owner = owner_of_the_recurrence(cluster)
        survivor = cluster[(owner + 1) % 3]
        partition = partition_for_key(recurrence_key(NAME), 6)
        assert partition_for_key(job_key(slot_job_id(NAME, EVERY, 1)), 6) in range(6)
        time.sleep((EVERY - now_ms() % EVERY + 150) / 1000)
        cluster[owner].kill()  # the recurrence's partition moves to another process
        down_from_ms = now_ms()
        deadline = time.monotonic() + 120
        while True:  # served again once another process lists it as its own
            time.sleep(0.2)
            if any(owns(p) for p in cluster.live()):
                break
            assert time.monotonic() < deadline, f"partition {partition} never moved"
        served_ms = now_ms()
        time.sleep(3.5)
        assert exchange(survivor.port, b"unrecur %s\r\n" % NAME.encode()) == b"+OK\r\n"
        check_across_an_outage(survivor.port, slots, down_from_ms, served_ms)
    finally:
        cluster.stop()


def test_the_python_clients_recur_unrecur_and_recurrences(server):
    """Client and AsyncClient (eventq/client): a recurrence defined, listed with its
    next due time, firing its slot's job, replaced, and removed."""
    import asyncio

    from eventq.client import AsyncClient, Client, NotFound

    with Client(port=server.port) as client:
        client.recur("py.every2s", "pyticks", b"hi", every_ms=2000, tags=["py"], priority=3)
        [info] = [r for r in client.recurrences() if r.name == "py.every2s"]
        assert (info.queue, info.every_ms, info.payload, info.tags, info.priority) == (
            "pyticks", 2000, b"hi", ("py",), 3)
        next_slot = None
        deadline = time.monotonic() + 30
        while next_slot is None:  # the first slot's job, by the spec's id
            for n in range(now_ms() // 2000 - 3, now_ms() // 2000 + 1):
                try:
                    job = client.inspect_job(slot_job_id("py.every2s", 2000, n))
                except NotFound:
                    continue
                assert (job.name, job.payload, job.priority) == ("pyticks", b"hi", 3)
                next_slot = n
            assert time.monotonic() < deadline, "no slot fired"
            time.sleep(0.2)

    async def replace_and_remove() -> None:
        async with AsyncClient(port=server.port) as client:
            await client.recur("py.every2s", "pyticks", b"bye", every_ms=3000)
            [info] = [r for r in await client.recurrences() if r.name == "py.every2s"]
            assert (info.payload, info.every_ms, info.tags) == (b"bye", 3000, ())
            await client.unrecur("py.every2s")
            with pytest.raises(NotFound):
                await client.unrecur("py.every2s")
            assert "py.every2s" not in [r.name for r in await client.recurrences()]

    asyncio.run(replace_and_remove())
