"""Restoring a data dir's tables from `eventq.jobs` at disk speed (docs/architecture.md,
"Memory and restores").

faust restores a table from its changelog one record at a time through its consumer
and its table machinery: ~5,000 records/s, 213 s for 1,000,000 jobs. Here the records
are read in batches of 50,000 (eventq/kafka/logreader.py ``read_batches``) and copied
into faust's own RocksDB layout in write batches, undecoded (a state record is stored
as it is logged; tombstones delete). Each partition's table then gets faust's persisted
changelog offset, so faust finds nothing left to restore and reads only what comes
after it.

Used by ``eventq serve`` before faust starts (for each partition whose table is absent,
or was discarded after an unclean stop) and by ``eventq replay``. A restore that dies
half-way leaves the server's RUNNING marker behind (eventq/run/statedir.py): the next start
discards the tables and restores them again, so a partial table is never served.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from eventq.kafka.logreader import Progress, end_offsets, read_batches
from eventq.kafka.security import KafkaTarget
from eventq.state.jobs_table import ROCKSDB_OPTIONS, persisted_offset_records
from eventq.state.jobs_table import persisted_offset as table_persisted_offset

if TYPE_CHECKING:
    from rocksdict import Rdict

WRITE_BATCH_RECORDS = 20_000  # per partition: ~5 MB of 225-byte records per write


def table_path(state_dir: Path, partition: int) -> Path:
    """faust's RocksDB path of the `jobs` table's partition (faust/stores/rocksdb.py)."""
    return state_dir / "v1" / "tables" / f"jobs-{partition}.db"


def open_table(path: Path) -> Rdict:
    """A partition's table opened as faust opens it (the same options)."""
    from faust.stores.rocksdb import RocksDBOptions

    path.parent.mkdir(parents=True, exist_ok=True)
    table: Rdict = RocksDBOptions(**ROCKSDB_OPTIONS, use_rocksdict=True).open(path)  # Any
    return table


def persisted_offset(path: Path) -> int | None:
    """faust's persisted changelog offset of a table, None if it has none."""
    if not path.exists():
        return None
    db = open_table(path)
    try:
        return table_persisted_offset(db)
    finally:
        db.close()


def partitions_to_restore(state_dir: Path, partitions: range) -> list[int]:
    """The partitions whose table holds no persisted offset: faust would restore them
    from the first record of the changelog (a table without an offset is thrown away:
    what it holds is not known to match any prefix of the log)."""
    missing = []
    for partition in partitions:
        path = table_path(state_dir, partition)
        if persisted_offset(path) is None:
            shutil.rmtree(path, ignore_errors=True)
            missing.append(partition)
    return missing


@dataclass
class RestoreReport:
    partitions: list[int]
    records: int = 0
    seconds: float = 0.0

    @property
    def records_per_s(self) -> float:
        return self.records / max(self.seconds, 1e-9)


def restore_tables(
    bootstrap: KafkaTarget,
    jobs_topic: str,
    state_dir: Path,
    partitions: list[int] | None,
    progress: Progress | None = None,
) -> RestoreReport:
    """Copy ``partitions`` (None: all) of the state log into their (absent) tables, each
    ending with faust's persisted offset: the offset of the last record copied."""
    import rocksdict

    began = time.monotonic()
    ends = end_offsets(bootstrap, jobs_topic)
    partitions = sorted(ends) if partitions is None else list(partitions)
    report = RestoreReport(partitions)
    dbs = {p: open_table(table_path(state_dir, p)) for p in partitions}
    no_wal = rocksdict.WriteOptions()
    # A crash mid-restore discards the tables anyway. (rocksdict's stub declares
    # disable_wal a method; it is a property.)
    no_wal.disable_wal = True  # type: ignore[method-assign, assignment]
    batches = {p: rocksdict.WriteBatch(raw_mode=True) for p in partitions}
    pending = dict.fromkeys(partitions, 0)

    def write(partition: int) -> None:
        dbs[partition].write(batches[partition], write_opt=no_wal)
        batches[partition] = rocksdict.WriteBatch(raw_mode=True)
        pending[partition] = 0

    try:
        for messages in read_batches(
            bootstrap, jobs_topic, progress, partitions=partitions, ends=ends
        ):
            report.records += len(messages)
            for message in messages:
                partition, key = message.partition(), message.key()
                assert partition is not None  # a consumed message's
                if key is None:
                    continue  # not a table record: faust's changelog always has keys
                value = message.value()
                if value is None:
                    batches[partition].delete(key)
                else:
                    batches[partition].put(key, value)
                pending[partition] += 1
                if pending[partition] >= WRITE_BATCH_RECORDS:
                    write(partition)
        for partition in partitions:
            low, high = ends.get(partition, (0, 0))
            if high > low:  # faust resumes after this offset: nothing left to restore
                for key, value in persisted_offset_records(str(high - 1).encode()):
                    batches[partition].put(key, value)
            write(partition)
            dbs[partition].flush()
    finally:
        for db in dbs.values():
            db.close()
    report.seconds = time.monotonic() - began
    return report


