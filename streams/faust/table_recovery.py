"""Bring an owned partition's local table up to its changelog's committed end, before it
is served (docs/fencing.md, "Taking a partition").

eventq recovers the partitions it owns itself, instead of faust: `eventq.jobs` is
written in transactions (streams/faust/transactions.py), so its last offsets are commit and
abort markers that no reader is ever handed, and faust's recovery, which waits for a
record at the changelog's last offset, would wait forever (faust-streaming 0.15.3 only
copes in its exactly-once mode, after two 5 s timeouts: tables/recovery.py
``detect_aborted_tx``). Here the records after the table's persisted offset are read up
to the last stable offset, committed records only, and written in batches; the
persisted offset then names the last stable offset's predecessor, so faust finds
nothing to recover (``install`` makes sure it never tries).

It runs after this process fenced the partition's previous owner, so the last stable
offset is where the log ends: nobody else can commit to the partition any more. Unless
the broker answering is not the partition's leader any more without knowing it (cut off
from the cluster: the fault campaign's seed 3524, where such a broker said the changelog
ended before a transaction it never saw committed, and the table recovered from it lost
an acknowledged add). So the end must reach what the partition's last commit says it
wrote (eventq/kafka/commit_metadata.py); an answer short of it is asked again, of a
fresh client, until a broker that knows answers.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Callable

from rocksdict import WriteBatch

from eventq.kafka.logreader import end_offsets, read_batches
from eventq.kafka.security import KafkaTarget
from eventq.state.jobs_table import (
    EVENTQ_OFFSET_KEY,
    FAUST_OFFSET_KEY,
    persisted_offset,
    persisted_offset_records,
)
from streams.faust.monkeypatch import original_of, replace
from streams.store import TableDB

log = logging.getLogger(__name__)

WRITE_BATCH_RECORDS = 20_000
# How long a changelog end short of the last commit is asked again before the take
# fails (and is tried again later): a broker cut off from the cluster learns it lost the
# lead within seconds of reaching the controller again.
STALE_END_WAIT_S = 15.0
STALE_END_RETRY_S = 0.5
# Reading the changelog to its end: a read that gets no record and no nearer its end
# for this long stops (its client may still be fetching from such a stale broker, which
# never hands over what it does not have); the take fails and is tried again.
READ_STALL_S = 30.0

Ends = dict[int, tuple[int, int]]  # {partition: (low, high)} watermarks


class ChangelogBehind(Exception):
    """The changelog ends, as Kafka answers, before records its last commit wrote."""

    def __init__(self, partition: int, message: str) -> None:
        super().__init__(message)
        self.partition = partition


@dataclass(frozen=True)
class Recovered:
    partition: int
    records: int  # changelog records applied to the table
    end: int  # the changelog's last stable offset
    wiped: bool  # the table claimed records beyond the log's end: rebuilt from scratch
    seconds: float
    # Not recovered: the changelog still ended before its last commit (the table is
    # untouched; the partition is not taken this time).
    behind: ChangelogBehind | None = None


def recover_tables(bootstrap: KafkaTarget, topic: str, dbs: dict[int, TableDB],
                   at_least: dict[int, int] | None = None,
                   ends_of: Callable[[], Ends] | None = None,
                   wait_s: float = STALE_END_WAIT_S,
                   given_up: Callable[[], bool] = lambda: False) -> list[Recovered]:
    """Apply ``topic``'s committed records after each table's persisted offset, up to
    the last stable offset ({partition: db}; blocking: run it in a thread). The end of
    a partition in ``at_least`` must reach that offset (its last commit wrote up to
    there): one that does not within ``wait_s`` (or once ``given_up()``) is left as it
    is and reported ``behind``. ``ends_of``: how the watermarks are asked (a test's
    stale broker)."""
    began = time.monotonic()
    ends, short = ends_reaching(ends_of or (lambda: end_offsets(bootstrap, topic)),
                                at_least or {}, wait_s, given_up)
    behind_end = {p: ChangelogBehind(p, f"partition {p}'s changelog ends at {got}, before "
                                        f"{want}, where its last commit's records end")
                  for p, (got, want) in short.items()}
    dbs = {p: db for p, db in dbs.items() if p not in behind_end}
    starts, wiped = {}, set()
    for partition, db in dbs.items():
        low, end = ends.get(partition, (0, 0))
        persisted = persisted_offset(db)
        if db.get(FAUST_OFFSET_KEY) != db.get(EVENTQ_OFFSET_KEY):
            # faust's standby copy moved it since eventq last did: not to be trusted.
            log.info("partition %d's table was last brought up to date as a standby copy "
                     "(to offset %s): rebuilding it from the changelog", partition, persisted)
            wipe(db)
            wiped.add(partition)
            persisted = None
        elif persisted is not None and persisted >= end:
            # A table ahead of the log (the topic was recreated, or its tail truncated by
            # an unclean leader election): what it holds is not a prefix of this log.
            log.warning("partition %d's table says it holds changelog records up to %d, "
                        "but the changelog ends at %d: rebuilding it from the changelog",
                        partition, persisted, end)
            wipe(db)
            wiped.add(partition)
            persisted = None
        starts[partition] = low if persisted is None else persisted + 1
    counts = dict.fromkeys(dbs, 0)
    batches = {p: WriteBatch(raw_mode=True) for p in dbs}
    pending = dict.fromkeys(dbs, 0)

    def write(partition: int) -> None:
        dbs[partition].write(batches[partition])
        counts[partition] += pending[partition]
        batches[partition], pending[partition] = WriteBatch(raw_mode=True), 0

    behind = [p for p in dbs if starts[p] < ends.get(p, (0, 0))[1]]
    if behind:
        for messages in read_batches(bootstrap, topic, start=starts, partitions=behind,
                                     ends={p: ends[p] for p in behind},
                                     stall_s=READ_STALL_S):
            for message in messages:
                key, record_partition = message.key(), message.partition()
                if key is None or record_partition is None:  # not a table record
                    continue
                value = message.value()
                if value is None:
                    batches[record_partition].delete(key)
                else:
                    batches[record_partition].put(key, value)
                pending[record_partition] += 1
            for partition in behind:
                if pending[partition] >= WRITE_BATCH_RECORDS:
                    write(partition)
    results = []
    for partition in dbs:
        end = ends.get(partition, (0, 0))[1]
        if end > 0:  # faust resumes after this: nothing left to recover
            for key, value in persisted_offset_records(str(end - 1).encode()):
                batches[partition].put(key, value)
        write(partition)
        results.append(Recovered(partition, counts[partition], end, partition in wiped,
                                 time.monotonic() - began))
    seconds = time.monotonic() - began
    results += [Recovered(p, 0, short[p][0], False, seconds, behind)
                for p, behind in behind_end.items()]
    return results


def ends_reaching(ends_of: Callable[[], Ends], at_least: dict[int, int], wait_s: float,
                  given_up: Callable[[], bool] = lambda: False,
                  ) -> tuple[Ends, dict[int, tuple[int, int]]]:
    """The watermarks, asked again while some partition's end is short of
    ``at_least``, for up to ``wait_s``; and the partitions still short then, with
    (end, wanted)."""
    deadline = time.monotonic() + wait_s
    warned = False
    while True:
        ends = ends_of()
        short = {p: (ends.get(p, (0, 0))[1], end) for p, end in at_least.items()
                 if ends.get(p, (0, 0))[1] < end}
        if not short or time.monotonic() >= deadline or given_up():
            return ends, short
        if not warned:
            warned = True
            log.warning("the changelog ends before what its last commit wrote (%s): a "
                        "broker with a stale view answered; asking again",
                        ", ".join(f"{p}: ends at {got}, its last commit's records end at "
                                  f"{want}" for p, (got, want) in sorted(short.items())))
        time.sleep(STALE_END_RETRY_S)


def wipe(db: TableDB) -> None:
    """Delete every key of a partition's table (its persisted offset too)."""
    batch = WriteBatch(raw_mode=True)
    for key in db.keys():
        batch.delete(key)
    db.write(batch)


def install() -> None:
    """faust never recovers an active partition's table (eventq does, above); its
    standby copies it still keeps warm."""
    from faust.tables.recovery import Recovery

    if original_of(Recovery.need_recovery) is not None:
        return

    def need_recovery(self: Any) -> bool:  # faust's Recovery (streams/faust/monkeypatch.py)
        return False

    replace(Recovery, "need_recovery", need_recovery)
