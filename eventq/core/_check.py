"""Validation helpers shared by the core's dataclasses.

Every check raises ``ValueError`` (also for a value of the wrong type): constructing a
core value that cannot exist is one kind of error, whatever made it impossible.
"""

from __future__ import annotations

import re
import uuid

from eventq.limits import MAX_NAME_BYTES

_NAME_RE = re.compile(r"[A-Za-z0-9_.\-]{1,%d}" % MAX_NAME_BYTES)


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
