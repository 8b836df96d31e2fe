"""The changelog in transactions (streams/faust/transactions.py), against a real broker: what
a commit makes visible, what a fenced owner can no longer write, and the rollback of the
local table to the last commit."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition

from eventq.kafka.logreader import read_topic
from eventq.state.jobs_table import FAUST_OFFSET_KEY
from streams.faust.transactions import ChangelogLost, Changelogs, _Undo
from support.changelog_tables import Tables, changelogs, make_topics

pytestmark = [pytest.mark.kafka]


@pytest.fixture
def tables(tmp_path):
    made = Tables(tmp_path)
    yield made
    made.close()


async def committed_offset(bootstrap: str, group: str, topic: str, partition: int):
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                                enable_auto_commit=False)
    await consumer.start()
    try:
        return await consumer.committed(TopicPartition(topic, partition))
    finally:
        await consumer.stop()


def committed_records(bootstrap: str, topic: str) -> list[tuple[int, bytes, bytes | None]]:
    return [(r.partition, r.key, r.value) for r in read_topic(bootstrap, topic)]


def eventually_committed(bootstrap: str, topic: str, expected, timeout_s: float = 10.0):
    """The committed records once they are ``expected``: a commit's markers reach the
    partitions just after the commit returns (the coordinator writes them), and readers
    of committed records see the records only then."""
    deadline = time.monotonic() + timeout_s
    while True:
        records = committed_records(bootstrap, topic)
        if records == expected or time.monotonic() > deadline:
            return records
        time.sleep(0.1)


def test_a_commit_makes_records_and_the_offset_visible_together(kafka_bootstrap, topic_prefix, tables):
    jobs, commands = make_topics(kafka_bootstrap, topic_prefix)
    lost = []

    async def scenario():
        logs = changelogs(kafka_bootstrap, tables, jobs, commands, topic_prefix, lost)
        await logs.take([0])
        await logs.begin()
        await logs.persist(0, [(b"a", b"A1"), (b"b", b"B1")])
        assert committed_records(kafka_bootstrap, jobs) == []  # not yet committed
        await logs.commit({0: 7})
        expected = [(0, b"a", b"A1"), (0, b"b", b"B1")]
        assert await asyncio.to_thread(eventually_committed, kafka_bootstrap, jobs, expected) == expected
        assert await committed_offset(kafka_bootstrap, topic_prefix, commands, 0) == 7
        await logs.persist(0, [(b"a", None)])
        await logs.release_all({0: 9})
        return logs

    logs = asyncio.run(scenario())
    assert lost == []
    expected = [(0, b"a", b"A1"), (0, b"b", b"B1"), (0, b"a", None)]
    assert eventually_committed(kafka_bootstrap, jobs, expected) == expected
    assert tables.db(0).get(b"a") is None and tables.db(0).get(b"b") == b"B1"
    assert int(tables.db(0)[FAUST_OFFSET_KEY]) >= 2  # the last committed record's offset
    assert logs.commits == 2 and logs.records == 3


def test_a_fenced_owner_writes_nothing_more_and_rolls_its_table_back(kafka_bootstrap, topic_prefix, tmp_path):
    """Two processes believe they own partition 0 (the first was paused past its session):
    the second one's start fences the first. Nothing the first wrote after its last
    commit is ever read, and its table is as its last commit left it."""
    jobs, commands = make_topics(kafka_bootstrap, topic_prefix)
    old_tables, new_tables = Tables(tmp_path / "old"), Tables(tmp_path / "new")
    lost_old, lost_new = [], []

    async def scenario():
        old = changelogs(kafka_bootstrap, old_tables, jobs, commands, topic_prefix, lost_old)
        await old.take([0])
        await old.begin()
        await old.persist(0, [(b"job", b"added")])
        await old.commit({0: 1})
        committed_offset_key = old_tables.db(0)[FAUST_OFFSET_KEY]
        await old.persist(0, [(b"job", b"completed"), (b"other", b"added")])  # not committed
        new = changelogs(kafka_bootstrap, new_tables, jobs, commands, topic_prefix, lost_new)
        await new.take([0])  # fences the old owner: its open transaction is aborted
        await new.begin()
        await old.persist(0, [(b"job", b"deleted-late")])  # the paused one wakes up
        await old.commit({0: 3})
        assert lost_old and {p for p, _ in lost_old} == {0}
        await old.release_all(None)  # what the steward does once it lost them
        await new.persist(0, [(b"job", b"leased")])
        await new.commit({0: 2})
        await new.release_all({0: 2})
        return committed_offset_key

    try:
        persisted = asyncio.run(scenario())
        expected = [(0, b"job", b"added"), (0, b"job", b"leased")]
        assert eventually_committed(kafka_bootstrap, jobs, expected) == expected
        assert asyncio.run(committed_offset(kafka_bootstrap, topic_prefix, commands, 0)) == 2
        assert old_tables.db(0).get(b"job") == b"added"  # rolled back to its commit
        assert old_tables.db(0).get(b"other") is None
        assert old_tables.db(0)[FAUST_OFFSET_KEY] == persisted
        assert lost_new == []
    finally:
        old_tables.close()
        new_tables.close()


def test_a_rollback_during_a_commit_restores_both_uncommitted_spans(tables):
    """Writes made while a commit is under way belong to the next transaction: if that
    commit fails too, both spans are undone, the older before-values winning."""
    db = tables.db(0)
    db[b"k"] = b"v0"
    db[FAUST_OFFSET_KEY] = b"41"
    older = _Undo(persisted=b"41")
    older.capture(db, [(b"k", b"v1"), (b"new", b"x")])
    tables.write_batch(0, [(b"k", b"v1"), (b"new", b"x")])
    newer = _Undo()
    newer.capture(db, [(b"k", b"v2"), (b"later", b"y")])
    tables.write_batch(0, [(b"k", b"v2"), (b"later", b"y")])
    db[FAUST_OFFSET_KEY] = b"50"
    assert newer.merged_under(older).write_back(db) == 3
    assert db.get(b"k") == b"v0" and db.get(b"new") is None and db.get(b"later") is None
    assert db[FAUST_OFFSET_KEY] == b"41"


def test_a_commit_while_nothing_was_applied_since_is_skipped(kafka_bootstrap, topic_prefix, tables):
    jobs, commands = make_topics(kafka_bootstrap, topic_prefix)

    async def scenario():
        logs = changelogs(kafka_bootstrap, tables, jobs, commands, topic_prefix, [])
        await logs.take([1])
        await logs.begin()
        log_ = logs.log_of(1)
        await logs.persist(1, [(b"x", b"1")])
        assert await log_.commit(5) is True
        assert await log_.commit(5) is False  # nothing new
        await logs.release_all(None)
        with pytest.raises(ChangelogLost):
            logs.log_of(1)

    asyncio.run(scenario())


def test_a_second_begin_keeps_what_the_first_one_would_undo(kafka_bootstrap, topic_prefix, tables):
    """Found by the paused-owner test: a recovery run twice for one assignment began a
    partition's transaction again, which forgot the undo of what had been written
    since; a later rollback then left those writes in the table, and re-applying their
    commands was "already applied", so the changelog never got them."""
    jobs, commands = make_topics(kafka_bootstrap, topic_prefix)

    async def scenario():
        logs = changelogs(kafka_bootstrap, tables, jobs, commands, topic_prefix, [])
        await logs.take([0])
        await logs.begin()
        await logs.persist(0, [(b"job", b"leased")])
        await logs.begin()  # again: must change nothing
        await logs.release_all(None)  # rolled back

    asyncio.run(scenario())
    assert tables.db(0).get(b"job") is None


def test_nothing_is_stored_for_a_partition_whose_transaction_is_not_open(
        kafka_bootstrap, topic_prefix, tables):
    """Found by the fault campaign (seed 1012): a record applied to a partition taken
    again but not yet begun was written to the table outside any transaction, so no
    rollback could undo it; it must be refused (reported lost) and not written."""
    jobs, commands = make_topics(kafka_bootstrap, topic_prefix)
    lost = []

    async def scenario():
        logs = changelogs(kafka_bootstrap, tables, jobs, commands, topic_prefix, lost)
        await logs.take([0])  # not begun
        await logs.persist(0, [(b"job", b"leased")])
        await logs.persist(1, [(b"other", b"leased")])  # not taken at all
        await logs.release_all(None)

    asyncio.run(scenario())
    assert [p for p, _ in lost] == [0, 1]
    assert tables.db(0).get(b"job") is None and tables.db(1).get(b"other") is None


class OrderedProducer:
    """A transactional producer that records the order of its calls and lets a test
    hold a send_batch: aiokafka fails a transaction whose commit starts while a batch
    is still being appended (an AssertionError in its transaction manager)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.sending = asyncio.Event()
        self.release = asyncio.Event()
        self.in_flight = 0
        self.counts: list[int] = []  # records per batch sent
        self.fail_sends = False

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def begin_transaction(self) -> None:
        self.calls.append("begin")

    def create_batch(self):
        from aiokafka.producer.message_accumulator import BatchBuilder
        return BatchBuilder(1 << 20, 0, is_transactional=True)

    async def send_batch(self, batch, topic, partition):
        self.in_flight += 1
        self.sending.set()
        await self.release.wait()
        self.in_flight -= 1
        self.calls.append("send")
        self.counts.append(batch.record_count())
        if self.fail_sends:
            raise RuntimeError("the broker refused it")
        done = asyncio.get_running_loop().create_future()
        done.set_result(type("Metadata", (), {"offset": 0})())
        return done

    async def send_offsets_to_transaction(self, offsets, group_id):
        assert not self.in_flight, "a batch was still being appended"
        self.calls.append("offsets")

    async def commit_transaction(self) -> None:
        self.calls.append("commit")