class ProgressLine:
    """A progress line every ``every_s`` for a server's log (a restore of 1,000,000
    records takes seconds; of 100,000,000, minutes)."""

    def __init__(self, what: str, say: Callable[[str], None], every_s: float = 5.0) -> None:
        self._what, self._say, self._every_s = what, say, every_s
        self._began = time.monotonic()
        self._last = float("-inf")  # the first call says that it began

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self._last < self._every_s and done < total:
            return
        self._last = now
        rate = done / max(now - self._began, 1e-9)
        share = 100 * done / total if total else 100.0
        self._say(f"{self._what}: {done:,} of {total:,} records ({share:.0f}%, "
                  f"{rate:,.0f}/s)")


def die_with_parent(parent_pid: int) -> bool:
    """Be killed when the server that started us dies. A restore outliving its server
    (``kill -9`` of the server) would go on writing into tables that the next server
    discards and restores again: two writers in one RocksDB directory corrupted it
    (CI, 2026-11-25: "Bad table magic number" after exactly that). Linux's
    PR_SET_PDEATHSIG does it; then the parent must still be the one that started us
    (it may have died before the call). False: it is gone, do nothing."""
    import ctypes
    import os
    import signal

    PR_SET_PDEATHSIG = 1
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    except (AttributeError, OSError):  # not Linux: the RUNNING marker still protects
        pass                           # against a restart while the parent runs
    return os.getppid() == parent_pid


def main(argv: list[str] | None = None) -> int:
    """``python -m eventq.run.restore``: the server runs its restore in a child process, so
    the restore's buffers (fetched batches, write batches, memtables) are never part
    of the server's resident memory, which then holds only what serving needs."""
    import argparse
    import os
    import sys

    from eventq.kafka.security import KafkaAccess
    from eventq.settings import kafka_security_from_env

    parser = argparse.ArgumentParser(prog="python -m eventq.run.restore", description=__doc__)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--jobs-topic", required=True)
    parser.add_argument("--state-dir", required=True, type=Path)
    parser.add_argument("--parent-pid", type=int, required=True)
    parser.add_argument("partitions", type=int, nargs="+")
    args = parser.parse_args(argv)
    if not die_with_parent(args.parent_pid):
        return 1
    what = (f"restoring {len(args.partitions)} partitions of state from "
            f"{args.jobs_topic}")

    def say(line: str) -> None:
        print(f"eventq: {line}", flush=True)

    try:
        kafka = KafkaAccess(args.bootstrap, kafka_security_from_env(os.environ))
        report = restore_tables(kafka, args.jobs_topic, args.state_dir,
                                args.partitions, ProgressLine(what, say))
    except Exception as error:  # KafkaException, LookupError: say what, fail
        print(f"eventq: could not restore state from {args.jobs_topic}: {error}",
              file=sys.stderr, flush=True)
        return 1
    say(f"restored {report.records:,} state records into {len(args.partitions)} "
        f"partitions in {report.seconds:.1f}s ({report.records_per_s:,.0f} records/s)")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
