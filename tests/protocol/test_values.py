"""The value validators (docs/protocol.md, "Arguments"), one by one."""

from __future__ import annotations

import datetime
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventq.errors import (
    INVALID_COUNT,
    INVALID_CURSOR_OFFSET,
    INVALID_DELAY,
    INVALID_EVERY,
    INVALID_ID,
    INVALID_LIMIT,
    INVALID_MAX_ATTEMPTS,
    INVALID_MAX_FAILS,
    INVALID_NAME,
    INVALID_PRIORITY,
    INVALID_RESULT_SIZE,
    INVALID_TIME,
    INVALID_TTL,
    INVALID_TTR,
    INVALID_WAIT_TIMEOUT,
    ClientError,
    FramingError,
)
from eventq.protocol import values

CANONICAL = "6ba7b810-9dad-41d1-80b4-00c04fd430c4"
V4 = uuid.UUID(CANONICAL)


# --- ids ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "token",
    [
        CANONICAL,
        CANONICAL.upper(),
        "6BA7b810-9DAD-41d1-80B4-00c04FD430c4",
        CANONICAL.replace("-", ""),
        "6ba7b8109dad-41d1-80b400c04fd430c4",  # each group boundary's hyphen is optional
        "6ba7b810-9dad41d180b4-00c04fd430c4",
        "{" + CANONICAL + "}",
        "{" + CANONICAL.replace("-", "") + "}",
        "urn:uuid:" + CANONICAL,
        "urn:uuid:" + CANONICAL.replace("-", "").upper(),
    ],
)
def test_parse_id_accepts_every_spelling(token: str) -> None:
    assert values.parse_id(token, require_v4=True) == V4


@pytest.mark.parametrize(
    "token",
    [
        "",
        CANONICAL + "0",  # [eventq] trailing characters
        CANONICAL + "}",
        CANONICAL + " ",
        " " + CANONICAL,
        CANONICAL[:-1],
        "6ba7b81-09dad-41d1-80b4-00c04fd430c4",  # hyphen inside a group
        "6ba7b810--9dad-41d1-80b4-00c04fd430c4",
        "-6ba7b810-9dad-41d1-80b4-00c04fd430c4",
        "6ba7b810-9dad-41d1-80b4-00c04fd430c-4",
        "6ba7b810-9dad-41d1-80b4-00c04fd430cg",
        "6ba7b810-9dad-41d1-80b4-00c04fd430c４",  # full-width digit
        "{" + CANONICAL,
        CANONICAL + "}",
        "{{" + CANONICAL + "}}",
        "URN:UUID:" + CANONICAL,
        "urn:uuid:{" + CANONICAL + "}",
        "urn:" + CANONICAL,
        "0x" + CANONICAL.replace("-", ""),
    ],
)
def test_parse_id_rejects_malformed(token: str) -> None:
    for require_v4 in (True, False):
        with pytest.raises(ClientError) as caught:
            values.parse_id(token, require_v4=require_v4)
        assert caught.value == ClientError(INVALID_ID)


@pytest.mark.parametrize(
    "token",
    [
        "6ba7b810-9dad-11d1-80b4-00c04fd430c4",  # version 1
        "6ba7b810-9dad-51d1-80b4-00c04fd430c4",  # version 5
        "6ba7b810-9dad-41d1-c0b4-00c04fd430c4",  # version nibble 4, Microsoft variant
        "6ba7b810-9dad-41d1-00b4-00c04fd430c4",  # NCS variant
        "00000000-0000-0000-0000-000000000000",  # nil
    ],
)
def test_parse_id_requires_v4_only_when_asked(token: str) -> None:
    with pytest.raises(ClientError, match=INVALID_ID):
        values.parse_id(token, require_v4=True)
    assert values.parse_id(token, require_v4=False) == uuid.UUID(token)


def test_canonical_id_is_lowercase_hyphenated() -> None:
    assert values.canonical_id(uuid.UUID(CANONICAL.upper())) == CANONICAL


@given(st.uuids())
def test_id_round_trips_through_every_spelling(value: uuid.UUID) -> None:
    text = values.canonical_id(value)
    for spelling in (text, text.upper(), text.replace("-", ""), "{%s}" % text, "urn:uuid:" + text):
        assert values.parse_id(spelling, require_v4=False) == value
    assert values.parse_id(text, require_v4=value.version == 4) == value


