"""Workflows' follow-up commands (streams/follow_ups.py, streams/processor.py): written to
the command log and acknowledged before the commit of the command that caused them, so
a crash repeats them at worst and never loses them; a command read again as already
applied writes none. With the memory engine (streams/memory.py) and, for the commit's
wait, a partition's changelog over a producer that needs no broker."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

import pytest

from eventq.core import (
    Add,
    Complete,
    Delete,
    Depend,
    Expire,
    StartAttempt,
    State,
    Upstream,
    UpstreamOutcome,
    decode_command,
    decode_registration,
    encode_command,
    registration_key,
)
from eventq.core.batch import read_record
from eventq.core.followups import FollowUp
from eventq.core.partitioner import job_key, partition_for_key
from eventq.state.jobs_table import WATERMARK_KEY
from streams.faust.transactions import ChangelogLost, PartitionChangelog
from streams.follow_ups import FollowUpWriter
from streams.memory import Driver, MemoryLog, MemoryStore


def ids_in(partitions: int, count: int) -> dict[int, list[uuid.UUID]]:
    found: dict[int, list[uuid.UUID]] = {p: [] for p in range(partitions)}
    n = 0
    while any(len(ids) < count for ids in found.values()):
        n += 1
        job_id = uuid.UUID(int=n)
        ids = found[partition_for_key(job_key(job_id), partitions)]
        if len(ids) < count:
            ids.append(job_id)
    return found


IDS = ids_in(2, 2)
UPSTREAM, DEPENDENT = IDS[0][0], IDS[1][0]  # in partitions 0 and 1
TTL = 10**9


def commands_in(log: MemoryLog, partition: int) -> list:
    return [decode_command(item).command for record in log.records(partition)
            for item in read_record(record.value)[1]]


def depends(log: MemoryLog) -> list[Depend]:
    return [c for c in commands_in(log, 0) if isinstance(c, Depend)]


def a_dependent() -> MemoryLog:
    log = MemoryLog(2)
    log.append_command(Add(DEPENDENT, "q", 10, TTL, b"", after=(UPSTREAM,)))
    return log


async def release(driver: Driver) -> None:
    """The upstream added, leased and completed: the dependent is released."""
    for command in (Add(UPSTREAM, "q", 10, TTL, b""), StartAttempt(UPSTREAM, 1),
                    Complete(UPSTREAM, b"r")):
        driver.log.append_command(command)
    await driver.drain()


def the_dependent(driver: Driver):
    return driver.store.get(DEPENDENT)


def test_a_crash_after_the_follow_ups_are_written_and_before_the_commit_repeats_them():
    async def scenario():
        driver = Driver(a_dependent())  # acknowledged as soon as handed on
        await driver.deliver(1)
        assert len(depends(driver.log)) == 1
        driver.crash()  # before any commit: the add is read again
        await driver.drain()
        assert len(depends(driver.log)) == 2  # a repeat, applied as such
        await release(driver)
        return driver

    driver = asyncio.run(scenario())
    registration = driver.store.table(0)[registration_key(UPSTREAM, DEPENDENT)]
    assert decode_registration(registration).dependent == DEPENDENT
    job = the_dependent(driver)
    assert job.state is State.NEW and job.upstreams[0].outcome is UpstreamOutcome.COMPLETED
    notices = [c for c in commands_in(driver.log, 1) if isinstance(c, Upstream)]
    assert len(notices) == 1  # one registration, told once


def test_a_crash_before_the_follow_ups_are_acknowledged_loses_nothing_after_the_re_read():
    async def scenario():
        driver = Driver(a_dependent(), acks_at_once=False)
        await driver.deliver(1)
        assert len(driver.in_flight) == 1 and depends(driver.log) == []
        driver.crash(keep=1000)  # lost in flight; the table keeps nothing of the add
        assert the_dependent(driver) is None and driver.in_flight == []
        await driver.deliver(1)  # the add read again: its depend written again
        assert len(driver.in_flight) == 1
        await driver.drain()
        assert len(depends(driver.log)) == 1
        await release(driver)
        return driver

    driver = asyncio.run(scenario())
    assert the_dependent(driver).state is State.NEW


def test_a_commit_waits_for_the_follow_ups_and_a_crash_after_it_repeats_none():
    async def scenario():
        driver = Driver(a_dependent(), acks_at_once=False)
        await driver.deliver(1)
        driver.commit()  # acknowledges the depend first
        assert driver.in_flight == [] and len(depends(driver.log)) == 1
        driver.crash()
        await driver.drain()
        return driver

    driver = asyncio.run(scenario())
    assert len(depends(driver.log)) == 1
    assert the_dependent(driver).state is State.WAITING


def test_a_command_read_again_as_already_applied_writes_no_follow_ups():
    """A table ahead of its commit (its follow-ups acknowledged): the add, read again,
    finds its job there and writes no second depend."""
    async def scenario():
        driver = Driver(a_dependent())
        await driver.deliver(1)
        driver.crash(keep=1000)
        await driver.drain()
        return driver

    driver = asyncio.run(scenario())
    assert len(depends(driver.log)) == 1 and driver.follow_ups_written == 1


# ------------------------------------------------------------ reads within one record


def test_a_notify_reads_a_registration_written_earlier_in_the_same_record():
    """One record of the upstream's partition registers a dependent and deletes the
    upstream: the deletion reads the registration from the record's own writes, tells
    the dependent and drops it."""
    log = MemoryLog(2)
    log.append_command(Add(UPSTREAM, "q", 10, TTL, b""))
    log.append_commands(0, [Depend(UPSTREAM, DEPENDENT, 0, None), Delete(UPSTREAM)])

    async def scenario():
        driver = Driver(log)
        await driver.deliver(0, 2)
        return driver

    driver = asyncio.run(scenario())
    [notice] = [c for c in commands_in(log, 1) if isinstance(c, Upstream)]
    assert (notice.dependent, notice.outcome) == (DEPENDENT, UpstreamOutcome.DELETED)
    assert registration_key(UPSTREAM, DEPENDENT) not in driver.store.table(0)


def test_a_depend_reads_the_registration_a_later_life_wrote_earlier_in_the_record():
    """Two lives of one dependent id register in one record, the later one first: the
    older one's depend finds the later registration (this record's write) and leaves it."""
    log = MemoryLog(2)
    deadline = log.now_ms + TTL
    log.append_commands(0, [Depend(UPSTREAM, DEPENDENT, 900, deadline),
                            Depend(UPSTREAM, DEPENDENT, 100, deadline)])

    async def scenario():
        driver = Driver(log)
        await driver.deliver(0)
        return driver

    driver = asyncio.run(scenario())
    stored = decode_registration(driver.store.table(0)[registration_key(UPSTREAM, DEPENDENT)])
    assert stored.dependent_created == 900


def test_an_expire_of_an_absent_job_that_drops_registrations_writes_the_watermark_after_them():
    log = MemoryLog(2)
    log.append_command(Depend(UPSTREAM, DEPENDENT, 0, log.now_ms + 10))
    log.advance(20)
    log.append_command(Expire(UPSTREAM))

    async def scenario():
        driver = Driver(log)
        await driver.drain()
        return driver

    driver = asyncio.run(scenario())
    key = registration_key(UPSTREAM, DEPENDENT)
    assert key not in driver.store.table(0)
    changelog = driver.changelogs[0]
    assert changelog[-2:] == [(key, None), (WATERMARK_KEY, str(65536).encode())]


# --------------------------------------------- the commit waits (transactions.py)


class Batch:
    def __init__(self) -> None:
        self.records: list = []

    def append(self, key, value, timestamp):
        self.records.append((key, value))
        return object()

    def close(self) -> None:
        pass

    def record_count(self) -> int:
        return len(self.records)


class Producer:
    """What a PartitionChangelog asks of its transactional producer, without a broker."""

    def __init__(self) -> None:
        self.events: list[str] = []

    async def begin_transaction(self) -> None:
        self.events.append("begin")

    def create_batch(self) -> Batch:
        return Batch()

    async def send_batch(self, batch, topic, partition):
        future = asyncio.get_running_loop().create_future()
        future.set_result(SimpleNamespace(offset=0))
        return future

    async def send_offsets_to_transaction(self, offsets, group_id) -> None:
        self.events.append("offsets")

    async def commit_transaction(self) -> None:
        self.events.append("commit")


def partition_changelog() -> tuple[PartitionChangelog, Producer]:
    producer = Producer()
    return PartitionChangelog(0, producer, MemoryStore(1), "eventq.jobs", "eventq.commands",
                              "app"), producer


def test_a_commit_waits_until_the_broker_has_the_follow_ups():
    async def scenario():
        log_, producer = partition_changelog()
        await log_.begin()
        written = asyncio.get_running_loop().create_future()
        log_.follow_up(written)
        commit = asyncio.ensure_future(log_.commit(5))
        await asyncio.sleep(0.01)
        assert not commit.done() and producer.events == ["begin"]
        written.set_result(12)  # acknowledged: its position in the command log
        assert await commit
        return producer

    producer = asyncio.run(scenario())
    assert producer.events == ["begin", "offsets", "commit", "begin"]


def test_a_follow_up_the_broker_refuses_fails_the_transaction():
    async def scenario():
        log_, producer = partition_changelog()
        await log_.begin()
        written = asyncio.get_running_loop().create_future()
        log_.follow_up(written)
        written.set_exception(ConnectionError("not the leader"))
        await asyncio.sleep(0)
        with pytest.raises(ChangelogLost):
            await log_.commit(5)
        return producer

    producer = asyncio.run(scenario())
    assert producer.events == ["begin"]  # nothing committed


class Writer:
    """A CommandWriter's ``write``, recorded."""

    def __init__(self) -> None:
        self.written: list[tuple[int, bytes, bytes, asyncio.Future]] = []

    def write(self, partition: int, key: bytes, data: bytes) -> asyncio.Future:
        future = asyncio.get_running_loop().create_future()
        self.written.append((partition, key, data, future))
        return future


