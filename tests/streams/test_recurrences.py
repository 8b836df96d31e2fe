"""Recurring jobs in the processor, its index and its timer (docs/workflows.md, "Recurring jobs";
streams/processor.py ``_apply_recurrence``, streams/timers.py): the
record lives beside the jobs of the partition ``recur:<name>`` hashes to; a fire hands
the slot's add on before its commit, so a crash repeats it at worst (then it is a
``Duplicate job``) and never loses it; the index says when each slot is due, and is
rebuilt from the table on a restart, so a missed slot fires once, the latest. With
the memory engine (streams/memory.py)."""

from __future__ import annotations

import asyncio
import uuid

from eventq.core import Add, decode_command, decode_recurrence
from eventq.core.batch import read_record
from eventq.core.commands import Fire, Recur, Unrecur, recurrence_key
from eventq.core.recurrence import recurrence_table_key, slot_job_id
from eventq.state.indexes import JobIndex
from eventq.state.jobs_table import WATERMARK_KEY
from eventq.state.waiters import Waiters
from streams.memory import START_MS, Driver, MemoryLog
from streams.timers import RETRY_AFTER_MS, DeadlineTimer

PARTITIONS = 4
NAME = "tick"
EVERY = 1000
TTL = 10**9
FIRST = START_MS // EVERY  # START_MS is a whole second: the recur's own time is slot FIRST


def commands_in(log: MemoryLog, partition: int) -> list:
    return [decode_command(item).command for record in log.records(partition)
            for item in read_record(record.value)[1]]


def adds_of(log: MemoryLog, job_id: uuid.UUID) -> list[Add]:
    return [c for c in commands_in(log, log.partition_of(job_id))
            if isinstance(c, Add) and c.job_id == job_id]


def home(log: MemoryLog) -> int:
    return log.partition_of_key(recurrence_key(NAME))


def record_of(driver: Driver):
    raw = driver.store.table(home(driver.log)).get(recurrence_table_key(NAME))
    return None if raw is None else decode_recurrence(raw)


def a_recurrence() -> MemoryLog:
    log = MemoryLog(PARTITIONS)
    log.append_command(Recur(NAME, "q", 1000, TTL, EVERY, b"p"))
    return log


def test_a_recur_is_kept_in_its_keys_partition_and_indexed():
    log = a_recurrence()

    async def scenario():
        driver = Driver(log)
        await driver.drain()
        return driver

    driver = asyncio.run(scenario())
    record = record_of(driver)
    assert record.first_slot == FIRST and record.fired_ms is None
    assert [p for p in range(PARTITIONS) if recurrence_table_key(NAME) in driver.store.table(p)] == [
        home(log)]
    assert driver.index.recurrence_names() == [NAME]
    assert driver.index.recurrence_next_ms(NAME) == START_MS
    assert driver.store.recurrence(NAME) == record


def test_a_fire_adds_the_slots_job_with_the_specs_id():
    log = a_recurrence()

    async def scenario():
        driver = Driver(log)
        await driver.drain()
        log.advance(2500)  # slots FIRST, FIRST+1, FIRST+2 are due: only the latest fires
        log.append_command(Fire(NAME, FIRST))
        await driver.drain()
        return driver

    driver = asyncio.run(scenario())
    job_id = slot_job_id(NAME, EVERY, FIRST + 2)
    job = driver.store.get(job_id)
    assert job is not None and job.name == "q" and job.payload == b"p"
    assert job.created_ms == START_MS + 2500  # an add, at its acceptance
    assert len(adds_of(log, job_id)) == 1
    assert record_of(driver).fired_ms == (FIRST + 2) * EVERY
    assert driver.processor.counters.fired == 1
    assert driver.index.recurrence_next_ms(NAME) == (FIRST + 3) * EVERY
    for slot in (FIRST, FIRST + 1):
        assert driver.store.get(slot_job_id(NAME, EVERY, slot)) is None


def test_a_crash_after_the_add_was_written_repeats_it_as_a_duplicate():
    """kill -9 after the fire was applied and its add acknowledged, before the commit:
    the fire is applied again and writes its add again, which is a Duplicate job."""
    log = a_recurrence()
    job_id = slot_job_id(NAME, EVERY, FIRST + 1)

    async def scenario():
        driver = Driver(log, acks_at_once=False)
        await driver.drain()
        driver.commit()
        log.advance(1000)
        log.append_command(Fire(NAME, FIRST + 1))
        await driver.deliver(home(log))
        driver.crash(written=True)
        await driver.drain()
        return driver

    driver = asyncio.run(scenario())
    assert len(adds_of(log, job_id)) == 2  # written twice ...
    assert driver.store.get(job_id) is not None  # ... one job
    assert driver.processor.counters.rejected == 1  # the second: Duplicate job
    assert driver.processor.counters.fired == 1  # fired again after the restart, once


