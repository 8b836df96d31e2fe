"""The entries: what the indexes know of each live job, one ``bytes`` a job.

docs/architecture.md, "Memory and restores": a job's entry costs no Python object per
field. Its fixed fields are packed by ``ENTRY``; its queue name follows, then, for a
job with tags, ``TAGS_AFTER`` and its tags with ``,`` between them (neither byte is
in a name or a tag). An entry is keyed by the id's 128-bit integer, and unpacked into
an ``Entry`` only when a reader asks.

Invariants: one entry per live job id; ``partitions()`` holds exactly the partitions
of the entries, each with its count of entries.
"""

from __future__ import annotations

import struct
import uuid
from collections import Counter
from collections.abc import Iterable, KeysView
from typing import NamedTuple

from sortedcontainers import SortedList

from eventq.core.job import State
from eventq.core.slim import Slim

from .keys import ID_MASK, clamp, id_of

# state, partition, priority, attempts, version, created, scheduled, expires, lease
# deadline, and which of the last three are present.
ENTRY = struct.Struct("<BHiIQqqqqB")
_PARTITION_FIELD, _CREATED_FIELD = 1, 5  # of ``ENTRY``'s fields
_HAS_SCHEDULED, _HAS_EXPIRES, _HAS_LEASE = 1, 2, 4
TAGS_AFTER, _TAG_SEPARATOR = b"\n", ","
STATES = tuple(State)
_NO_TAGS: tuple[str, ...] = ()


class Entry(NamedTuple):
    """What the indexes know of one live job (unpacked on demand for a reader)."""

    name: str
    state: State
    priority: int
    created_ms: int
    scheduled_ms: int | None
    expires_ms: int | None
    lease_deadline_ms: int | None
    attempts: int
    version: int
    partition: int
    tags: tuple[str, ...] = ()  # docs/workflows.md, "Tags"


def pack_entry(slim: Slim, partition: int) -> bytes:
    scheduled, expires, lease = slim.scheduled_ms, clamp(slim.expires_ms), clamp(
        slim.lease_deadline_ms)
    flags = ((scheduled is not None and _HAS_SCHEDULED) | (expires is not None and _HAS_EXPIRES)
             | (lease is not None and _HAS_LEASE))
    return ENTRY.pack(
        slim.state, partition, slim.priority, slim.attempts, slim.version,
        slim.created_ms, scheduled or 0, expires or 0, lease or 0, flags,
    ) + (slim.name.encode() if not slim.tags else
         (slim.name + "\n" + _TAG_SEPARATOR.join(slim.tags)).encode())


def unpack_entry(packed: bytes) -> Entry:
    (state, partition, priority, attempts, version, created, scheduled, expires, lease,
     flags) = ENTRY.unpack_from(packed)
    text = packed[ENTRY.size:].decode()
    name, tags = text, _NO_TAGS
    if "\n" in text:
        name, joined = text.split("\n", 1)
        tags = tuple(joined.split(_TAG_SEPARATOR))
    return Entry(
        name, STATES[state], priority, created,
        scheduled if flags & _HAS_SCHEDULED else None,
        expires if flags & _HAS_EXPIRES else None,
        lease if flags & _HAS_LEASE else None,
        attempts, version, partition, tags,
    )


class Entries:
    """Live job id (an int) -> packed entry, and the count of entries per partition."""

    __slots__ = ("_packed", "_partition_sizes")

    def __init__(self) -> None:
        self._packed: dict[int, bytes] = {}
        self._partition_sizes: Counter[int] = Counter()

    def __len__(self) -> int:
        return len(self._packed)

    def __contains__(self, id_int: int) -> bool:
        return id_int in self._packed

    def ids(self) -> KeysView[int]:
        return self._packed.keys()

    def get(self, id_int: int) -> Entry | None:
        packed = self._packed.get(id_int)
        return None if packed is None else unpack_entry(packed)

    def packed(self, id_int: int) -> bytes | None:
        """The job's entry as it is held (the memory checks read its size)."""
        return self._packed.get(id_int)

    def put(self, slim: Slim, partition: int) -> None:
        """Enter a job that has no entry (``pop`` its old one first)."""
        self._packed[slim.id] = pack_entry(slim, partition)
        self._partition_sizes[partition] += 1

    def pop(self, id_int: int) -> Entry | None:
        """Forget a job's entry; returns it (None: it had none)."""
        packed = self._packed.pop(id_int, None)
        if packed is None:
            return None
        entry = unpack_entry(packed)
        sizes = self._partition_sizes
        sizes[entry.partition] -= 1
        if not sizes[entry.partition]:
            del sizes[entry.partition]
        return entry

    def partitions(self) -> set[int]:
        """The partitions of which some job is indexed."""
        return set(self._partition_sizes)

    def ids_in(self, partition: int) -> list[int]:
        """The ids of the partition's jobs (a scan of every entry, if it has any)."""
        if partition not in self._partition_sizes:
            return []
        return [id_int for id_int, packed in self._packed.items()
                if ENTRY.unpack_from(packed)[_PARTITION_FIELD] == partition]

    # --- reads by queue name: a bytes compare, no unpacking -----------------------

    def sees(self, id_int: int, prefix: str | None) -> bool:
        """Whether the live job ``id_int``'s queue is inside ``prefix`` (None: any)."""
        packed = self._packed.get(id_int)
        return packed is not None and (prefix is None
                                       or packed.startswith(prefix.encode(), ENTRY.size))

    def page(self, keys: SortedList, offset: int, limit: int,
             prefix: str | None) -> list[tuple[int, uuid.UUID]]:
        """The page ``[offset:offset + limit]`` of sorted ``keys`` (ids in their low
        bits) as (key, id), or with ``prefix`` the same page of the keys of jobs whose
        queue name starts with it (docs/security.md, "Queue-name prefixes": a token's
        listings see only its queues). That one is a scan from the first key (each a dict
        lookup and a bytes compare, ~0.2 s per million keys passed over): no index is
        kept per prefix, which tokens may change."""
        if prefix is None:
            return [(key, id_of(key)) for key in keys.islice(offset, offset + limit)]
        wanted, size = prefix.encode(), ENTRY.size
        entries, skipped = self._packed, 0
        found: list[tuple[int, uuid.UUID]] = []
        for key in keys:
            packed = entries.get(key & ID_MASK)
            if packed is None or not packed.startswith(wanted, size):
                continue
            if skipped < offset:
                skipped += 1
                continue
            found.append((key, id_of(key)))
            if len(found) >= limit:
                break
        return found

    def count_inside(self, keys: Iterable[int], prefix: str) -> int:
        """How many of ``keys`` (each a live job's) are of queues inside ``prefix``."""
        wanted, size, entries = prefix.encode(), ENTRY.size, self._packed
        return sum(1 for key in keys if entries[key & ID_MASK].startswith(wanted, size))

    def in_state(self, name: str, state: State) -> list[int]:
        """The ids of a queue's jobs in ``state``, oldest first (created time, then
        id). A scan of every entry (~0.1 s per million jobs): leased and final jobs
        have no per-queue order kept, and only a person paging asks."""
        tail, code = name.encode(), int(state)
        size, tagged = ENTRY.size, tail + TAGS_AFTER  # a tagged job's name ends at \n
        found = [
            (ENTRY.unpack_from(packed)[_CREATED_FIELD], id_int)
            for id_int, packed in self._packed.items()
            if packed[0] == code and (packed[size:] == tail
                                      or packed[size:size + len(tagged)] == tagged)
        ]
        found.sort()
        return [id_int for _, id_int in found]