def test_a_commit_waits_for_a_batch_still_being_handed_to_the_producer(tables):
    """Found by the fault campaign (seed 1012)."""
    producer = OrderedProducer()
    logs = Changelogs(bootstrap="unused:9", app_id="app", topic="jobs", commands_topic="commands",
                      store=tables, on_lost=lambda p, error: None,
                      producer_factory=lambda txn_id: producer)

    async def scenario():
        await logs.take([0])
        await logs.begin()
        storing = asyncio.ensure_future(logs.persist(0, [(b"job", b"leased")]))
        await producer.sending.wait()
        committing = asyncio.ensure_future(logs.log_of(0).commit(1))
        await asyncio.sleep(0.05)
        assert "offsets" not in producer.calls  # waits for the send ...
        producer.release.set()
        await storing
        assert await committing is True  # ... then commits it
        return logs.log_of(0).failure

    assert asyncio.run(scenario()) is None
    assert producer.calls == ["begin", "send", "offsets", "commit", "begin"]


class StuckProducer(OrderedProducer):
    """A producer whose send never returns (its client was closed under it while it
    waited for metadata: aiokafka's wait then never ends)."""

    async def send_batch(self, batch, topic, partition):
        self.sending.set()
        await asyncio.Event().wait()


def test_a_send_the_producer_never_takes_loses_the_transaction_within_a_bound(
        tables, monkeypatch):
    """The fault campaign (seed 3204): a process whose apply of one record never ended,
    so its rebalance waited for that record for good and it never served again."""
    import streams.faust.transactions as transactions

    monkeypatch.setattr(transactions, "SEND_TIMEOUT_S", 0.2)
    lost: list[int] = []
    logs = Changelogs(bootstrap="unused:9", app_id="app", topic="jobs", commands_topic="commands",
                      store=tables, on_lost=lambda p, error: lost.append(p),
                      producer_factory=lambda txn_id: StuckProducer())

    async def scenario() -> float:
        await logs.take([0])
        await logs.begin()
        began = time.monotonic()
        await asyncio.wait_for(logs.persist(0, [(b"job", b"leased")]), 5)
        while not lost and time.monotonic() - began < 5:  # the send is behind the reply
            await asyncio.sleep(0.01)
        return time.monotonic() - began

    took_s = asyncio.run(scenario())
    assert lost == [0] and took_s < 2
    assert isinstance(logs.log_of(0).failure, TimeoutError)