# --- names ----------------------------------------------------------------------------


@pytest.mark.parametrize("token", ["a", "ping", "A-Z_a.z-09", "-", ".", "x" * 255])
def test_parse_name_accepts(token: str) -> None:
    assert values.parse_name(token) == token


@pytest.mark.parametrize("token", ["", "x" * 256, "a/b", "a:b", "a\tb", "a\rb", "é", "ping!", "a=b"])
def test_parse_name_rejects(token: str) -> None:
    with pytest.raises(ClientError, match=INVALID_NAME):
        values.parse_name(token)


# --- integers -------------------------------------------------------------------------

# Tokens that no integer field accepts: Python's int() would take several of them.
NOT_DECIMAL = ["", " 1", "1 ", "1_000", "0x10", "1e3", "1.0", "١", "１", "+", "-", "++1", "+-1", "--1"]

# fmt: off
INTEGER_CASES = [
    (values.parse_ttr_ms, INVALID_TTR,
     {"1": 1, "86400000": 86_400_000, "0001": 1},
     ["0", "86400001", "+1", "-1", "4294967296"]),
    (values.parse_ttl_ms, INVALID_TTL,
     {"1": 1, str(2**64 - 1): 2**64 - 1, "2592000001": 2_592_000_001},
     ["0", str(2**64), "+1", "-1"]),
    (values.parse_wait_timeout_ms, INVALID_WAIT_TIMEOUT,
     {"0": 0, "86400000": 86_400_000, "00": 0},
     ["86400001", "+0", "-0", "-1"]),
    (values.parse_max_attempts, INVALID_MAX_ATTEMPTS,
     {"0": 0, "255": 255, "007": 7}, ["256", "+1", "-1"]),
    (values.parse_max_fails, INVALID_MAX_FAILS,
     {"0": 0, "255": 255}, ["256", "+1", "-1"]),
    (values.parse_cursor_offset, INVALID_CURSOR_OFFSET,
     {"0": 0, "4294967295": 2**32 - 1}, ["4294967296", "+1", "-1"]),
    (values.parse_limit, INVALID_LIMIT,
     {"1": 1, "100": 100, "010": 10}, ["0", "101", "65536", "+1", "-1"]),
    (values.parse_priority, INVALID_PRIORITY,
     {"0": 0, "-2147483648": -(2**31), "2147483647": 2**31 - 1, "+5": 5, "-0": 0, "-007": -7},
     ["2147483648", "-2147483649", "+2147483648"]),
    # [eventq] docs/workflows.md, "Values and checks"
    (values.parse_delay_ms, INVALID_DELAY,
     {"0": 0, "86400000": 86_400_000, "007": 7}, ["86400001", "-0", "+0"]),
    (values.parse_count, INVALID_COUNT,
     {"1": 1, "10000": 10_000, "0010": 10}, ["0", "10001", "00", "+1", "-1"]),
    (values.parse_every_ms, INVALID_EVERY,
     {"1000": 1_000, "31536000000": 31_536_000_000, "086400000": 86_400_000},
     ["999", "0", "31536000001", str(2**64), "+1000", "-1000"]),
]
# fmt: on


@pytest.mark.parametrize(("parse", "error", "accepted", "rejected"), INTEGER_CASES)
def test_integers_follow_go_strconv(parse, error, accepted, rejected) -> None:
    for token, value in accepted.items():
        assert parse(token) == value, token
    for token in [*rejected, *NOT_DECIMAL]:
        with pytest.raises(ClientError) as caught:
            parse(token)
        assert caught.value == ClientError(error), token


def test_huge_integer_tokens_are_rejected_not_crashed() -> None:
    # int() refuses more than 4300 digits; a 10,000-byte line can hold that many.
    assert values.parse_ttr_ms("0" * 9_000 + "5") == 5
    with pytest.raises(ClientError, match=INVALID_TTL):
        values.parse_ttl_ms("9" * 9_000)
    with pytest.raises(ClientError, match=INVALID_PRIORITY):
        values.parse_priority("-" + "9" * 9_000)
    with pytest.raises(FramingError):
        values.parse_size("9" * 9_000, "x")


@pytest.mark.parametrize(
    ("token", "size"),
    [("0", 0), ("5", 5), ("+5", 5), ("0005", 5), ("-0", 0), ("1048576", 1_048_576)],
)
def test_parse_size_accepts(token: str, size: int) -> None:
    assert values.parse_size(token, INVALID_RESULT_SIZE) == size


