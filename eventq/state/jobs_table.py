"""The `jobs` table as faust and eventq lay it out in RocksDB (one DB per partition).

The processors read and write it (streams/store.py), ``eventq serve`` and ``eventq
replay`` restore it from `eventq.jobs` (eventq/run/restore.py) and the replay scans it
(eventq/run/replay.py): the keys that are not jobs, the RocksDB options faust opens it
with, and a scan of a partition's jobs as their slim projections.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

from rocksdict import ReadOptions

from eventq.core import CodecError
from eventq.core.slim import Slim, project_state
from eventq.core.workflow import INPUT_KEY_PREFIX, REGISTRATION_KEY_PREFIX
from eventq.kafka.logreader import META_KEY_PREFIX

# Keys of the table that are not jobs. faust keeps its changelog offset in every
# partition's RocksDB; eventq keeps its tombstone watermark (streams/processor.py).
FAUST_OFFSET_KEY = b"__faust\x00offset__"
# The same offset as eventq last wrote it (local only, never in the changelog). faust
# writes FAUST_OFFSET_KEY alone when it brings a standby copy up to date, and a standby
# copy can claim an offset while it lacks records before it (the fault campaign's seed
# 4116: a table taken over from a standby copy lacked a committed complete, and the job
# was leased again). A table whose two offsets differ is therefore rebuilt from the
# changelog when taken (streams/faust/table_recovery.py; docs/fencing.md, "Taking a partition").
EVENTQ_OFFSET_KEY = b"__eventq\x00offset__"
WATERMARK_KEY = META_KEY_PREFIX + b"eventq.watermark.position"  # a position
LEGACY_WATERMARK_KEY = META_KEY_PREFIX + b"eventq.watermark"  # an offset (before batches)
# The bulk lane's admission: the next bulk position to admit (eventq/core/batch.py).
BULK_ADMITTED_KEY = META_KEY_PREFIX + b"eventq.bulk.admitted"
# A queue's pause state, as this partition's log left it, with the position of the
# command that set it: b"1 <position>" paused, b"0 <position>" resumed (b"1"/b"0", no
# position, were written before positions were kept: any command applies over them).
PAUSED_KEY_PREFIX = META_KEY_PREFIX + b"eventq.paused:"
PAUSED_WITHOUT_POSITION = -1
# Workflows' records beside the jobs (eventq/core/workflow.py builds their keys, pure):
# a registration in the upstream's partition, \x00eventq.reg:<upstream>:<dependent>,
# scanned by prefix when the upstream ends (registrations_prefix); an input in the
# dependent's partition, \x00eventq.input:<dependent>:<upstream>, read by its links.
# Under the meta prefix, so every reader of jobs passes over them (is_job_key).
assert REGISTRATION_KEY_PREFIX.startswith(META_KEY_PREFIX)
assert INPUT_KEY_PREFIX.startswith(META_KEY_PREFIX)


class Table(Protocol):
    """A partition's table as read here: rocksdict's Rdict in raw mode (faust's RocksDB
    store), whose keys and values are bytes but typed Any by its stubs; or, without
    RocksDB, streams/memory.py's MemoryDB."""

    def get(self, key: bytes, default: None = None) -> Any: ...

    def items(self, *, read_opt: Any = None) -> Iterator[tuple[Any, Any]]: ...


def persisted_offset(db: Table) -> int | None:
    """The table's persisted changelog offset, as faust keeps it (None: none yet)."""
    raw = db.get(FAUST_OFFSET_KEY)
    return None if raw is None else int(raw)


def persisted_offset_records(value: bytes | None) -> list[tuple[bytes, bytes | None]]:
    """The table's persisted changelog offset (None: deleted), as faust and eventq keep
    it: every write of it by eventq writes both."""
    return [(FAUST_OFFSET_KEY, value), (EVENTQ_OFFSET_KEY, value)]


def paused_key(name: str) -> bytes:
    return PAUSED_KEY_PREFIX + name.encode()


def pause_record(paused: bool, at: int) -> bytes:
    """The value of a queue's pause record, set by the command at position ``at``."""
    return b"%d %d" % (int(paused), at)


def read_pause_record(value: bytes) -> tuple[bool, int]:
    """(paused, position of the command that set it) of a pause record's value."""
    state, _, at = value.partition(b" ")
    return state == b"1", int(at) if at else PAUSED_WITHOUT_POSITION


MIB = 1024 * 1024
# RocksDB memory per partition DB, sized for a 2-core, 24 GiB machine running 8
# partitions: at most 8 x (64 MiB cache + 2 x 16 MiB memtables) = 768 MiB. faust's
# defaults (2 GiB cache and 3 x 64 MiB memtables per partition) would allow 17 GiB.
ROCKSDB_OPTIONS = {
    "block_cache_size": 64 * MIB,
    "write_buffer_size": 16 * MIB,
    "max_write_buffer_number": 2,
    "target_file_size_base": 32 * MIB,
    "max_open_files": 512,
}


def is_job_key(key: bytes) -> bool:
    return len(key) == 36 and not key.startswith(META_KEY_PREFIX)


def scan_options() -> ReadOptions:
    """Reads that pass over a whole table once do not fill the block cache: a full scan
    would otherwise keep every block of 1,000,000 jobs resident (up to 64 MiB per
    partition, ROCKSDB_OPTIONS) for nothing."""
    options = ReadOptions()
    options.fill_cache(False)  # type: ignore[call-arg]  # the stub leaves out its flag
    options.set_readahead_size(2 * MIB)
    return options


def slims_of(db: Table, partition: int,
             on_undecodable: Callable[[int, bytes, CodecError], None]) -> Iterator[Slim]:
    """The slim projection of each job of a partition's table (``on_undecodable``: told
    of each record that does not project, which is skipped)."""
    for key, raw in db.items(read_opt=scan_options()):
        if not is_job_key(key) or raw is None:
            continue
        try:
            slim = project_state(raw)
        except CodecError as error:
            on_undecodable(partition, key, error)
            continue
        if slim is not None:
            yield slim