def held_changelogs(tables, producer, lost) -> Changelogs:
    return Changelogs(bootstrap="unused:9", app_id="app", topic="jobs", commands_topic="commands",
                      store=tables, on_lost=lambda p, error: lost.append(p),
                      producer_factory=lambda txn_id: producer)


def test_a_persist_does_not_wait_for_the_producer(tables):
    """A command's reply waits for its apply, not for the changelog: the producer takes a
    partition's next batch only once the one before it is acknowledged, a broker round
    trip per applied record (docs/architecture.md, "The changelog")."""
    producer = OrderedProducer()
    logs = held_changelogs(tables, producer, [])

    async def scenario():
        await logs.take([0])
        await logs.begin()
        await asyncio.wait_for(logs.persist(0, [(b"a", b"1")]), 1)
        await producer.sending.wait()  # handed over behind the reply, still held
        for n in range(3):  # queued meanwhile: one send once the first is taken
            await asyncio.wait_for(logs.persist(0, [(b"b%d" % n, b"2")]), 1)
        assert producer.counts == []
        producer.release.set()
        assert await logs.log_of(0).commit(4) is True
        return tables.db(0).get(b"b2")

    assert asyncio.run(scenario()) == b"2"
    assert producer.counts == [1, 3]
    assert producer.calls == ["begin", "send", "send", "offsets", "commit", "begin"]


