"""The parser's receive buffer: bytes in, lines and data blocks out.

A ``bytearray`` with a read offset. Consumed bytes are dropped only occasionally
(when at least half the array is consumed), and the search for a line end resumes
where the last search stopped, so feeding any amount of data in any chunking costs
time linear in its size.
"""

from __future__ import annotations

_LF = 0x0A
_CR = 0x0D
_COMPACT_MIN_BYTES = 64 * 1024


class ReceiveBuffer:
    """Bytes received and not yet consumed."""

    __slots__ = ("_data", "_start", "_scanned")

    def __init__(self) -> None:
        self._data = bytearray()
        self._start = 0  # first unconsumed byte
        self._scanned = 0  # bytes before this index hold no line end

    def __len__(self) -> int:
        return len(self._data) - self._start

    def extend(self, data: bytes) -> None:
        self._data += data

    def byte_at(self, offset: int) -> int:
        """The unconsumed byte at ``offset`` (``offset < len(self)``)."""
        return self._data[self._start + offset]

    def take_line(self) -> bytes | None:
        """The bytes before the next ``\\n`` (which is consumed too), or None if none yet."""
        end = self._data.find(_LF, max(self._scanned, self._start))
        if end < 0:
            self._scanned = len(self._data)
            return None
        line = bytes(self._data[self._start : end])
        self._consume_to(end + 1)
        return line

    def unterminated_line_length(self) -> int:
        """A lower bound for the length of the line being received, ``\\r\\n`` excluded.

        Call it after ``take_line`` returned None. If the bytes so far end in ``\\r``
        that ``\\r`` may be the start of the terminator; any other byte is content.
        """
        length = len(self)
        if length and self._data[-1] == _CR:
            return length - 1
        return length

    def take(self, size: int) -> bytes:
        """Consume and return the next ``size`` bytes (``size <= len(self)``)."""
        end = self._start + size
        block = bytes(self._data[self._start : end])
        self._consume_to(end)
        return block

    def _consume_to(self, index: int) -> None:
        self._start = index
        if self._start >= _COMPACT_MIN_BYTES and self._start * 2 >= len(self._data):
            del self._data[: self._start]
            self._scanned = max(0, self._scanned - self._start)
            self._start = 0
        elif self._start == len(self._data):
            self._data.clear()
            self._start = self._scanned = 0
