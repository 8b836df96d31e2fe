from __future__ import annotations

import dataclasses
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventq.cmdlog import (
    COMMAND_NAMES,
    PayloadError,
    WqAdd,
    WqComplete,
    WqSchedule,
    decode_payload,
    encode_payload,
)
from support.cmdlog_strategies import add, commands, schedule

ID = uuid.UUID("61a444a0-6128-41c0-8078-cc757d3bd2d8")


@given(commands)
def test_payload_round_trip(cmd):
    data = encode_payload(cmd)
    assert data[0] == cmd.TYPE
    back = decode_payload(data)
    assert back == cmd
    assert type(back) is type(cmd)


@given(commands, st.binary(min_size=1, max_size=4))
def test_bytes_left_over_are_corrupt(cmd, extra):
    with pytest.raises(PayloadError, match="left over"):
        decode_payload(encode_payload(cmd) + extra)


@given(commands, st.data())
def test_every_truncation_is_corrupt(cmd, data):
    raw = encode_payload(cmd)
    cut = data.draw(st.integers(min_value=0, max_value=len(raw) - 1))
    with pytest.raises(PayloadError):
        decode_payload(raw[:cut])


def test_all_truncations_of_an_add():
    raw = encode_payload(add(ID, payload=b"xyz", priority=-5))
    for cut in range(len(raw)):
        with pytest.raises(PayloadError):
            decode_payload(raw[:cut])


@pytest.mark.parametrize("t", [0, 9, 255])
def test_unknown_type_is_corrupt(t):
    with pytest.raises(PayloadError, match=f"unknown command type {t}"):
        decode_payload(bytes([t]) + ID.bytes)


def test_empty_payload_is_corrupt():
    with pytest.raises(PayloadError, match="empty"):
        decode_payload(b"")


def test_add_and_schedule_with_same_fields_differ_only_in_type_byte():
    a = add(ID, created_ns=10**18)
    s = WqSchedule(**{f: getattr(a, f) for f in (x.name for x in dataclasses.fields(a))})
    ea, es = encode_payload(a), encode_payload(s)
    assert ea[0] == 1 and es[0] == 2 and ea[1:] == es[1:]
    assert a != s


def test_schedule_time_round_trips():
    s = schedule(ID, time_ns=1_700_000_123_456_789_012)
    assert decode_payload(encode_payload(s)).time_ns == 1_700_000_123_456_789_012


def test_non_utf8_name_is_corrupt():
    raw = bytearray(encode_payload(add(ID, name="ab")))
    raw[18:20] = b"\xff\xfe"  # type(1) id(16) len(1) -> name bytes
    with pytest.raises(PayloadError, match="UTF-8"):
        decode_payload(bytes(raw))


def test_bad_time_inside_payload_is_corrupt():
    raw = bytearray(encode_payload(add(ID)))
    raw[-15] = 2  # created time version byte
    with pytest.raises(PayloadError, match="created"):
        decode_payload(bytes(raw))


def test_varint_overflow_inside_payload_is_corrupt():
    raw = bytes([3]) + ID.bytes + b"\xff" * 11
    with pytest.raises(PayloadError, match="result length"):
        decode_payload(raw)


def test_result_longer_than_payload_is_corrupt():
    raw = bytes([4]) + ID.bytes + b"\x05ab"
    with pytest.raises(PayloadError, match="result"):
        decode_payload(raw)


def test_command_names():
    assert COMMAND_NAMES == {
        1: "add",
        2: "schedule",
        3: "complete",
        4: "fail",
        5: "delete",
        6: "expire",
        7: "start-attempt",
        8: "timeout-attempt",
    }


def test_encode_rejects_non_commands_and_bad_ids():
    with pytest.raises(TypeError):
        encode_payload("add")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        encode_payload(WqComplete(id=str(ID), result=b""))  # type: ignore[arg-type]


def test_commands_are_frozen():
    c = WqComplete(ID, b"r")
    with pytest.raises(Exception):
        c.result = b"x"  # type: ignore[misc]
    assert isinstance(add(ID), WqAdd)