def test_a_crash_before_the_add_was_written_loses_nothing():
    log = a_recurrence()
    job_id = slot_job_id(NAME, EVERY, FIRST + 1)

    async def scenario():
        driver = Driver(log, acks_at_once=False)
        await driver.drain()
        driver.commit()
        log.advance(1000)
        log.append_command(Fire(NAME, FIRST + 1))
        await driver.deliver(home(log))
        assert driver.in_flight  # handed on, not yet in the log
        driver.crash()
        await driver.drain()
        return driver

    driver = asyncio.run(scenario())
    assert len(adds_of(log, job_id)) == 1 and driver.store.get(job_id) is not None


def test_a_committed_fire_read_again_writes_nothing():
    log = a_recurrence()

    async def scenario():
        driver = Driver(log)
        await driver.drain()
        log.advance(1000)
        log.append_command(Fire(NAME, FIRST + 1))
        await driver.drain()
        driver.rewind(home(log), 2)  # a seek back: the recur and the fire handed again
        await driver.drain()
        log.append_command(Fire(NAME, FIRST + 1))  # the timer's retry
        await driver.drain()
        return driver

    driver = asyncio.run(scenario())
    assert len(adds_of(log, slot_job_id(NAME, EVERY, FIRST + 1))) == 1
    assert driver.processor.counters.fired == 1


def test_unrecur_removes_the_record_and_moves_the_watermark():
    log = a_recurrence()
    log.append_command(Unrecur(NAME))

    async def scenario():
        driver = Driver(log)
        await driver.drain()
        # A kill -9 with nothing committed and the whole changelog kept: both commands
        # are read again over a table that has their effect; the recur must not come back.
        driver.crash(keep=100)
        await driver.drain()
        return driver

    driver = asyncio.run(scenario())
    table = driver.store.table(home(log))
    assert recurrence_table_key(NAME) not in table and WATERMARK_KEY in table
    assert driver.index.recurrence_names() == []
    assert driver.processor.counters.ignored == 2 and driver.processor.counters.applied == 0


def test_a_restart_indexes_the_recurrence_again_and_its_missed_slot_is_due():
    log = a_recurrence()

    async def scenario():
        driver = Driver(log)
        await driver.drain()
        driver.commit()
        driver.crash()
        return driver

    driver = asyncio.run(scenario())
    assert driver.index.recurrence_next_ms(NAME) == START_MS
    assert driver.index.due_recurrences(START_MS + 10_000) == [(NAME, EVERY, FIRST)]


# ------------------------------------------------------------------------- the timer


def test_the_timer_fires_the_latest_due_slot_and_asks_again_until_it_moves_on():
    log = a_recurrence()

    async def scenario():
        driver = Driver(log)
        await driver.drain()
        sent: list = []

        async def send(command) -> None:
            sent.append(command)

        now = [START_MS - 1]
        timer = DeadlineTimer(driver.index, Waiters(), send, lambda: now[0])
        await timer._tick()
        assert sent == []  # not due yet
        assert driver.index.next_deadline_ms() == START_MS
        now[0] = START_MS + 3400
        await timer._tick()
        assert sent == [Fire(NAME, FIRST + 3)]
        await timer._tick()
        assert sent == [Fire(NAME, FIRST + 3)]  # asked again only RETRY_AFTER_MS later
        now[0] += RETRY_AFTER_MS
        await timer._tick()
        assert sent[-1] == Fire(NAME, FIRST + 4)  # not applied yet: the latest again
        log.advance(now[0] - log.now_ms)  # the broker's clock agrees with the timer's
        for command in sent:
            log.append_command(command)
        await driver.drain()
        sent.clear()
        await timer._tick()
        assert sent == []  # the record moved on: the next slot is ahead
        return driver

    driver = asyncio.run(scenario())
    # Both fires applied at +4400 by the broker's clock: the first fires the latest slot
    # due then, the second finds it fired.
    assert driver.store.get(slot_job_id(NAME, EVERY, FIRST + 3)) is None
    assert driver.store.get(slot_job_id(NAME, EVERY, FIRST + 4)) is not None
    assert record_of(driver).fired_ms == (FIRST + 4) * EVERY
    assert driver.processor.counters.fired == 1


def test_the_index_forgets_a_partitions_recurrences_when_it_leaves():
    index = JobIndex()
    log = a_recurrence()

    async def scenario():
        driver = Driver(log)
        await driver.drain()
        return driver

    record = record_of(asyncio.run(scenario()))
    index.put_recurrence(3, record)
    index.drop_partition(2)
    assert index.recurrence_names() == [NAME]
    index.drop_partition(3)
    assert index.recurrence_names() == [] and index.due_recurrences(2**50) == []


