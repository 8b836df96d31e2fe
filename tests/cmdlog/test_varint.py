from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventq.cmdlog import (
    TruncatedVarint,
    VarintError,
    VarintOverflow,
    decode_uvarint,
    decode_varint,
    encode_uvarint,
    encode_varint,
    zigzag_decode,
    zigzag_encode,
)
from support.cmdlog_strategies import INT64, UINT64


@given(UINT64)
def test_uvarint_round_trip(n):
    b = encode_uvarint(n)
    assert 1 <= len(b) <= 10
    assert all(x & 0x80 for x in b[:-1]) and not b[-1] & 0x80
    assert decode_uvarint(b) == (n, len(b))


@given(INT64)
def test_varint_round_trip(n):
    b = encode_varint(n)
    assert decode_varint(b) == (n, len(b))
    assert zigzag_decode(zigzag_encode(n)) == n


@given(INT64)
def test_zigzag_matches_go_formula(n):
    assert zigzag_encode(n) == ((n << 1) ^ (n >> 63)) % 2**64


@given(st.lists(UINT64, max_size=20), st.binary(max_size=5))
def test_uvarint_stream_with_prefix(values, prefix):
    data = prefix + b"".join(encode_uvarint(v) for v in values)
    pos = len(prefix)
    out = []
    for _ in values:
        v, pos = decode_uvarint(data, pos)
        out.append(v)
    assert out == values and pos == len(data)


@pytest.mark.parametrize(
    "n, hexstr",
    [
        (0, "00"),
        (1, "01"),
        (127, "7f"),
        (128, "8001"),
        (300, "ac02"),
        (1000, "e807"),
        (60000, "e0d403"),
        (2**64 - 1, "ffffffffffffffffff01"),
    ],
)
def test_uvarint_known_bytes(n, hexstr):
    assert encode_uvarint(n).hex() == hexstr
    assert decode_uvarint(bytes.fromhex(hexstr)) == (n, len(hexstr) // 2)


@pytest.mark.parametrize(
    "n, u",
    [(0, 0), (-1, 1), (1, 2), (-2, 3), (10, 20), (2**63 - 1, 2**64 - 2), (-(2**63), 2**64 - 1)],
)
def test_zigzag_known_values(n, u):
    assert zigzag_encode(n) == u
    assert zigzag_decode(u) == n


def test_non_minimal_encoding_accepted_like_go():
    assert decode_uvarint(b"\x80\x00") == (0, 2)


@pytest.mark.parametrize("data", [b"", b"\x80", b"\xff\xff", b"\xff" * 9])
def test_truncated(data):
    with pytest.raises(TruncatedVarint, match="truncated"):
        decode_uvarint(data)


def test_truncated_at_offset():
    with pytest.raises(TruncatedVarint):
        decode_uvarint(b"\x05\x80", 1)
    with pytest.raises(TruncatedVarint):
        decode_uvarint(b"\x05", 1)


@pytest.mark.parametrize(
    "data",
    [
        b"\xff" * 9 + b"\x02",  # 10th byte > 1: over 64 bits
        b"\x80" * 9 + b"\x7f",
        b"\xff" * 10 + b"\x01",  # 11 bytes
        b"\x80" * 10 + b"\x00",
    ],
)
def test_overflow(data):
    with pytest.raises(VarintOverflow):
        decode_uvarint(data)


def test_overflow_and_truncation_are_value_errors():
    assert issubclass(TruncatedVarint, VarintError)
    assert issubclass(VarintOverflow, VarintError)
    assert issubclass(VarintError, ValueError)


@pytest.mark.parametrize("n", [-1, 2**64])
def test_uvarint_encode_out_of_range(n):
    with pytest.raises(VarintError):
        encode_uvarint(n)


@pytest.mark.parametrize("n", [2**63, -(2**63) - 1])
def test_varint_encode_out_of_range(n):
    with pytest.raises(VarintError):
        encode_varint(n)
