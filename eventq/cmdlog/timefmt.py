"""The 15-byte time format of workq's command log (Go ``time.Time.MarshalBinary``, v1).

    byte 0       version, always 1
    bytes 1-8    signed big-endian seconds since 0001-01-01T00:00:00Z
                 (= Unix seconds + 62,135,596,800)
    bytes 9-12   big-endian nanoseconds within the second (0..999,999,999)
    bytes 13-14  zone offset in minutes, signed big-endian; -1 (FF FF) means UTC

Times are handled here as integer Unix nanoseconds. Go's zero time
(0001-01-01T00:00:00Z, bytes ``01 00..00 ffff``) means "no time" for a job's
``time`` field: ``decode_time_ns`` returns ``None`` for it and ``encode_time_ns``
writes it for ``None``. ``decode_instant_ns`` returns the instant even for the zero
time (``GO_ZERO_TIME_NS``), for fields that always hold a time.

The zone offset only says how Go would display the time; the seconds are an absolute
instant either way. Writing always uses FF FF (UTC). Reading accepts FF FF, 0 (what
older writers and the seed document use) and, like Go, any other offset.
"""

from __future__ import annotations

import struct

TIME_LEN = 15
TIME_VERSION = 1
UNIX_EPOCH_GO_SECONDS = 62_135_596_800  # seconds from 0001-01-01 to 1970-01-01
NS_PER_SECOND = 1_000_000_000
GO_ZERO_TIME_NS = -UNIX_EPOCH_GO_SECONDS * NS_PER_SECOND  # 0001-01-01T00:00:00Z
ZONE_UTC = -1  # written as FF FF
ZERO_TIME = bytes.fromhex("01" "0000000000000000" "00000000" "ffff")

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_TIME = struct.Struct(">BqIh")  # version, seconds, nanoseconds, zone minutes


class TimeFormatError(ValueError):
    """The 15 bytes are not a valid version-1 time, or a time cannot be encoded."""


def encode_time_parts(unix_seconds: int, nanos: int = 0) -> bytes:
    """Encode Unix ``seconds`` plus ``nanos`` (0..999,999,999) as 15 bytes, UTC."""
    if not 0 <= nanos < NS_PER_SECOND:
        raise TimeFormatError(f"nanoseconds out of range 0..999999999: {nanos}")
    go_seconds = unix_seconds + UNIX_EPOCH_GO_SECONDS
    if not _INT64_MIN <= go_seconds <= _INT64_MAX:
        raise TimeFormatError(f"time out of range: {unix_seconds} Unix seconds")
    return _TIME.pack(TIME_VERSION, go_seconds, nanos, ZONE_UTC)


def encode_time_ns(unix_ns: int | None) -> bytes:
    """Encode Unix nanoseconds as 15 bytes (UTC); ``None`` gives the zero time."""
    if unix_ns is None:
        return ZERO_TIME
    seconds, nanos = divmod(unix_ns, NS_PER_SECOND)
    return encode_time_parts(seconds, nanos)


def decode_instant_ns(data: bytes, offset: int = 0) -> int:
    """Decode the 15 bytes at ``offset`` to Unix nanoseconds.

    The zero time decodes to ``GO_ZERO_TIME_NS`` (use ``decode_time_ns`` to get
    ``None`` instead). Raises ``TimeFormatError`` on a short buffer, a version byte
    other than 1, or nanoseconds >= 10**9.
    """
    if len(data) - offset < TIME_LEN:
        raise TimeFormatError(
            f"time at offset {offset} truncated: {max(len(data) - offset, 0)} of "
            f"{TIME_LEN} bytes"
        )
    fields: tuple[int, int, int, int] = _TIME.unpack_from(data, offset)  # struct's: Any
    version, go_seconds, nanos, _zone = fields
    if version != TIME_VERSION:
        raise TimeFormatError(
            f"time at offset {offset} has version {version}, expected {TIME_VERSION}"
        )
    if nanos >= NS_PER_SECOND:
        raise TimeFormatError(f"time at offset {offset} has {nanos} nanoseconds")
    return (go_seconds - UNIX_EPOCH_GO_SECONDS) * NS_PER_SECOND + nanos


def decode_time_ns(data: bytes, offset: int = 0) -> int | None:
    """Decode the 15 bytes at ``offset`` to Unix nanoseconds; zero time -> ``None``."""
    ns = decode_instant_ns(data, offset)
    return None if ns == GO_ZERO_TIME_NS else ns


def time_zone_minutes(data: bytes, offset: int = 0) -> int:
    """The stored zone offset in minutes (-1 = UTC); for diagnostics only."""
    if len(data) - offset < TIME_LEN:
        raise TimeFormatError(f"time at offset {offset} truncated")
    zone: int = _TIME.unpack_from(data, offset)[3]  # struct's: Any
    return zone