# ------------------------------------------- histories with crashes (properties)

from hypothesis import event, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from eventq.core import recurrence  # noqa: E402
from eventq.core.batch import position  # noqa: E402
from eventq.core.commands import RECURRENCE_COMMANDS  # noqa: E402
from eventq.state.jobs_table import is_job_key  # noqa: E402

NAMES = ("a", "b")

_RECUR = st.tuples(st.just("recur"), st.sampled_from(NAMES), st.sampled_from((1000, 2000, 3000)))
_FIRE = st.tuples(st.just("fire"), st.sampled_from(NAMES), st.integers(-2, 1))
_ADVANCE = st.tuples(st.just("advance"), st.integers(1, 4000))
_EVERIES = st.lists(st.sampled_from((1000, 2000, 3000)), min_size=len(NAMES), max_size=len(NAMES))
steps = st.tuples(_EVERIES.map(lambda everys: [("recur", n, e) for n, e in zip(NAMES, everys)]),
                  st.lists(st.one_of(
    _RECUR, st.tuples(st.just("unrecur"), st.sampled_from(NAMES)), _FIRE, _FIRE, _FIRE,
    _ADVANCE, _ADVANCE,
    st.tuples(st.just("deliver"), st.integers(0, PARTITIONS - 1), st.integers(1, 3)),
    st.tuples(st.just("commit")),
    st.tuples(st.just("crash"), st.integers(0, 6), st.booleans()),
), min_size=4, max_size=50)).map(lambda parts: parts[0] + parts[1])


def folded(log: MemoryLog):
    """Each recurrence's record and the slots fired, folded from the final log as a
    replay would: positions, the watermark an unrecur moves, the broker's times."""
    records: dict[str, object] = {}
    fired: set[uuid.UUID] = set()
    for partition in range(log.partitions):
        watermark = -1
        for message in log.records(partition):
            for index, item in enumerate(read_record(message.value)[1]):
                command = decode_command(item).command
                if not isinstance(command, RECURRENCE_COMMANDS):
                    continue
                at = position(message.offset, index)
                record = records.get(command.name)
                if record is None and at <= watermark:
                    continue
                outcome, after = recurrence.apply(record, command, message.timestamp_ms, at)
                if isinstance(outcome, recurrence.Changed):
                    records[command.name] = after
                    if after is None:
                        watermark = at
                    if outcome.fired is not None:
                        fired.add(outcome.add.job_id)
    return {name: r for name, r in records.items() if r is not None}, fired


@settings(max_examples=300, deadline=None)
@given(steps)
def test_crashes_never_lose_or_double_a_slot_and_the_state_is_the_logs_fold(history):
    """Random recur/unrecur/fire (the timer's, repeated, stale) with kill -9s anywhere
    (follow-ups lost in flight, or written without their acknowledgement; changelog
    prefixes kept): once everything is applied, each recurrence's record is the fold of
    its partition's log, and the jobs are exactly the slots that fold fired, each once."""
    log = MemoryLog(PARTITIONS)
    everys = dict.fromkeys(NAMES, 1000)  # the timer knows the last definition's every

    async def scenario():
        driver = Driver(log, acks_at_once=False)
        for step in history:
            kind = step[0]
            if kind == "recur":
                everys[step[1]] = step[2]
                log.append_command(Recur(step[1], "q", 1000, TTL, step[2], b""))
            elif kind == "unrecur":
                log.append_command(Unrecur(step[1]))
            elif kind == "fire":  # the timer's view, a little off the broker's
                slot = log.now_ms // everys[step[1]] + step[2]
                log.append_command(Fire(step[1], max(0, slot)))
            elif kind == "advance":
                log.advance(step[1])
            elif kind == "deliver":
                await driver.deliver(step[1], step[2])
            elif kind == "commit":
                await driver.drain()
                driver.commit()
            else:
                driver.crash(keep=step[1], written=step[2])
        await driver.drain()
        return driver

    driver = asyncio.run(scenario())
    records, fired = folded(log)
    for name in NAMES:
        raw = driver.store.table(log.partition_of_key(recurrence_key(name))).get(
            recurrence_table_key(name))
        assert (None if raw is None else decode_recurrence(raw)) == records.get(name), name
        assert driver.index.recurrence_next_ms(name) == (
            None if name not in records else records[name].next_ms)
    jobs = {uuid.UUID(key.decode()) for p in range(PARTITIONS)
            for key in driver.store.table(p) if is_job_key(key)}
    assert jobs == fired
    event(f"slots fired: {min(len(fired), 3)}+, crashes: {driver.crashes > 0}")
