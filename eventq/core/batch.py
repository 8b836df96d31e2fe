"""Batch records of `eventq.commands` and command positions (ARCHITECTURE.md, "Batches").

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
re-read after a crash in the middle of a batch is recognised exactly (issue 9). Positions
grow with offsets, and every offset below 2**47 has one that fits Kafka's signed 64 bits.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgpack

from eventq.core.codec import POSITIONS_PER_OFFSET, CodecError

__all__ = [
    "POSITIONS_PER_OFFSET", "MAX_BATCH_COMMANDS", "BATCH_RECORD_BYTES", "BatchBuilder",
    "encode_batch", "is_batch", "offset_of", "position", "split_record",
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
    return bool(value) and value[0] in _ARRAY_FIRST_BYTES  # type: ignore[index]


def split_record(value: bytes | None) -> list[bytes]:
    """The encoded commands of a record, in order (a single command is a list of one).

    Raises ``CodecError`` when a record that is a batch is not a valid one (then none of
    its commands can be trusted); a single command is returned undecoded."""
    if not is_batch(value):
        return [value]  # type: ignore[list-item]
    try:
        items = msgpack.unpackb(value, use_list=True, raw=False)
    except Exception as exc:  # msgpack raises several unrelated types
        raise CodecError(f"not a valid batch record: {exc}") from None
    if not 1 <= len(items) <= POSITIONS_PER_OFFSET:
        raise CodecError(f"a batch record holds {len(items)} commands")
    for index, item in enumerate(items):
        if type(item) is not bytes:
            raise CodecError(f"batch element {index} is a {type(item).__name__}, not bin")
    return items


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