@pytest.mark.parametrize("token", ["1048577", "-1", "x", "", " 5", "5_0", "0x5", "٥"])
def test_parse_size_rejects_with_the_given_framing_text(token: str) -> None:
    with pytest.raises(FramingError) as caught:
        values.parse_size(token, INVALID_RESULT_SIZE)
    assert caught.value == FramingError(INVALID_RESULT_SIZE)
    assert caught.value.closes_connection


# --- times ----------------------------------------------------------------------------

EPOCH_2016 = 1_465_886_806_000  # 2016-06-14T06:46:46Z


@pytest.mark.parametrize(
    ("token", "ms"),
    [
        ("2016-06-14T06:46:46Z", EPOCH_2016),
        ("2016-06-14T06:46:46.5Z", EPOCH_2016 + 500),
        ("2016-06-14T06:46:46.123456789Z", EPOCH_2016 + 123),
        ("2016-06-14T06:46:46.000Z", EPOCH_2016),
        ("1970-01-01T00:00:00Z", 0),
        ("1969-12-31T23:59:59Z", -1_000),
        ("2016-02-29T00:00:00Z", 1_456_704_000_000),
        ("2000-02-29T12:00:00Z", 951_825_600_000),
        ("0001-01-01T00:00:00Z", -62_135_596_800_000),
        ("9999-12-31T23:59:59Z", 253_402_300_799_000),
        ("9999-12-31T23:59:59.9999Z", 253_402_300_799_999),
    ],
)
def test_parse_time_ms_accepts(token: str, ms: int) -> None:
    assert values.parse_time_ms(token) == ms


@pytest.mark.parametrize(
    "token",
    [
        "",
        "2016-06-14T06:46:46",
        "2016-06-14T06:46:46+00:00",
        "2016-06-14T06:46:46Z+00:00",
        "2016-06-14T06:46:46z",
        "2016-06-14t06:46:46Z",
        "2016-06-14T06:46:46.Z",
        "2016-06-14T06:46:46,5Z",
        "2016-06-14T06:46Z",
        "2016-6-14T06:46:46Z",
        "16-06-14T06:46:46Z",
        "+2016-06-14T06:46:46Z",
        "2016-00-14T06:46:46Z",
        "2016-13-14T06:46:46Z",
        "2016-06-00T06:46:46Z",
        "2016-06-31T06:46:46Z",
        "2015-02-29T06:46:46Z",
        "1900-02-29T06:46:46Z",
        "2016-06-14T24:00:00Z",
        "2016-06-14T06:60:46Z",
        "2016-06-14T06:46:60Z",
        "2016-06-14T06:46:46ZZ",
        "2016-06-14T06:46:46Z ",
        "２016-06-14T06:46:46Z",
        "1465886806000",
        "0000-01-01T00:00:00Z",  # Go takes year 0; the core's times start at year 1
        "10000-01-01T00:00:00Z",
    ],
)
def test_parse_time_ms_rejects(token: str) -> None:
    with pytest.raises(ClientError, match=INVALID_TIME):
        values.parse_time_ms(token)


def test_format_time() -> None:
    assert values.format_time(EPOCH_2016) == "2016-06-14T06:46:46Z"
    assert values.format_time(EPOCH_2016 + 999) == "2016-06-14T06:46:46Z"
    assert values.format_time(0) == "1970-01-01T00:00:00Z"
    assert values.format_time(-1) == "1969-12-31T23:59:59Z"


MIN_MS = -62_135_596_800_000  # 0001-01-01T00:00:00Z
MAX_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z


@given(st.integers(MIN_MS, MAX_MS))
def test_format_then_parse_round_trips_to_the_second(ms: int) -> None:
    assert values.parse_time_ms(values.format_time(ms)) == ms - ms % 1000


@given(st.datetimes(min_value=datetime.datetime(1, 1, 1),
                    max_value=datetime.datetime(9999, 12, 31, 23, 59, 59)))
def test_parse_and_format_agree_with_datetime(moment: datetime.datetime) -> None:
    seconds = (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"
        f"T{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}"
    )
    delta = moment - datetime.datetime(1970, 1, 1)
    exact_ms = (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000
    assert values.parse_time_ms(f"{seconds}.{moment.microsecond:06d}Z") == exact_ms
    assert values.format_time(exact_ms) == seconds + "Z"
