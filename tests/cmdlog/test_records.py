from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventq.cmdlog import (
    BAD_SIZE,
    BAD_TIME,
    CRC_MISMATCH,
    TORN_TAIL,
    CorruptRecord,
    encode_record,
    iter_records,
    read_record,
)
from eventq.cmdlog.varint import encode_uvarint
from support.cmdlog_strategies import instants

records = st.lists(st.tuples(instants, st.binary(max_size=200)), max_size=8)


@given(instants, st.binary(max_size=1000))
def test_record_round_trip(time_ns, payload):
    raw = encode_record(time_ns, payload)
    assert len(raw) == 15 + len(encode_uvarint(len(payload))) + len(payload) + 4
    rec = read_record(raw, 0)
    assert (rec.offset, rec.time_ns, rec.payload, rec.end) == (0, time_ns, payload, len(raw))


@given(records, st.binary(max_size=8))
def test_records_stream_round_trip_with_offsets(recs, prefix):
    data = prefix + b"".join(encode_record(t, p) for t, p in recs)
    got = list(iter_records(data, start=len(prefix)))
    assert [(t, p) for _, t, p in got] == recs
    off = len(prefix)
    for (o, _, _), (t, p) in zip(got, recs):
        assert o == off
        off += len(encode_record(t, p))


def test_empty_data_is_a_clean_end():
    assert list(iter_records(b"")) == []


@given(records.filter(bool), st.data())
def test_cut_inside_the_last_record_is_a_torn_tail(recs, data):
    encoded = [encode_record(t, p) for t, p in recs]
    whole = b"".join(encoded)
    last_off = len(whole) - len(encoded[-1])
    cut = data.draw(st.integers(min_value=last_off + 1, max_value=len(whole) - 1))
    it = iter_records(whole[:cut], path="seg")
    for _ in recs[:-1]:
        next(it)
    with pytest.raises(CorruptRecord) as ei:
        next(it)
    e = ei.value
    assert (e.path, e.offset, e.kind, e.resume_offset) == ("seg", last_off, TORN_TAIL, None)


def test_every_cut_point_is_clean_or_torn_at_the_right_record():
    encoded = [encode_record(10**18 + i, b"x" * i) for i in range(4)]
    whole = b"".join(encoded)
    starts = [sum(map(len, encoded[:i])) for i in range(len(encoded) + 1)]
    for cut in range(len(whole) + 1):
        if cut in starts:
            assert len(list(iter_records(whole[:cut]))) == starts.index(cut)
            continue
        torn_at = max(s for s in starts if s < cut)
        with pytest.raises(CorruptRecord) as ei:
            list(iter_records(whole[:cut]))
        assert ei.value.kind == TORN_TAIL and ei.value.offset == torn_at


@given(st.binary(min_size=1, max_size=100), st.data())
def test_any_flipped_bit_in_payload_or_crc_is_a_crc_mismatch(payload, data):
    raw = bytearray(encode_record(10**18, payload))
    # payload and CRC bytes (size varint is 1 byte for <128, 2 for more)
    first = 15 + len(encode_uvarint(len(payload)))
    i = data.draw(st.integers(min_value=first, max_value=len(raw) - 1))
    raw[i] ^= 1 << data.draw(st.integers(min_value=0, max_value=7))
    with pytest.raises(CorruptRecord) as ei:
        read_record(bytes(raw), 0, path="f")
    e = ei.value
    assert (e.path, e.offset, e.kind, e.resume_offset) == ("f", 0, CRC_MISMATCH, len(raw))


@given(st.integers(min_value=1, max_value=14), st.integers(min_value=0, max_value=7))
def test_flipped_bit_in_time_is_a_crc_mismatch(i, bit):
    raw = bytearray(encode_record(10**18, b"abc"))
    raw[i] ^= 1 << bit
    with pytest.raises(CorruptRecord) as ei:
        read_record(bytes(raw), 0)
    assert ei.value.kind == CRC_MISMATCH


def test_any_single_bit_flip_anywhere_is_detected():
    good = encode_record(10**18, b"hello") + encode_record(10**18 + 1, b"world")
    for i in range(len(good)):
        for bit in range(8):
            raw = bytearray(good)
            raw[i] ^= 1 << bit
            with pytest.raises(CorruptRecord):
                list(iter_records(bytes(raw)))


def test_crc_mismatch_in_middle_record_resumes_at_next():
    a, b, c = (encode_record(10**18 + i, bytes([i]) * 10) for i in range(3))
    bad = bytearray(b)
    bad[18] ^= 0x40  # inside the payload
    data = a + bytes(bad) + c
    with pytest.raises(CorruptRecord) as ei:
        list(iter_records(data))
    e = ei.value
    assert (e.offset, e.kind, e.resume_offset) == (len(a), CRC_MISMATCH, len(a) + len(b))
    assert list(iter_records(data, start=e.resume_offset)) == [(len(a) + len(b), 10**18 + 2, b"\x02" * 10)]


def test_not_a_record_boundary():
    data = encode_record(10**18, b"a") + b"\x00" * 40  # zero-filled tail
    with pytest.raises(CorruptRecord) as ei:
        list(iter_records(data))
    e = ei.value
    assert (e.offset, e.kind, e.resume_offset) == (21, BAD_TIME, None)


def test_size_varint_overflow_is_bad_size():
    data = encode_record(10**18, b"")[:15] + b"\xff" * 11 + b"\x00" * 10
    with pytest.raises(CorruptRecord) as ei:
        read_record(data, 0)
    assert (ei.value.kind, ei.value.resume_offset) == (BAD_SIZE, None)


def test_size_over_the_maximum_is_bad_size_not_torn():
    data = encode_record(10**18, b"x" * 100)
    with pytest.raises(CorruptRecord) as ei:
        read_record(data, 0, max_payload_bytes=99)
    assert ei.value.kind == BAD_SIZE
    assert read_record(data, 0, max_payload_bytes=100).payload == b"x" * 100


def test_size_varint_cut_is_torn():
    data = encode_record(10**18, b"x" * 200)[:16]  # size is 2 bytes; keep 1
    with pytest.raises(CorruptRecord) as ei:
        read_record(data, 0)
    assert ei.value.kind == TORN_TAIL


def test_crc_valid_record_with_bad_nanoseconds_is_bad_time_but_resumable():
    import google_crc32c

    body = bytes.fromhex("01 0000000ecff42251 3b9aca00 ffff 01 61")
    raw = body + google_crc32c.value(body).to_bytes(4, "big")
    with pytest.raises(CorruptRecord) as ei:
        read_record(raw, 0)
    assert (ei.value.kind, ei.value.resume_offset) == (BAD_TIME, len(raw))


def test_corrupt_record_message_names_file_and_offset():
    e = CorruptRecord("/x/000000001.log", 29, CRC_MISMATCH, "stored != computed", 50)
    assert str(e) == "/x/000000001.log: offset 29: crc-mismatch: stored != computed"
    assert "resume_offset=50" in repr(e)
    import pickle

    back = pickle.loads(pickle.dumps(e))
    assert (back.path, back.offset, back.kind, back.reason, back.resume_offset) == (
        e.path, e.offset, e.kind, e.reason, e.resume_offset
    )
