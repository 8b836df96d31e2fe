"""eventq/core/ids.py builds the very UUID that ``uuid.UUID`` would."""

from __future__ import annotations

import copy
import pickle
import uuid

from hypothesis import given
from hypothesis import strategies as st

from eventq.core.ids import uuid_of_bytes, uuid_of_int


def same(made: uuid.UUID, expected: uuid.UUID) -> None:
    assert type(made) is uuid.UUID
    assert made == expected and hash(made) == hash(expected)
    assert str(made) == str(expected) and repr(made) == repr(expected)
    assert made.bytes == expected.bytes and made.is_safe == expected.is_safe
    assert (made.version, made.variant) == (expected.version, expected.variant)
    assert pickle.loads(pickle.dumps(made)) == expected
    assert pickle.dumps(made) == pickle.dumps(expected)
    assert copy.deepcopy(made) == expected
    assert sorted([made, uuid.UUID(int=1 << 64)]) == sorted([expected, uuid.UUID(int=1 << 64)])


@given(st.integers(0, 2**128 - 1))
def test_of_int(value):
    same(uuid_of_int(value), uuid.UUID(int=value))


@given(st.binary(min_size=16, max_size=16))
def test_of_bytes(raw):
    same(uuid_of_bytes(raw), uuid.UUID(bytes=raw))


def test_is_immutable_as_any_uuid():
    made = uuid_of_int(5)
    try:
        made.int = 6  # type: ignore[misc]
    except TypeError:
        pass
    else:
        raise AssertionError("assigned")
