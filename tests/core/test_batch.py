"""Batch records of the command log and positions (eventq/core/batch.py)."""

from __future__ import annotations

import uuid

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventq.core import Add, CodecError, Complete, Delete, decode_command, encode_command
from eventq.core.batch import (
    NOTHING_ADMITTED,
    POSITIONS_PER_OFFSET,
    BatchBuilder,
    SliceSource,
    admits,
    encode_batch,
    encode_slice,
    is_batch,
    offset_of,
    position,
    read_record,
    split_record,
)
from support.core_strategies import commands


def test_a_single_command_record_is_a_batch_of_one():
    data = encode_command(Add(uuid.uuid4(), "q", 1000, 60000, b"x"))
    assert not is_batch(data)
    assert split_record(data) == [data]


@given(st.lists(commands(), min_size=1, max_size=40))
def test_a_batch_splits_into_its_commands_in_order(cmds):
    encoded = [encode_command(c, node="n", request_id=i) for i, c in enumerate(cmds)]
    record = encode_batch(encoded)
    assert is_batch(record)
    assert split_record(record) == encoded
    # It is plain msgpack: any reader can take it apart without eventq.
    assert msgpack.unpackb(record) == encoded
    assert [decode_command(d).command for d in split_record(record)] == cmds


@pytest.mark.parametrize("count", [1, 15, 16, 65535, 65536])
def test_array_headers_of_every_size(count):
    assert len(split_record(encode_batch([b"\x80"] * count))) == count


@pytest.mark.parametrize("size", [0, 255, 256, 65535, 65536, 1 << 20])
def test_bin_headers_of_every_size(size):
    assert split_record(encode_batch([b"a" * size, b"b"])) == [b"a" * size, b"b"]


@pytest.mark.parametrize(
    "record",
    [
        b"\x92\xc4\x01",  # truncated
        msgpack.packb([1, 2]),  # elements are not bin
        msgpack.packb([]),  # empty
        msgpack.packb([b"a"]) + b"\x00",  # trailing bytes
    ],
)
def test_a_broken_batch_record_raises_codec_error(record):
    with pytest.raises(CodecError):
        split_record(record)


def test_encode_batch_refuses_empty_and_oversized():
    with pytest.raises(CodecError):
        encode_batch([])
    with pytest.raises(CodecError):
        encode_batch([b"\x80"] * (POSITIONS_PER_OFFSET + 1))


def test_positions_order_like_offset_then_index():
    assert position(7, 0) < position(7, 1) < position(7, POSITIONS_PER_OFFSET - 1) < position(8)
    assert offset_of(position(7, 123)) == 7
    assert position(2**47 - 1, POSITIONS_PER_OFFSET - 1) < 2**63  # fits Kafka's int64


def test_builder_bounds_count_and_bytes():
    builder = BatchBuilder(max_commands=3, max_bytes=200)
    small = encode_command(Complete(uuid.uuid4(), b""))
    for _ in range(3):
        assert builder.fits(small)
        builder.add(small)
    assert not builder.fits(small)  # count
    assert split_record(builder.take()) == [small] * 3
    big = b"\x80" * 500
    assert builder.fits(big)  # alone, a command of any size is a record
    builder.add(big)
    assert not builder.fits(small)  # bytes
    assert builder.take() == big  # one command: a plain record, not a batch


# ------------------------------------------------------------------------- slices


@given(
    st.integers(0, 1023), st.integers(0, 2**40), st.integers(1, 10**6),
    st.lists(st.binary(min_size=1, max_size=300), max_size=40),
)
def test_a_slice_round_trips_and_every_reader_sees_its_commands(partition, first, length, commands):
    source = SliceSource(partition, first, first + length)
    record = encode_slice(source, commands)
    assert is_batch(record)
    assert read_record(record) == (source, commands)
    assert split_record(record) == commands


def test_plain_records_come_from_no_slice():
    single = encode_command(Delete(uuid.uuid4()))
    assert read_record(single) == (None, [single])
    assert read_record(encode_batch([single, single])) == (None, [single, single])


def test_a_slice_is_admitted_only_after_what_was_admitted():
    assert admits(SliceSource(0, 0, position(3)), NOTHING_ADMITTED)
    assert admits(SliceSource(0, position(3), position(3, 200)), position(3))
    assert admits(SliceSource(0, position(3, 200), position(4)), position(3, 200))
    assert not admits(SliceSource(0, position(3), position(3, 200)), position(3, 200))  # again
    assert not admits(SliceSource(0, position(3, 100), position(4)), position(3, 200))  # overlap


def test_a_slice_describes_itself_in_offsets_and_indexes():
    assert SliceSource(2, position(7, 5), position(9)).describe() == "2@7.5 to 9.0"


@pytest.mark.parametrize("bad", [
    msgpack.packb([msgpack.ExtType(2, msgpack.packb([0, 1, 2]))]),  # unknown ext
    msgpack.packb([msgpack.ExtType(1, b"\xc1")]),  # header does not decode
    msgpack.packb([msgpack.ExtType(1, msgpack.packb([0, 5, 4]))]),  # ends before start
    msgpack.packb([msgpack.ExtType(1, msgpack.packb([0, 5, 5]))]),  # covers nothing
    msgpack.packb([msgpack.ExtType(1, msgpack.packb([0, 1, 2])), 7]),  # not a bin
    msgpack.packb([]),
])
def test_a_broken_slice_is_a_codec_error(bad):
    with pytest.raises(CodecError):
        read_record(bad)


@pytest.mark.parametrize("fields", [(-1, 0, 1), (0, 2, 1), (0, 1, 1), (True, 0, 1), (0, 0, 2**62)])
def test_a_slice_source_validates(fields):
    with pytest.raises(ValueError):
        SliceSource(*fields)
