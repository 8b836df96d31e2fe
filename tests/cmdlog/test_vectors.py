"""The byte vectors of docs/migrate.md, "Records" and "Commands", exactly."""

from __future__ import annotations

import calendar
import struct
import uuid

import google_crc32c
import pytest

from eventq.cmdlog import (
    GO_ZERO_TIME_NS,
    ZERO_TIME,
    TimeFormatError,
    WqAdd,
    WqComplete,
    WqDelete,
    WqExpire,
    WqFail,
    WqStartAttempt,
    WqTimeoutAttempt,
    decode_instant_ns,
    decode_payload,
    decode_time_ns,
    encode_payload,
    encode_record,
    encode_time_ns,
    encode_time_parts,
    iter_records,
    read_record,
)

ID = uuid.UUID("61a444a0-6128-41c0-8078-cc757d3bd2d8")
ID_HEX = "61a444a0612841c08078cc757d3bd2d8"
RECORD_VECTOR = bytes.fromhex("01 0000000ecff42251 00000000 ffff 01 61 d1221c32")
CREATED_NS = calendar.timegm((2016, 12, 1, 10, 0, 0)) * 10**9
ADD_VECTOR = bytes.fromhex(
    "01 61a444a0612841c08078cc757d3bd2d8 04 70696e67 e807 e0d403 14 03 01 01 61"
    " 01000000000000000000000000ffff 010000000ecfd1eba000000000ffff"
)
ADD_CMD = WqAdd(
    id=ID,
    name="ping",
    ttr_ms=1000,
    ttl_ms=60000,
    priority=10,
    max_attempts=3,
    max_fails=1,
    payload=b"a",
    time_ns=None,
    created_ns=CREATED_NS,
)


def test_record_vector_encodes_exactly():
    assert encode_record(1482828625 * 10**9, b"a") == RECORD_VECTOR


def test_record_vector_decodes():
    rec = read_record(RECORD_VECTOR, 0)
    assert rec.offset == 0
    assert rec.time_ns == 1482828625 * 10**9
    assert rec.payload == b"a"
    assert rec.end == len(RECORD_VECTOR) == 21
    assert list(iter_records(RECORD_VECTOR)) == [(0, 1482828625 * 10**9, b"a")]


def test_record_vector_crc_is_crc32c_over_time_size_payload_big_endian():
    assert google_crc32c.value(RECORD_VECTOR[:-4]).to_bytes(4, "big") == RECORD_VECTOR[-4:]


def test_add_payload_vector_encodes_exactly():
    assert encode_payload(ADD_CMD) == ADD_VECTOR


def test_add_payload_vector_decodes():
    assert decode_payload(ADD_VECTOR) == ADD_CMD


def test_created_time_vector():
    assert encode_time_ns(CREATED_NS) == bytes.fromhex("010000000ecfd1eba000000000ffff")


def test_complete_vector():
    vec = bytes.fromhex("03" + ID_HEX + "0161")
    assert encode_payload(WqComplete(ID, b"a")) == vec
    assert decode_payload(vec) == WqComplete(ID, b"a")


def test_delete_vector():
    vec = bytes.fromhex("05" + ID_HEX)
    assert encode_payload(WqDelete(ID)) == vec
    assert decode_payload(vec) == WqDelete(ID)


@pytest.mark.parametrize(
    "cmd, hexstr",
    [
        (WqFail(ID, b""), "04" + ID_HEX + "00"),
        (WqFail(ID, b"a"), "04" + ID_HEX + "0161"),
        (WqExpire(ID), "06" + ID_HEX),
        (WqStartAttempt(ID), "07" + ID_HEX),
        (WqTimeoutAttempt(ID), "08" + ID_HEX),
    ],
)
def test_other_id_command_bytes(cmd, hexstr):
    assert encode_payload(cmd) == bytes.fromhex(hexstr)
    assert decode_payload(bytes.fromhex(hexstr)) == cmd


def test_zero_time_bytes():
    assert ZERO_TIME == bytes.fromhex("01 00000000 00000000 00000000 ffff")
    assert len(ZERO_TIME) == 15
    assert encode_time_ns(None) == ZERO_TIME
    assert decode_time_ns(ZERO_TIME) is None
    assert decode_instant_ns(ZERO_TIME) == GO_ZERO_TIME_NS
    # The zero time is 0001-01-01T00:00:00Z: encoding that instant gives the same bytes.
    assert encode_time_ns(GO_ZERO_TIME_NS) == ZERO_TIME


def test_zero_time_with_zone_zero_is_also_no_time():
    assert decode_time_ns(bytes.fromhex("01 00000000 00000000 00000000 0000")) is None


def test_utc_written_as_ffff_and_zone_zero_accepted():
    t = encode_time_parts(1482828625, 5)
    assert t == bytes.fromhex("01 0000000ecff42251 00000005 ffff")
    old = t[:13] + b"\x00\x00"
    assert decode_time_ns(old) == decode_time_ns(t) == 1482828625 * 10**9 + 5


def test_other_zone_offset_is_the_same_instant():
    # Go stores absolute seconds; the offset is display only (+60 minutes here).
    t = encode_time_parts(1482828625)[:13] + struct.pack(">h", 60)
    assert decode_time_ns(t) == 1482828625 * 10**9


def test_record_with_zone_zero_time_reads():
    body = bytes.fromhex("01 0000000ecff42251 00000000 0000 01 61")
    rec = body + google_crc32c.value(body).to_bytes(4, "big")
    assert list(iter_records(rec)) == [(0, 1482828625 * 10**9, b"a")]


@pytest.mark.parametrize(
    "raw, match",
    [
        (bytes.fromhex("02 0000000ecff42251 00000000 ffff"), "version"),
        (bytes.fromhex("01 0000000ecff42251 3b9aca00 ffff"), "nanoseconds"),
        (bytes.fromhex("01 0000000ecff42251 00000000 ff"), "truncated"),
    ],
)
def test_bad_times_rejected(raw, match):
    with pytest.raises(TimeFormatError, match=match):
        decode_time_ns(raw)


def test_time_before_unix_epoch_and_nanos():
    ns = -1  # 1969-12-31T23:59:59.999999999Z
    raw = encode_time_ns(ns)
    assert raw == bytes.fromhex("01") + struct.pack(">qIh", 62135596799, 999_999_999, -1)
    assert decode_time_ns(raw) == ns


def test_time_out_of_range_rejected():
    with pytest.raises(TimeFormatError):
        encode_time_parts(2**63, 0)
    with pytest.raises(TimeFormatError):
        encode_time_parts(0, 10**9)
