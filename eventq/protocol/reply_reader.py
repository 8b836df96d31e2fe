"""Reading replies, sans-IO: where a reply ends, and its blocks as values.

A gateway that forwards a request to another eventq process (docs/architecture.md,
"Scaling out") relays the owner's reply unchanged, so it must know where that reply
ends: replies carry data blocks and ``payload`` lines with raw bytes (which may hold
``\\r\\n``), so the end is found by the reply's shape (docs/protocol.md, "Commands" and
"inspect"), never by looking for a line break. Errors are always one line.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

_CRLF = b"\r\n"


class Shape(enum.Enum):
    STATUS = "status"  # +OK (add, schedule, complete, fail, delete, peer)
    # +OK n, n headers whose last word is a size, each with its data (lease, result, run:
    # n = 1; [eventq] inputs: n finished upstreams, docs/workflows.md, "Inputs")
    DATA = "data"
    # +OK n, n blocks "<head> <k>" of k key lines (inspect ...); a block's keys are read
    # whatever their names ([eventq] after, waiting, waiting-len among them)
    BLOCKS = "blocks"
    LINES = "lines"  # +OK n, n lines (inspect digest)


class MalformedReply(ValueError):
    """The bytes are not a reply of the expected shape (a peer that is not eventq)."""


def _line_end(data: bytes | bytearray, start: int) -> int | None:
    end = data.find(_CRLF, start)
    return None if end < 0 else end


def _count(data: bytes | bytearray, line_end: int) -> int:
    words = data[:line_end].split()
    if not words or words[0] != b"+OK":
        raise MalformedReply(f"expected +OK, got {data[:line_end][:80]!r}")
    try:
        return int(words[1]) if len(words) > 1 else 0
    except ValueError:
        raise MalformedReply(f"bad count in {data[:line_end][:80]!r}") from None


def _block_end(data: bytes | bytearray, start: int) -> int | None:
    """End of one ``<head> <k>`` block: k key lines, ``payload`` sized by the
    ``payload-size`` line before it."""
    end = _line_end(data, start)
    if end is None:
        return None
    try:
        keys = int(data[start:end].rsplit(b" ", 1)[1])
    except (IndexError, ValueError):
        raise MalformedReply(f"bad block header {data[start:end][:80]!r}") from None
    position = end + 2
    payload_size = None
    for _ in range(keys):
        if payload_size is not None and data.startswith(b"payload ", position):
            position += len(b"payload ") + payload_size
            if len(data) < position + 2:
                return None
            position += 2
            payload_size = None
            continue
        end = _line_end(data, position)
        if end is None:
            return None
        if data.startswith(b"payload-size ", position):
            payload_size = int(data[position + len(b"payload-size "):end])
        position = end + 2
    return position


def reply_end(data: bytes | bytearray, shape: Shape) -> int | None:
    """The length of the first complete reply in ``data``, or None if more is needed."""
    first = _line_end(data, 0)
    if first is None:
        return None
    if data[:1] == b"-" or shape is Shape.STATUS:
        return first + 2
    count = _count(data, first)
    position = first + 2
    for _ in range(count):
        if shape is Shape.DATA:
            end = _line_end(data, position)
            if end is None:
                return None
            try:
                size = int(data[position:end].rsplit(b" ", 1)[1])
            except (IndexError, ValueError):
                raise MalformedReply(f"bad header {data[position:end][:80]!r}") from None
            position = end + 2 + size + 2
            if len(data) < position:
                return None
        elif shape is Shape.LINES:
            end = _line_end(data, position)
            if end is None:
                return None
            position = end + 2
        else:
            end = _block_end(data, position)
            if end is None:
                return None
            position = end
    return position


@dataclass(frozen=True)
class Block:
    """One block of an ``inspect`` reply: its head (a queue name, a job id, a
    partition) and its key lines as (key, value) bytes, in order."""

    head: bytes
    lines: tuple[tuple[bytes, bytes], ...]

    def value(self, key: bytes) -> bytes:
        for name, value in self.lines:
            if name == key:
                return value
        raise KeyError(key)

    def without(self, key: bytes) -> "Block":
        return Block(self.head, tuple(line for line in self.lines if line[0] != key))

    def to_bytes(self) -> bytes:
        head = self.head + b" %d\r\n" % len(self.lines)
        return head + b"".join(name + b" " + value + _CRLF for name, value in self.lines)


def parse_blocks(reply: bytes) -> list[Block]:
    """The blocks of a complete ``Shape.BLOCKS`` reply (an error reply raises
    ``MalformedReply``: callers check ``reply[:1] == b"-"`` first)."""
    first = _line_end(reply, 0)
    if first is None:
        raise MalformedReply("incomplete reply")
    count = _count(reply, first)
    position = first + 2
    blocks = []
    for _ in range(count):
        end = _block_end(reply, position)
        if end is None:
            raise MalformedReply("incomplete reply")
        header_end = _line_end(reply, position)
        head = reply[position:header_end].rsplit(b" ", 1)[0]
        lines: list[tuple[bytes, bytes]] = []
        cursor = header_end + 2  # type: ignore[operator]  # not None: _block_end read this line
        while cursor < end:
            if reply.startswith(b"payload ", cursor) and lines and lines[-1][0] == b"payload-size":
                size = int(lines[-1][1])
                start = cursor + len(b"payload ")
                lines.append((b"payload", reply[start:start + size]))
                cursor = start + size + 2
                continue
            line_end = _line_end(reply, cursor)
            name, _, value = reply[cursor:line_end].partition(b" ")
            lines.append((name, value))
            cursor = line_end + 2  # type: ignore[operator]  # not None: cursor < end, a line's end
        blocks.append(Block(head, tuple(lines)))
        position = end
    return blocks


def blocks_reply(blocks: list[Block]) -> bytes:
    return b"+OK %d\r\n" % len(blocks) + b"".join(block.to_bytes() for block in blocks)


def data_reply_entries(reply: bytes) -> list[tuple[list[bytes], bytes]]:
    """Every entry of a complete ``Shape.DATA`` reply of ``+OK <n>``: its header words
    and its data ([eventq] inputs: ``<upstream-id> <1|0> <size>`` and the result)."""
    first = _line_end(reply, 0)
    if first is None:
        raise MalformedReply("incomplete reply")
    entries = []
    position = first + 2
    for _ in range(_count(reply, first)):
        end = _line_end(reply, position)
        if end is None:
            raise MalformedReply("incomplete reply")
        words = reply[position:end].split(b" ")
        if not words[-1].isdigit():
            raise MalformedReply(f"no data size in {reply[position:end][:80]!r}")
        start = end + 2
        position = start + int(words[-1]) + 2
        if len(reply) < position or reply[position - 2:position] != _CRLF:
            raise MalformedReply("incomplete reply")
        entries.append((words, reply[start:position - 2]))
    return entries


def data_reply_fields(reply: bytes) -> tuple[list[bytes], bytes]:
    """The header words and the data of a complete ``Shape.DATA`` reply."""
    first = _line_end(reply, 0)
    end = None if first is None else _line_end(reply, first + 2)
    if first is None or end is None:
        raise MalformedReply("incomplete reply")
    words = reply[first + 2:end].split(b" ")
    if not words[-1].isdigit():
        raise MalformedReply(f"no data size in {reply[first + 2:end][:80]!r}")
    size = int(words[-1])
    return words, reply[end + 2:end + 2 + size]
