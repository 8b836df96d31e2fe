"""Recovering an owned partition's table from its changelog (streams/faust/table_recovery.py),
against a real broker: the end it reads to must reach what the partition's last commit
wrote, whatever a broker with a stale view answers."""

from __future__ import annotations

import asyncio
import time

import pytest

from eventq.kafka.committed import committed_positions
from eventq.kafka.logreader import end_offsets
from eventq.state.jobs_table import EVENTQ_OFFSET_KEY, FAUST_OFFSET_KEY
from streams.faust.table_recovery import ChangelogBehind, recover_tables
from support.changelog_tables import Tables, changelogs, make_topics

pytestmark = [pytest.mark.kafka]


@pytest.fixture
def tables(tmp_path):
    made = Tables(tmp_path / "owner")
    yield made
    made.close()


def commit_twice(bootstrap: str, tables: Tables, jobs: str, commands: str, app_id: str):
    """Two committed transactions on partition 0: the first one's end, and the
    committed positions once the second committed."""
    async def scenario():
        logs = changelogs(bootstrap, tables, jobs, commands, app_id, [])
        await logs.take([0])
        await logs.begin()
        await logs.persist(0, [(b"added", b"NEW"), (b"other", b"NEW")])
        await logs.commit({0: 2})
        first_end = logs.log_of(0).changelog_end()
        await logs.persist(0, [(b"added", b"FAILED"), (b"late", b"NEW")])
        await logs.commit({0: 4})
        await logs.release_all(None)
        return first_end

    first_end = asyncio.run(scenario())
    committed = asyncio.run(committed_positions(bootstrap, app_id, commands, [0]))
    return first_end, committed[0]


def test_a_commit_names_the_end_of_the_changelog_it_wrote(kafka_bootstrap, topic_prefix, tables):
    jobs, commands = make_topics(kafka_bootstrap, topic_prefix)
    first_end, committed = commit_twice(kafka_bootstrap, tables, jobs, commands, topic_prefix)
    assert first_end == 2  # records at 0 and 1, the commit marker at 2
    assert committed.offset == 4
    assert committed.changelog_end == 5  # records at 3 and 4 after the first marker
    assert int(tables.db(0)[FAUST_OFFSET_KEY]) == 4
    assert end_offsets(kafka_bootstrap, jobs)[0][1] > committed.changelog_end


def test_a_stale_end_is_asked_again_until_it_reaches_the_last_commit(
        kafka_bootstrap, topic_prefix, tables, tmp_path):
    """Seed 3524 of the fault campaign: a broker cut off from the cluster, still leader
    in its own eyes, said the changelog ended at the first transaction's end, before the
    second one's records (it never saw that commit). The partition's new owner rebuilt
    its table from that and lost an acknowledged add and a fail."""
    jobs, commands = make_topics(kafka_bootstrap, topic_prefix)
    first_end, committed = commit_twice(kafka_bootstrap, tables, jobs, commands, topic_prefix)
    answers = []

    def stale_then_fresh():
        fresh = end_offsets(kafka_bootstrap, jobs)
        answers.append(fresh)
        if len(answers) <= 2:  # the stale broker answers twice
            return {**fresh, 0: (0, first_end + 1)}
        return fresh

    recovering = Tables(tmp_path / "next")
    try:
        recover_tables(kafka_bootstrap, jobs, {0: recovering.db(0)},
                       {0: committed.changelog_end}, ends_of=stale_then_fresh)
        db = recovering.db(0)
        assert len(answers) == 3
        assert db.get(b"added") == b"FAILED" and db.get(b"late") == b"NEW"
    finally:
        recovering.close()


def test_a_table_ahead_of_a_stale_end_is_not_wiped(kafka_bootstrap, topic_prefix, tables):
    """The owner's own table, rolled back to its last commit, holds more than the stale
    broker says the changelog has: it waits, and a partition that cannot reach the end
    is reported behind (not taken this time) with its table as it was."""
    jobs, commands = make_topics(kafka_bootstrap, topic_prefix)
    first_end, committed = commit_twice(kafka_bootstrap, tables, jobs, commands, topic_prefix)
    before = dict(tables.db(0).items())
    fresh = end_offsets(kafka_bootstrap, jobs)

    def stale_for_partition_0():
        return {**fresh, 0: (0, first_end + 1)}

    other = Tables(tables._path.parent / "other")
    try:
        recovered = recover_tables(kafka_bootstrap, jobs, {0: tables.db(0), 1: other.db(1)},
                                   {0: committed.changelog_end}, ends_of=stale_for_partition_0,
                                   wait_s=1.0)
    finally:
        other.close()
    by_partition = {r.partition: r for r in recovered}
    assert isinstance(by_partition[0].behind, ChangelogBehind)
    assert by_partition[0].behind.partition == 0
    assert by_partition[1].behind is None  # the others are taken
    assert dict(tables.db(0).items()) == before


def test_a_wait_for_a_stale_end_stops_once_given_up(kafka_bootstrap, topic_prefix, tables):
    """A rebalance while the take waits: it stops asking at once (the next take decides)."""
    jobs, commands = make_topics(kafka_bootstrap, topic_prefix)
    first_end, committed = commit_twice(kafka_bootstrap, tables, jobs, commands, topic_prefix)
    began = time.monotonic()
    recovered = recover_tables(kafka_bootstrap, jobs, {0: tables.db(0)},
                               {0: committed.changelog_end},
                               ends_of=lambda: {0: (0, first_end + 1)}, wait_s=30.0,
                               given_up=lambda: time.monotonic() - began > 1.0)
    assert recovered[0].behind is not None and time.monotonic() - began < 5


def test_a_table_brought_up_to_date_as_a_standby_copy_is_rebuilt(
        kafka_bootstrap, topic_prefix, tables, tmp_path):
    """Campaign seed 4116: a process took over a partition whose table faust had kept as
    a standby copy; the copy claimed the changelog's last offset but lacked a committed
    complete (and the job was leased again). eventq does not trust an offset faust wrote:
    such a table is read again from the changelog's start."""
    jobs, commands = make_topics(kafka_bootstrap, topic_prefix)
    first_end, committed = commit_twice(kafka_bootstrap, tables, jobs, commands, topic_prefix)
    end = end_offsets(kafka_bootstrap, jobs)[0][1]
    standby = Tables(tmp_path / "standby")
    try:
        db = standby.db(0)
        # What a standby copy with a gap holds: the first transaction only, and faust's
        # persisted offset at the changelog's end.
        db[b"added"], db[b"other"] = b"NEW", b"NEW"
        db[FAUST_OFFSET_KEY] = str(end - 1).encode()
        recovered = recover_tables(kafka_bootstrap, jobs, {0: db},
                                   {0: committed.changelog_end})
        assert recovered[0].wiped
        assert db.get(b"added") == b"FAILED" and db.get(b"late") == b"NEW"
        assert db.get(FAUST_OFFSET_KEY) == db.get(EVENTQ_OFFSET_KEY) == str(end - 1).encode()
    finally:
        standby.close()


def test_a_table_eventq_wrote_last_is_read_on_from_its_offset(
        kafka_bootstrap, topic_prefix, tables):
    """The owner's own table (both offsets agree) is not rebuilt: only what came after."""
    jobs, commands = make_topics(kafka_bootstrap, topic_prefix)
    _, committed = commit_twice(kafka_bootstrap, tables, jobs, commands, topic_prefix)
    recovered = recover_tables(kafka_bootstrap, jobs, {0: tables.db(0)},
                               {0: committed.changelog_end})
    assert not recovered[0].wiped and recovered[0].records == 0
