"""The values of docs/workflows.md, "Values and checks", for its operating features
(failure groups, retry, tags, recurring jobs), one validator at a time (their integers
are in tests/protocol/test_values.py's table with the others)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventq.errors import INVALID_GROUP, INVALID_TAGS, ClientError
from eventq.protocol import values

NAME_CHARS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-"
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