class Logs:
    def __init__(self, log_) -> None:
        self._log = log_

    def open_log(self, partition: int):
        return self._log if partition == 0 else None


def test_the_writer_sends_each_follow_up_to_its_keys_partition_and_the_commit_waits():
    partitions = 4
    notice = Upstream(DEPENDENT, 3, UPSTREAM, UpstreamOutcome.COMPLETED, 7, 1_800_000_000_000,
                      b"r")
    depend = Depend(UPSTREAM, DEPENDENT, 3, None)

    async def scenario():
        log_, producer = partition_changelog()
        await log_.begin()
        writer = Writer()
        follow_ups = FollowUpWriter(writer, Logs(log_), partitions)  # type: ignore[arg-type]
        follow_ups(0, [FollowUp(notice), FollowUp(depend)])
        follow_ups(1, [FollowUp(depend)])  # no open transaction here: nothing written
        commit = asyncio.ensure_future(log_.commit(1))
        await asyncio.sleep(0.01)
        assert not commit.done()
        for _, _, _, future in writer.written:
            future.set_result(0)
        assert await commit
        return writer

    writer = asyncio.run(scenario())
    assert [(p, key, data) for p, key, data, _ in writer.written] == [
        (partition_for_key(job_key(DEPENDENT), partitions), job_key(DEPENDENT),
         encode_command(notice)),
        (partition_for_key(job_key(UPSTREAM), partitions), job_key(UPSTREAM),
         encode_command(depend)),
    ]


