"""The values of spec/workflows.md's operating features (failure groups, retry, tags,
recurring jobs): "Values and checks", one validator at a time."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventq.errors import (
    INVALID_COUNT,
    INVALID_DELAY,
    INVALID_EVERY,
    INVALID_GROUP,
    INVALID_TAGS,
    ClientError,
)
from eventq.protocol import values

NAME_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-"
# Tokens no integer field accepts (Python's int() would take several of them).
NOT_DECIMAL = ["", " 1", "1 ", "1_000", "0x10", "1e3", "1.0", "١", "１", "+", "-", "+1", "-1"]

# fmt: off
INTEGER_CASES = [
    (values.parse_delay_ms, INVALID_DELAY,
     {"0": 0, "86400000": 86_400_000, "007": 7}, ["86400001", "-0", "+0"]),
    (values.parse_count, INVALID_COUNT,
     {"1": 1, "10000": 10_000, "0010": 10}, ["0", "10001", "00"]),
    (values.parse_every_ms, INVALID_EVERY,
     {"1000": 1_000, "31536000000": 31_536_000_000, "086400000": 86_400_000},
     ["999", "0", "31536000001", str(2**64)]),
]
# fmt: on


@pytest.mark.parametrize(("parse", "error", "accepted", "rejected"), INTEGER_CASES)
def test_integers_follow_their_ranges(parse, error, accepted, rejected) -> None:
    for token, value in accepted.items():
        assert parse(token) == value, token
    for token in [*rejected, *NOT_DECIMAL]:
        with pytest.raises(ClientError) as caught:
            parse(token)
        assert caught.value == ClientError(error), token


@pytest.mark.parametrize("token", ["failed", "attempts-exhausted", "a", "A.b_c-9", "g" * 255])
def test_parse_group_accepts_a_name(token: str) -> None:
    assert values.parse_group(token) == token


@pytest.mark.parametrize("token", ["", "g" * 256, "a,b", "a b", "é", "a/b", "a:b"])
def test_parse_group_rejects(token: str) -> None:
    with pytest.raises(ClientError) as caught:
        values.parse_group(token)
    assert caught.value == ClientError(INVALID_GROUP)


@pytest.mark.parametrize(
    ("token", "tags"),
    [
        ("nightly", ("nightly",)),
        ("b,a", ("b", "a")),  # the given order is kept
        (",".join(f"t{i}" for i in range(16)), tuple(f"t{i}" for i in range(16))),
        ("x" * 64, ("x" * 64,)),
    ],
)
def test_parse_tags_accepts(token: str, tags: tuple[str, ...]) -> None:
    assert values.parse_tags(token) == tags


@pytest.mark.parametrize(
    "token",
    [
        "",
        ",",
        "a,",
        ",a",
        "a,,b",
        "a,a",  # not distinct
        "x" * 65,
        ",".join(f"t{i}" for i in range(17)),
        "a b",
        "é",
        "a:b",
    ],
)
def test_parse_tags_rejects(token: str) -> None:
    with pytest.raises(ClientError) as caught:
        values.parse_tags(token)
    assert caught.value == ClientError(INVALID_TAGS)


@pytest.mark.parametrize("token", ["", "a,b", "x" * 65, "a b"])
def test_parse_tag_rejects_with_the_tags_error(token: str) -> None:
    with pytest.raises(ClientError) as caught:
        values.parse_tag(token)
    assert caught.value == ClientError(INVALID_TAGS)


@given(st.lists(st.text(NAME_CHARS, min_size=1, max_size=64), min_size=1, max_size=16, unique=True))
def test_parse_tags_round_trips_any_valid_list(tags: list[str]) -> None:
    assert values.parse_tags(",".join(tags)) == tuple(tags)
