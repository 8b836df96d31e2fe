"""A command-log directory: segment files, their header, reading and writing.

Segment files are named with exactly 9 decimal digits and ``.log``
(``000000001.log``) and are read in ascending numeric order; gaps are normal (the
cleaner deletes files). Everything else (``000000001.log.rw`` - an unfinished
cleaner rewrite -, ``read.lock``, subdirectories) is ignored. Each segment starts
with the 8-byte header ``77 71 77 71 00 00 00 01`` ("wqwq", version 1).

Reading applies a policy to corruption (see ``records`` for the kinds):

* ``on_corrupt="stop"``: raise the ``CorruptRecord`` (file path and byte offset);
* ``on_corrupt="skip"``: pass it to the ``report`` callback and go on: at the next
  record when the bad record's extent is known (CRC mismatch with a plausible size,
  CRC-valid record with an invalid time or payload), otherwise (torn tail, bad size,
  no record boundary, bad header) with the next file.
"""

from __future__ import annotations

import io
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator

from .commands import Command, PayloadError, decode_payload, encode_payload
from .records import (
    BAD_HEADER,
    BAD_PAYLOAD,
    DEFAULT_MAX_PAYLOAD_BYTES,
    CorruptRecord,
    encode_record,
    read_record,
)

HEADER = bytes.fromhex("7771777100000001")
HEADER_LEN = len(HEADER)
DEFAULT_MAX_SEGMENT_BYTES = 64 * 1024 * 1024  # workq's default (64 MiB)
MAX_SEQUENCE = 999_999_999

_SEGMENT_NAME = re.compile(r"[0-9]{9}\.log")

STOP = "stop"
SKIP = "skip"

Report = Callable[[CorruptRecord], None]


def segment_name(seq: int) -> str:
    """``1`` -> ``"000000001.log"``."""
    if not 0 <= seq <= MAX_SEQUENCE:
        raise ValueError(f"segment sequence out of range 0..{MAX_SEQUENCE}: {seq}")
    return f"{seq:09d}.log"


def list_segments(dirpath: str | os.PathLike[str]) -> list[tuple[int, str]]:
    """``(sequence, path)`` of the directory's segment files, ascending by sequence."""
    dirpath = os.fspath(dirpath)
    found = []
    with os.scandir(dirpath) as it:
        for entry in it:
            if _SEGMENT_NAME.fullmatch(entry.name) and entry.is_file():
                found.append((int(entry.name[:9]), os.path.join(dirpath, entry.name)))
    found.sort()
    return found


def check_header(data: bytes, path: str = "<memory>") -> None:
    """Raise ``CorruptRecord`` (kind ``bad-header``, offset 0) unless ``data`` starts
    with the segment header."""
    if len(data) < HEADER_LEN:
        raise CorruptRecord(
            path, 0, BAD_HEADER, f"file has {len(data)} bytes, shorter than the 8-byte header"
        )
    if data[:HEADER_LEN] != HEADER:
        raise CorruptRecord(
            path,
            0,
            BAD_HEADER,
            f"header is {bytes(data[:HEADER_LEN]).hex()}, expected {HEADER.hex()}",
        )


def _check_policy(on_corrupt: str, report: Report | None) -> None:
    if on_corrupt not in (STOP, SKIP):
        raise ValueError(f"on_corrupt must be 'stop' or 'skip', not {on_corrupt!r}")
    if on_corrupt == SKIP and report is None:
        raise ValueError("on_corrupt='skip' needs a report callback")