def test_only_an_absent_upstreams_registration_gets_a_timer():
    """A registration with an absent upstream is swept at its deadline by the timer's
    expire (streams/timers.py); a live upstream's goes with its ending or removal."""
    absent, live = IDS[0][0], IDS[0][1]
    log = MemoryLog(2)
    deadline = log.now_ms + 1_000
    log.append_command(Add(live, "q", 10, TTL, b""))
    log.append_command(Depend(live, DEPENDENT, 0, deadline))
    log.append_command(Depend(absent, DEPENDENT, 0, deadline + 1))

    async def scenario():
        driver = Driver(log)
        await driver.drain()
        return driver

    driver = asyncio.run(scenario())
    assert driver.index.due_registrations(deadline + 1) == [absent]
    driver.commit()
    driver.crash()  # the indexes rebuilt from the table: the same
    assert driver.index.due_registrations(deadline + 1) == [absent]


def test_a_released_dependent_wakes_a_lease_waiting_on_its_queue():
    async def scenario():
        driver = Driver(a_dependent())
        await driver.drain()
        woken = asyncio.ensure_future(driver.waiters.wait_ready(["q"], 5.0, lambda: False))
        await asyncio.sleep(0)
        for command in (Add(UPSTREAM, "elsewhere", 10, TTL, b""), StartAttempt(UPSTREAM, 1)):
            driver.log.append_command(command)
        await driver.drain()
        assert not woken.done()  # nothing ready in "q" yet
        driver.log.append_command(Complete(UPSTREAM, b"r"))
        await driver.drain()
        return await woken, driver

    woken, driver = asyncio.run(scenario())
    assert woken and the_dependent(driver).state is State.NEW
    assert driver.index.ready_page("q", driver.log.now_ms, 0, 10) == [DEPENDENT]