def test_records_handed_in_while_idle_linger_then_leave_as_one_send(tables, monkeypatch):
    """At a light load a partition's records wait CHANGELOG_LINGER_S for others rather
    than each taking a transactional produce request of its own."""
    import streams.faust.transactions as transactions

    monkeypatch.setattr(transactions, "CHANGELOG_LINGER_S", 0.05)
    producer = OrderedProducer()
    producer.release.set()
    logs = held_changelogs(tables, producer, [])

    async def scenario():
        await logs.take([0])
        await logs.begin()
        for n in range(3):
            await logs.persist(0, [(b"k%d" % n, b"v")])
            await asyncio.sleep(0.005)
        assert producer.counts == []  # still lingering
        await asyncio.wait_for(producer.sending.wait(), 1)
        await asyncio.sleep(0.01)
        assert producer.counts == [3]
        assert await logs.log_of(0).commit(3) is True

    asyncio.run(scenario())
    assert producer.calls == ["begin", "send", "offsets", "commit", "begin"]


def test_records_handed_in_during_a_commit_go_into_the_next_transaction(tables):
    producer = OrderedProducer()
    producer.release.set()
    logs = held_changelogs(tables, producer, [])

    async def scenario():
        await logs.take([0])
        await logs.begin()
        await logs.persist(0, [(b"a", b"1")])
        committing = asyncio.ensure_future(logs.log_of(0).commit(1))
        await asyncio.sleep(0)
        await logs.persist(0, [(b"b", b"1")])  # during the commit
        assert await committing is True
        await asyncio.sleep(0.01)
        assert await logs.log_of(0).commit(2) is True

    asyncio.run(scenario())
    assert producer.calls == ["begin", "send", "offsets", "commit", "begin",
                              "send", "offsets", "commit", "begin"]


def test_a_send_that_fails_behind_the_reply_loses_the_partition(tables):
    producer = OrderedProducer()
    producer.fail_sends = True
    lost: list[int] = []
    logs = held_changelogs(tables, producer, lost)

    async def scenario():
        await logs.take([0])
        await logs.begin()
        await logs.persist(0, [(b"a", b"1")])
        producer.release.set()
        for _ in range(100):
            if lost:
                break
            await asyncio.sleep(0.01)
        with pytest.raises(ChangelogLost):
            await logs.log_of(0).commit(1)

    asyncio.run(scenario())
    assert lost == [0]  # once
    assert tables.db(0).get(b"a") == b"1"  # until the steward rolls it back


def test_a_partition_given_up_is_not_reported_lost_by_its_own_rollback(tables):
    producer = OrderedProducer()
    lost: list[int] = []
    logs = held_changelogs(tables, producer, lost)

    async def scenario():
        await logs.take([0])
        await logs.begin()
        await logs.persist(0, [(b"a", b"1")])
        await logs.release([0], None)  # rolled back, its producer closed
        producer.release.set()
        await asyncio.sleep(0.05)

    asyncio.run(scenario())
    assert lost == []
    assert tables.db(0).get(b"a") is None
