"""One command-log record, and walking the records of a segment's bytes.

    TIME(15) | SIZE(uvarint) | PAYLOAD(SIZE) | CRC32C(4, big-endian)

The CRC-32C (Castagnoli) covers TIME, SIZE and PAYLOAD exactly as stored.

Reading distinguishes a clean end (the data ends exactly between records) from
corruption, which is raised as ``CorruptRecord`` carrying the file path, the byte
offset of the bad record's first byte, a ``kind`` and a readable ``reason``:

* ``torn-tail``   the data ends inside a record (a crash mid-append);
* ``bad-size``    the SIZE varint is malformed (over 10 bytes / 64 bits) or larger
                  than ``max_payload_bytes``;
* ``bad-time``    the record does not start with the time version byte 1 (so this
                  is not a record boundary: zero-filled tails, garbage), or the time
                  is invalid although the CRC matches;
* ``crc-mismatch`` the stored CRC differs from the computed one;
* ``bad-payload`` / ``bad-header``: raised by the layers above (``segments``).

``resume_offset`` says where reading can safely go on after the bad record: the
next record for a CRC mismatch with a plausible size (or a CRC-valid record whose
contents are bad), ``None`` when the record's extent cannot be trusted (torn tail,
bad size, no version byte) so the rest of that file is unreadable.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import google_crc32c

from .timefmt import TIME_LEN, TIME_VERSION, TimeFormatError, decode_instant_ns, encode_time_ns
from .varint import TruncatedVarint, VarintOverflow, decode_uvarint, encode_uvarint

CRC_LEN = 4
# workq's largest command is an add with a 1 MiB payload (about 1 MiB + 400 bytes);
# a SIZE above this is treated as a corrupt size, not as a torn tail. Writers refuse
# payloads above it so everything eventq writes can be read back.
DEFAULT_MAX_PAYLOAD_BYTES = 16 * 1024 * 1024

TORN_TAIL = "torn-tail"
CRC_MISMATCH = "crc-mismatch"
BAD_SIZE = "bad-size"
BAD_TIME = "bad-time"
BAD_PAYLOAD = "bad-payload"
BAD_HEADER = "bad-header"


class CorruptRecord(Exception):
    """A record (or segment header) that cannot be read.

    ``path``: the file (or a label for in-memory data); ``offset``: byte offset in
    the file where the bad record (or header) starts; ``kind``: one of the constants
    above; ``reason``: human-readable detail; ``resume_offset``: where the next
    record starts if it is known, else ``None``.
    """

    def __init__(
        self,
        path: str,
        offset: int,
        kind: str,
        reason: str,
        resume_offset: int | None = None,
    ) -> None:
        super().__init__(f"{path}: offset {offset}: {kind}: {reason}")
        self.path = path
        self.offset = offset
        self.kind = kind
        self.reason = reason
        self.resume_offset = resume_offset

    def __reduce__(  # keep all fields across pickling (multiprocessing)
        self,
    ) -> tuple[type[CorruptRecord], tuple[str, int, str, str, int | None]]:
        return (
            type(self),
            (self.path, self.offset, self.kind, self.reason, self.resume_offset),
        )

    def __repr__(self) -> str:
        return (
            f"CorruptRecord(path={self.path!r}, offset={self.offset}, "
            f"kind={self.kind!r}, reason={self.reason!r}, "
            f"resume_offset={self.resume_offset!r})"
        )


class Record(NamedTuple):
    """A record read at ``offset``; ``end`` is the offset just after it."""

    offset: int
    time_ns: int
    payload: bytes
    end: int


def encode_record(time_ns: int, payload: bytes) -> bytes:
    """Encode one record: time (Unix ns, written as UTC), payload, CRC-32C."""
    payload = bytes(payload)
    body = encode_time_ns(time_ns) + encode_uvarint(len(payload)) + payload
    crc: int = google_crc32c.value(body)  # untyped: an int
    return body + crc.to_bytes(CRC_LEN, "big")


def read_record(
    data: bytes,
    offset: int,
    *,
    path: str = "<memory>",
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> Record:
    """Read the record starting at ``offset`` (which must be < ``len(data)``).

    Raises ``CorruptRecord`` if it is torn, has a bad size or time, or a CRC mismatch.
    """
    n = len(data)
    if data[offset] != TIME_VERSION:
        raise CorruptRecord(
            path,
            offset,
            BAD_TIME,
            f"record starts with byte 0x{data[offset]:02x}, not the time version "
            f"0x{TIME_VERSION:02x}: not a record boundary",
        )
    size_at = offset + TIME_LEN
    if size_at > n:
        raise CorruptRecord(
            path, offset, TORN_TAIL, f"data ends inside the time ({n - offset} of {TIME_LEN} bytes)"
        )
    try:
        size, payload_at = decode_uvarint(data, size_at)
    except TruncatedVarint:
        raise CorruptRecord(path, offset, TORN_TAIL, "data ends inside the size varint") from None
    except VarintOverflow as e:
        raise CorruptRecord(path, offset, BAD_SIZE, f"size varint invalid: {e}") from None
    if size > max_payload_bytes:
        raise CorruptRecord(
            path, offset, BAD_SIZE, f"size {size} exceeds the maximum {max_payload_bytes}"
        )
    crc_at = payload_at + size
    end = crc_at + CRC_LEN
    if end > n:
        raise CorruptRecord(
            path,
            offset,
            TORN_TAIL,
            f"record of {end - offset} bytes (payload size {size}) but only "
            f"{n - offset} bytes remain",
        )
    stored = int.from_bytes(data[crc_at:end], "big")
    computed = google_crc32c.value(bytes(data[offset:crc_at]))
    if stored != computed:
        raise CorruptRecord(
            path,
            offset,
            CRC_MISMATCH,
            f"stored CRC {stored:08x} != computed {computed:08x}",
            resume_offset=end,
        )
    try:
        time_ns = decode_instant_ns(data, offset)
    except TimeFormatError as e:
        raise CorruptRecord(path, offset, BAD_TIME, str(e), resume_offset=end) from None
    return Record(offset, time_ns, bytes(data[payload_at:crc_at]), end)


def iter_records(
    data: bytes,
    *,
    start: int = 0,
    path: str = "<memory>",
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> Iterator[tuple[int, int, bytes]]:
    """Yield ``(offset, time_ns, payload)`` for each record from ``start`` to the end.

    Offsets are positions in ``data`` (pass the whole file and ``start=8`` to get
    file offsets). Ends cleanly when the data ends exactly between records; raises
    ``CorruptRecord`` at the first bad record.
    """
    pos = start
    n = len(data)
    while pos < n:
        rec = read_record(data, pos, path=path, max_payload_bytes=max_payload_bytes)
        yield rec.offset, rec.time_ns, rec.payload
        pos = rec.end
