"""Validation helpers shared by the core's dataclasses.

Every check raises ``ValueError`` (also for a value of the wrong type): constructing a
core value that cannot exist is one kind of error, whatever made it impossible.
"""

from __future__ import annotations

import re
import uuid

from eventq.limits import MAX_NAME_BYTES, MAX_TAG_BYTES, MAX_TAGS

_NAME_RE = re.compile(r"[A-Za-z0-9_.\-]{1,%d}" % MAX_NAME_BYTES)
_TAG_RE = re.compile(r"[A-Za-z0-9_.\-]{1,%d}" % MAX_TAG_BYTES)


def check_int(field: str, value: object, lo: int, hi: int) -> None:
    """``value`` is an ``int`` (not a ``bool``) in ``lo..hi`` inclusive."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{field} must be an int, got {type(value).__name__}")
    if not lo <= value <= hi:
        raise ValueError(f"{field} must be in {lo}..{hi}, got {value}")


def check_opt_int(field: str, value: object, lo: int, hi: int) -> None:
    """``value`` is None or an ``int`` in ``lo..hi``."""
    if value is not None:
        check_int(field, value, lo, hi)


def check_bool(field: str, value: object) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{field} must be a bool, got {type(value).__name__}")


def check_bytes(field: str, value: object, max_len: int) -> None:
    """``value`` is ``bytes`` of at most ``max_len`` bytes."""
    if not isinstance(value, bytes):
        raise ValueError(f"{field} must be bytes, got {type(value).__name__}")
    if len(value) > max_len:
        raise ValueError(f"{field} is {len(value)} bytes, more than {max_len}")


def check_uuid(field: str, value: object) -> None:
    if not isinstance(value, uuid.UUID):
        raise ValueError(f"{field} must be a uuid.UUID, got {type(value).__name__}")


def check_name(field: str, value: object) -> None:
    """A queue name: 1..255 bytes of ``[A-Za-z0-9_.-]`` (so ASCII: chars == bytes)."""
    if not isinstance(value, str):
        raise ValueError(f"{field} must be a str, got {type(value).__name__}")
    if _NAME_RE.fullmatch(value) is None:
        raise ValueError(
            f"{field} must be 1..{MAX_NAME_BYTES} bytes of [A-Za-z0-9_.-], got {value!r:.80}"
        )


def is_valid_name(value: object) -> bool:
    """True when ``value`` is a valid queue name (see ``check_name``)."""
    return isinstance(value, str) and _NAME_RE.fullmatch(value) is not None


# Tag tuples found valid lately: a job is built anew at every command applied to it
# (and its add twice), and the same few tags come again and again; found here, a tuple
# of 16 tags is checked by one lookup instead of 16 matches (a memo of a pure test: what
# is valid never changes).
_VALID_TAGS: dict[tuple[str, ...], None] = {}
_VALID_TAGS_KEPT = 1024


def check_tags(field: str, value: object) -> None:
    """[eventq] a job's tags (docs/workflows.md, "Tags"): a tuple of 0 to ``MAX_TAGS``
    distinct tags, each 1..64 bytes of ``[A-Za-z0-9_.-]`` (the protocol's "1-16" is its
    spelling: none is no -tags)."""
    if type(value) is tuple:
        try:
            if value in _VALID_TAGS:
                return
        except TypeError:  # an element that cannot be hashed: no tag, found below
            pass
    _check_tags(field, value)
    if len(_VALID_TAGS) >= _VALID_TAGS_KEPT:
        _VALID_TAGS.clear()
    _VALID_TAGS[value] = None  # type: ignore[index]  # a tuple of str, checked just above


def _check_tags(field: str, value: object) -> None:
    if type(value) is not tuple:
        raise ValueError(f"{field} must be a tuple of str, got {type(value).__name__}")
    if len(value) > MAX_TAGS:
        raise ValueError(f"{field} holds at most {MAX_TAGS} tags, not {len(value)}")
    for tag in value:
        if type(tag) is not str or _TAG_RE.fullmatch(tag) is None:
            raise ValueError(
                f"each of {field} must be 1..{MAX_TAG_BYTES} bytes of [A-Za-z0-9_.-], got {tag!r:.80}"
            )
    if len(set(value)) != len(value):
        raise ValueError(f"{field} names a tag twice")