def iter_segment_records(
    path: str | os.PathLike[str],
    *,
    on_corrupt: str = STOP,
    report: Report | None = None,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> Iterator[tuple[int, int, bytes]]:
    """Yield ``(offset, time_ns, payload)`` for every record of one segment file."""
    for _path, offset, time_ns, payload in _iter_file(
        os.fspath(path), on_corrupt, report, max_payload_bytes, decode=False
    ):
        yield offset, time_ns, payload  # type: ignore[misc]  # decode=False: bytes


def iter_commands(
    dirpath: str | os.PathLike[str],
    *,
    on_corrupt: str = STOP,
    report: Report | None = None,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
) -> Iterator[tuple[str, int, int, Command]]:
    """Yield ``(path, offset, time_ns, command)`` for every record of a directory.

    Files in sequence order, records in file order; ``offset`` is the record's byte
    offset in its file. A CRC-valid record whose payload is not a command is
    corruption of kind ``bad-payload`` (the next record is still readable).
    """
    _check_policy(on_corrupt, report)
    for _seq, path in list_segments(dirpath):
        yield from _iter_file(path, on_corrupt, report, max_payload_bytes, decode=True)  # type: ignore[misc]  # decode=True: commands


def _iter_file(
    path: str,
    on_corrupt: str,
    report: Report | None,
    max_payload_bytes: int,
    *,
    decode: bool,
) -> Iterator[tuple[str, int, int, Command | bytes]]:
    _check_policy(on_corrupt, report)

    def handle(err: CorruptRecord) -> None:
        if on_corrupt == STOP:
            raise err
        report(err)  # type: ignore[misc]  # set: _check_policy requires it unless STOP

    with open(path, "rb") as f:
        data = f.read()
    try:
        check_header(data, path)
    except CorruptRecord as err:
        handle(err)
        return
    pos = HEADER_LEN
    n = len(data)
    while pos < n:
        try:
            rec = read_record(data, pos, path=path, max_payload_bytes=max_payload_bytes)
        except CorruptRecord as err:
            handle(err)
            if err.resume_offset is None:
                return
            pos = err.resume_offset
            continue
        pos = rec.end
        if not decode:
            yield path, rec.offset, rec.time_ns, rec.payload
            continue
        try:
            cmd = decode_payload(rec.payload)
        except PayloadError as e:
            handle(CorruptRecord(path, rec.offset, BAD_PAYLOAD, str(e), resume_offset=rec.end))
            continue
        yield path, rec.offset, rec.time_ns, cmd


def _fsync_dir(dirpath: str) -> None:
    try:
        fd = os.open(dirpath, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


class SegmentWriter:
    """Writes records into a directory as segment files.

    Starts a new file after the highest existing sequence (1 in an empty directory)
    and never opens an existing file. Before a record that would take the current
    file past ``max_segment_bytes`` it rolls to the next sequence number, so files
    stay within the limit unless one record alone is larger (workq itself treats the
    size as a minimum and overshoots by one record; both are readable by workq).
    Rolled files are fsynced when they are closed, the last one on ``close()``, and
    the directory after each file is created.
    """

    def __init__(
        self,
        dirpath: str | os.PathLike[str],
        max_segment_bytes: int = DEFAULT_MAX_SEGMENT_BYTES,
        *,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    ) -> None:
        if max_segment_bytes <= HEADER_LEN:
            raise ValueError(f"max_segment_bytes must exceed the header: {max_segment_bytes}")
        self.dirpath = os.fspath(dirpath)
        self.max_segment_bytes = max_segment_bytes
        self.max_payload_bytes = max_payload_bytes
        os.makedirs(self.dirpath, exist_ok=True)
        existing = list_segments(self.dirpath)
        self._next_seq = existing[-1][0] + 1 if existing else 1
        self._file: io.BufferedWriter | None = None
        self._size = 0
        self.paths: list[str] = []  # files written, in order
        self.records_written = 0
        self._closed = False

    @property
    def current_path(self) -> str | None:
        return self.paths[-1] if self._file is not None else None

    def _open_next(self) -> io.BufferedWriter:
        self._close_current()
        path = os.path.join(self.dirpath, segment_name(self._next_seq))
        self._file = file = open(path, "xb")  # never clobber a file
        self._next_seq += 1
        file.write(HEADER)
        self._size = HEADER_LEN
        self.paths.append(path)
        _fsync_dir(self.dirpath)
        return file

    def _close_current(self) -> None:
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            self._file = None

    def append(self, payload: bytes, time_ns: int | None = None) -> tuple[str, int]:
        """Append one record (``time_ns`` defaults to now); return ``(path, offset)``."""
        if self._closed:
            raise ValueError("SegmentWriter is closed")
        if len(payload) > self.max_payload_bytes:
            raise ValueError(
                f"payload of {len(payload)} bytes exceeds the maximum {self.max_payload_bytes}"
            )
        rec = encode_record(time.time_ns() if time_ns is None else time_ns, payload)
        file = self._file
        if file is None or (
            self._size > HEADER_LEN and self._size + len(rec) > self.max_segment_bytes
        ):
            file = self._open_next()
        offset = self._size
        file.write(rec)
        self._size += len(rec)
        self.records_written += 1
        return self.paths[-1], offset

    def append_command(self, cmd: Command, time_ns: int | None = None) -> tuple[str, int]:
        """Append a command as one record; return ``(path, offset)``."""
        return self.append(encode_payload(cmd), time_ns)

    def extend(self, cmds: Iterable[Command], time_ns: int | None = None) -> None:
        for cmd in cmds:
            self.append_command(cmd, time_ns)

    def sync(self) -> None:
        """Flush and fsync the current file."""
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        """Flush, fsync and close; idempotent."""
        if self._closed:
            return
        self._closed = True
        self._close_current()

    def __enter__(self) -> SegmentWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
