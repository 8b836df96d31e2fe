"""Batch records of `eventq.commands` and command positions (docs/architecture.md, "Batches").

A record of the command log holds one command (a msgpack map, ``codec.encode_command``)
or a batch of commands of one partition: a msgpack array whose elements are the
encoded commands, each a ``bin``. The first byte tells them apart (a map is 0x80-0x8f,
0xde or 0xdf; an array 0x90-0x9f, 0xdc or 0xdd), so every record written before batches
existed still reads as a batch of one. Keeping each command's bytes whole means a batch
is built by concatenation (the gateway never re-encodes) and split without decoding the
commands (Spark explodes it into one row per command).

Positions. All commands of a record share its offset and its LogAppendTime, so a
command's place in the log is (record offset, index in the record). The pure core
compares places as one integer, the **position** ``offset * POSITIONS_PER_OFFSET +
index``: a job's ``version`` and the tombstone watermark are positions, so a command
re-read after a crash in the middle of a batch is recognised exactly
(docs/architecture.md, "Positions and idempotency"). Positions grow with offsets, and
every offset below 2**47 has one that fits Kafka's signed 64 bits.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import msgpack

from eventq.core.codec import POSITIONS_PER_OFFSET, CodecError

__all__ = [
    "POSITIONS_PER_OFFSET", "MAX_BATCH_COMMANDS", "BATCH_RECORD_BYTES", "BatchBuilder",
    "encode_batch", "is_batch", "offset_of", "position", "split_record",
    "NOTHING_ADMITTED", "SliceSource", "admits", "encode_slice", "read_record",
]  # commands a record may hold; positions of one offset
MAX_BATCH_COMMANDS = 500  # what writers put in one record: decoding it is one loop turn
BATCH_RECORD_BYTES = 256 * 1024  # a batch grows to about this; one command may be more

_ARRAY_FIRST_BYTES = frozenset([*range(0x90, 0xA0), 0xDC, 0xDD])


def position(offset: int, index: int = 0) -> int:
    """The position of command ``index`` of the record at ``offset``."""
    return offset * POSITIONS_PER_OFFSET + index


def offset_of(position_: int) -> int:
    """The record offset of a position."""
    return position_ // POSITIONS_PER_OFFSET


def _bin_header(size: int) -> bytes:
    if size < 256:
        return b"\xc4" + size.to_bytes(1, "big")
    if size < 65536:
        return b"\xc5" + size.to_bytes(2, "big")
    return b"\xc6" + size.to_bytes(4, "big")


def _array_header(count: int) -> bytes:
    if count < 16:
        return bytes([0x90 | count])
    if count < 65536:
        return b"\xdc" + count.to_bytes(2, "big")
    return b"\xdd" + count.to_bytes(4, "big")


def encode_batch(commands: Sequence[bytes]) -> bytes:
    """One record holding ``commands`` (each an encoded command record), in order."""
    if not 1 <= len(commands) <= POSITIONS_PER_OFFSET:
        raise CodecError(f"a batch holds 1 to {POSITIONS_PER_OFFSET} commands, not {len(commands)}")
    parts = [_array_header(len(commands))]
    for data in commands:
        parts.append(_bin_header(len(data)))
        parts.append(data)
    return b"".join(parts)


def is_batch(value: bytes | None) -> bool:
    return bool(value) and value[0] in _ARRAY_FIRST_BYTES  # type: ignore[index]  # not None: bool(value)


def split_record(value: bytes | None) -> list[bytes]:
    """The encoded commands of a record, in order (a single command is a list of one).

    Raises ``CodecError`` when a record that is a batch is not a valid one (then none of
    its commands can be trusted); a single command is returned undecoded."""
    return read_record(value)[1]


def read_record(value: bytes | None) -> tuple["SliceSource | None", list[bytes]]:
    """(the bulk range it was admitted from or None, its encoded commands in order).

    Raises ``CodecError`` when a record that is a batch or slice is not a valid one."""
    if not is_batch(value):
        return None, [value]  # type: ignore[list-item]  # None (no value) is passed on as is
    try:
        items = msgpack.unpackb(value, use_list=True, raw=False)
    except Exception as exc:  # msgpack raises several unrelated types
        raise CodecError(f"not a valid batch record: {exc}") from None
    source = None
    if items and type(items[0]) is msgpack.ExtType:
        source = _decode_source(items.pop(0))
    elif not items:
        raise CodecError("a batch record holds no command")
    if len(items) > POSITIONS_PER_OFFSET:
        raise CodecError(f"a batch record holds {len(items)} commands")
    for index, item in enumerate(items):
        if type(item) is not bytes:
            raise CodecError(f"batch element {index} is a {type(item).__name__}, not bin")
    return source, items


# ----------------------------------------------------------------------------- slices
# docs/architecture.md, "Lanes": bulk producers write to `eventq.bulk`; the processor admits
# their commands into `eventq.commands` a slice at a time. A slice record is a batch
# whose first element is an ext (type SLICE_EXT_TYPE) naming the bulk range it holds, so
# the command log alone tells a slice admitted twice (a crash between admitting it and
# recording that) from a new one: every reader of the log skips the second copy alike.
#
# A range is of bulk *positions* (offset, index in the record, as ``position``), half
# open: a slice may end inside a bulk record, so slices stay small whatever size of
# record a pipeline writes (the slice is what a worker's command waits behind).
# A partition's admission is the end of the last slice applied: the next bulk position
# to admit. Its record offset, ``offset_of(end)``, is the first record not wholly
# admitted: the bulk group's committed offset.

SLICE_EXT_TYPE = 1
NOTHING_ADMITTED = 0  # the admission of a bulk partition nothing was admitted from


@dataclass(frozen=True, slots=True)
class SliceSource:
    """The commands of bulk partition ``partition`` at positions ``first`` up to, not
    including, ``end``. A slice that ends with a record's last command ends at the next
    record's first position (``position(offset + 1)``); one of a record holding no
    command covers that record the same way."""

    partition: int
    first: int
    end: int

    def __post_init__(self) -> None:
        for name in ("partition", "first", "end"):
            value = getattr(self, name)
            if type(value) is not int or not 0 <= value < 2**62:
                raise ValueError(f"slice {name} must be an int in 0..2^62, not {value!r}")
        if self.end <= self.first:
            raise ValueError(f"slice ends at {self.end}, not after {self.first}")

    def describe(self) -> str:
        """The range as offsets and indexes, for a log line."""
        (a, i), (b, j) = divmod(self.first, POSITIONS_PER_OFFSET), divmod(
            self.end, POSITIONS_PER_OFFSET)
        return f"{self.partition}@{a}.{i} to {b}.{j}"


def _decode_source(ext: msgpack.ExtType) -> SliceSource:
    if ext.code != SLICE_EXT_TYPE:
        raise CodecError(f"unknown ext type {ext.code} at the head of a batch record")
    try:
        partition, first, end = msgpack.unpackb(ext.data)
        return SliceSource(partition, first, end)
    except Exception as exc:
        raise CodecError(f"not a valid slice header: {exc}") from None


def encode_slice(source: SliceSource, commands: Sequence[bytes]) -> bytes:
    """A slice record: the bulk range ``source`` and its commands (maybe none: a range
    of records that hold no command is still admitted, so it is not read again)."""
    if len(commands) > POSITIONS_PER_OFFSET:
        raise CodecError(f"a slice holds at most {POSITIONS_PER_OFFSET} commands")
    header = msgpack.packb(
        msgpack.ExtType(
            SLICE_EXT_TYPE,
            msgpack.packb([source.partition, source.first, source.end]),
        )
    )
    parts = [_array_header(len(commands) + 1), header]
    for data in commands:
        parts.append(_bin_header(len(data)))
        parts.append(data)
    return b"".join(parts)


def admits(source: SliceSource, admitted: int) -> bool:
    """Whether a slice is applied, given its partition's admission (the next bulk
    position to admit): only a range wholly after what was admitted. A slice admitted
    twice is skipped whole; one that overlaps what an earlier copy admitted is skipped
    too, and its admitter, reading on from the admission, admits the rest again."""
    return source.first >= admitted


class BatchBuilder:
    """Groups encoded commands into records: at most ``MAX_BATCH_COMMANDS`` and about
    ``BATCH_RECORD_BYTES`` each (a command larger than that is a record of its own, so
    no record is larger than the largest command plus a few bytes)."""

    def __init__(
        self, max_commands: int = MAX_BATCH_COMMANDS, max_bytes: int = BATCH_RECORD_BYTES
    ) -> None:
        self.max_commands = max_commands
        self.max_bytes = max_bytes
        self.commands: list[bytes] = []
        self.size = 0

    def fits(self, data: bytes) -> bool:
        return not self.commands or (
            len(self.commands) < self.max_commands and self.size + len(data) <= self.max_bytes
        )

    def add(self, data: bytes) -> None:
        self.commands.append(data)
        self.size += len(data) + 5

    def take(self) -> bytes:
        """The record of what was added (a single command stays a plain record)."""
        commands, self.commands, self.size = self.commands, [], 0
        return commands[0] if len(commands) == 1 else encode_batch(commands)
