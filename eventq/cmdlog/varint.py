"""Varints as workq writes them (Go's ``encoding/binary``).

* unsigned: LEB128, 7 bits a byte, least significant group first, high bit set on
  every byte but the last ("uvarint");
* signed: zig-zag, ``(n << 1) ^ (n >> 63)`` on a 64-bit ``n``, then LEB128.

Decoding follows Go's ``binary.Uvarint`` exactly: at most 10 bytes, and the 10th
byte may only be 0 or 1 (anything else does not fit in 64 bits). Non-minimal
encodings (``80 00`` for 0) are accepted, as Go accepts them.

Decoders take ``(data, offset)`` and return ``(value, new_offset)``.
"""

from __future__ import annotations

MAX_VARINT_LEN = 10  # bytes of a 64-bit varint
UINT64_MAX = 2**64 - 1
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


class VarintError(ValueError):
    """A varint could not be decoded (or a value cannot be encoded as one)."""


class TruncatedVarint(VarintError):
    """The data ended before the varint's last byte (high bit clear)."""


class VarintOverflow(VarintError):
    """The varint is longer than 10 bytes or does not fit in 64 bits."""


def encode_uvarint(n: int) -> bytes:
    """Encode ``0 <= n < 2**64`` as unsigned LEB128."""
    if n < 0 or n > UINT64_MAX:
        raise VarintError(f"uvarint out of range 0..2**64-1: {n}")
    if n < 0x80:
        return bytes((n,))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def decode_uvarint(data: bytes, offset: int = 0) -> tuple[int, int]:
    """Decode an unsigned LEB128 at ``offset``; return ``(value, new_offset)``.

    Raises ``TruncatedVarint`` if ``data`` ends inside the varint and
    ``VarintOverflow`` if it is longer than 10 bytes or exceeds 64 bits.
    """
    end = len(data)
    if offset < end:
        b = data[offset]
        if b < 0x80:  # fast path: one byte
            return b, offset + 1
    result = 0
    shift = 0
    pos = offset
    for i in range(MAX_VARINT_LEN):
        if pos >= end:
            raise TruncatedVarint(
                f"varint at offset {offset} truncated after {pos - offset} byte(s)"
            )
        b = data[pos]
        pos += 1
        if b < 0x80:
            if i == MAX_VARINT_LEN - 1 and b > 1:
                raise VarintOverflow(f"varint at offset {offset} overflows 64 bits")
            return result | (b << shift), pos
        result |= (b & 0x7F) << shift
        shift += 7
    raise VarintOverflow(
        f"varint at offset {offset} is longer than {MAX_VARINT_LEN} bytes"
    )


def zigzag_encode(n: int) -> int:
    """Map a signed 64-bit integer to unsigned: 0,-1,1,-2,... -> 0,1,2,3,..."""
    if n < INT64_MIN or n > INT64_MAX:
        raise VarintError(f"signed varint out of 64-bit range: {n}")
    return ((n << 1) ^ (n >> 63)) & UINT64_MAX


def zigzag_decode(u: int) -> int:
    """Inverse of ``zigzag_encode`` for ``0 <= u < 2**64``."""
    if u < 0 or u > UINT64_MAX:
        raise VarintError(f"zig-zag value out of range 0..2**64-1: {u}")
    return (u >> 1) ^ -(u & 1)


def encode_varint(n: int) -> bytes:
    """Encode a signed 64-bit integer: zig-zag, then LEB128 (Go ``PutVarint``)."""
    return encode_uvarint(zigzag_encode(n))


def decode_varint(data: bytes, offset: int = 0) -> tuple[int, int]:
    """Decode a zig-zag signed varint; return ``(value, new_offset)``."""
    u, pos = decode_uvarint(data, offset)
    return zigzag_decode(u), pos
