"""Validators for the values of the workq protocol (docs/protocol.md, "Arguments").

Each ``parse_*`` function takes one token as ``str`` and returns the value or raises
``ClientError`` with the exact text of the spec (``FramingError`` for sizes). The
parser decodes request lines as latin-1, so one character is one byte of the wire and
``len(token)`` is its length in bytes.

Integers follow what workq's Go code accepts (``strconv.ParseUint`` for unsigned
values, ``ParseInt`` for priority, ``Atoi`` for sizes): ASCII decimal digits only,
leading zeros allowed, no whitespace, no underscores, no hex; a leading ``+`` or ``-``
only where Go parses a signed integer (priority, sizes). Python's ``int()`` accepts
underscores, whitespace and non-ASCII digits, so it is only called on tokens that have
already matched a strict ASCII pattern.
"""

from __future__ import annotations

import calendar
import re
import uuid
from collections.abc import Callable
from typing import Any

from eventq.core.fields import (
    AFTER,
    BACKOFF,
    EVERY,
    MAX_ATTEMPTS,
    MAX_FAILS,
    NAME,
    PRIORITY,
    TAGS,
    TIME,
    TTL,
    TTR,
    Option,
)
from eventq.core.ids import uuid_of_int
from eventq.errors import (
    INVALID_COMMAND_ARGS,
    INVALID_COUNT,
    INVALID_CURSOR_OFFSET,
    INVALID_DELAY,
    INVALID_GROUP,
    INVALID_ID,
    INVALID_LIMIT,
    INVALID_WAIT_TIMEOUT,
    ClientError,
    FramingError,
)
from eventq.limits import (
    MAX_AFTER_IDS,
    MAX_CURSOR_OFFSET,
    MAX_GROUP_BYTES,
    MAX_LIMIT,
    MAX_NAME_BYTES,
    MAX_OFFSET,
    MAX_PAYLOAD_BYTES,
    MAX_RETRY_COUNT,
    MAX_RETRY_DELAY_MS,
    MAX_TAG_BYTES,
    MAX_TAGS,
    MAX_WAIT_TIMEOUT_MS,
    MIN_AFTER_IDS,
    MIN_LIMIT,
    MIN_RETRY_COUNT,
    MIN_TAGS,
)

# --- integers -------------------------------------------------------------------------

_UNSIGNED = re.compile(r"[0-9]+")  # strconv.ParseUint(s, 10, n): no sign at all
_SIGNED = re.compile(r"([+-]?)([0-9]+)")  # strconv.ParseInt / Atoi: optional sign


def _bounded_int(digits: str, maximum: int) -> int | None:
    """The value of an ASCII digit string, or None if it exceeds ``maximum``.

    Leading zeros are dropped first so that a long run of them is still accepted (Go
    does) and so ``int()`` never meets more digits than ``maximum`` has (Python limits
    int() to 4300 digits; a 10,000-byte token must not raise).
    """
    significant = digits.lstrip("0") or "0"
    if len(significant) > len(str(maximum)):
        return None
    value = int(significant)
    return value if value <= maximum else None


def _parse_unsigned(token: str, minimum: int, maximum: int, error: str) -> int:
    """An unsigned decimal in ``minimum … maximum``, else ``ClientError(error)``."""
    if _UNSIGNED.fullmatch(token) is None:
        raise ClientError(error)
    value = _bounded_int(token, maximum)
    if value is None or value < minimum:
        raise ClientError(error)
    return value


def _parse_signed(token: str, bound: int) -> int | None:
    """A signed decimal whose magnitude is at most ``bound``, else None."""
    match = _SIGNED.fullmatch(token)
    if match is None:
        return None
    sign, digits = match.groups()
    magnitude = _bounded_int(digits, bound)
    if magnitude is None:
        return None
    return -magnitude if sign == "-" else magnitude


def _parse_option(token: str, option: Option[int]) -> int:
    """An unsigned decimal in an int option's range, else its ``ClientError``
    (eventq/core/fields.py holds both)."""
    return _parse_unsigned(token, option.ints.lo, option.ints.hi, option.error)


def parse_ttr_ms(token: str) -> int:
    """ttr: integer ms, 1 … 86,400,000 (``Invalid TTR``)."""
    return _parse_option(token, TTR)


def parse_backoff_ms(token: str) -> int:
    """[eventq] -backoff: integer ms, 0 … 86,400,000 (``Invalid Backoff``)."""
    return _parse_option(token, BACKOFF)


def parse_ttl_ms(token: str) -> int:
    """ttl: integer ms, 1 … 2^64−1 ([eventq] as documented; ``Invalid TTL``)."""
    return _parse_option(token, TTL)


def parse_wait_timeout_ms(token: str) -> int:
    """wait-timeout: integer ms, 0 … 86,400,000 (``Invalid wait timeout``)."""
    return _parse_unsigned(token, 0, MAX_WAIT_TIMEOUT_MS, INVALID_WAIT_TIMEOUT)


def parse_max_attempts(token: str) -> int:
    """-max-attempts: 0 … 255, 0 meaning the hard cap (``Invalid Max Attempts``)."""
    return _parse_option(token, MAX_ATTEMPTS)


def parse_max_fails(token: str) -> int:
    """-max-fails: 0 … 255 (``Invalid Max Fails``)."""
    return _parse_option(token, MAX_FAILS)


def parse_cursor_offset(token: str) -> int:
    """cursor-offset: unsigned 32-bit (``Invalid cursor offset``)."""
    return _parse_unsigned(token, 0, MAX_CURSOR_OFFSET, INVALID_CURSOR_OFFSET)


def parse_claim(token: str) -> int:
    """confirm's claim (internal, eventq/state/offers.py): a log position, 0 … 2^63-1."""
    return _parse_unsigned(token, 0, MAX_OFFSET, INVALID_COMMAND_ARGS)


def parse_delay_ms(token: str) -> int:
    """[eventq] `retry -delay=`: integer ms, 0 … 86,400,000 (``Invalid Delay``)."""
    return _parse_unsigned(token, 0, MAX_RETRY_DELAY_MS, INVALID_DELAY)


def parse_count(token: str) -> int:
    """[eventq] `retry-group`'s count: 1 … 10,000 (``Invalid Count``)."""
    return _parse_unsigned(token, MIN_RETRY_COUNT, MAX_RETRY_COUNT, INVALID_COUNT)


def parse_every_ms(token: str) -> int:
    """[eventq] `recur`'s every-ms: 1,000 … 31,536,000,000 (365 days; ``Invalid Every``)."""
    return _parse_option(token, EVERY)


def parse_limit(token: str) -> int:
    """limit: 1 … 100 (``Invalid limit``)."""
    return _parse_unsigned(token, MIN_LIMIT, MAX_LIMIT, INVALID_LIMIT)


def parse_priority(token: str) -> int:
    """-priority: signed 32-bit, ``+`` and ``-`` accepted as by ParseInt (``Invalid Priority``)."""
    lo, hi = PRIORITY.ints.lo, PRIORITY.ints.hi
    value = _parse_signed(token, -lo)
    if value is None or not lo <= value <= hi:
        raise ClientError(PRIORITY.error)
    return value


def parse_size(token: str, error_text: str) -> int:
    """A data block size: decimal, ``+5`` and leading zeros accepted (Go's Atoi).

    Negative, non-numeric or over 1 MiB is a framing error with ``error_text``
    (docs/protocol.md, "Connections and framing"). ``-0`` is zero, not negative, so Atoi and this accept it.
    """
    value = _parse_signed(token, MAX_PAYLOAD_BYTES)
    if value is None or value < 0:
        raise FramingError(error_text)
    return value


# --- names ----------------------------------------------------------------------------

_NAME = re.compile(r"[A-Za-z0-9_.\-]{1,%d}" % MAX_NAME_BYTES)


def parse_name(token: str) -> str:
    """name: 1–255 bytes of ``[A-Za-z0-9_.-]`` (``Invalid Name``)."""
    if _NAME.fullmatch(token) is None:
        raise ClientError(NAME.error)
    return token


_GROUP = re.compile(r"[A-Za-z0-9_.\-]{1,%d}" % MAX_GROUP_BYTES)
_TAG = re.compile(r"[A-Za-z0-9_.\-]{1,%d}" % MAX_TAG_BYTES)
_TAGS_SEPARATOR = ","


def parse_group(token: str) -> str:
    """[eventq] a failure group: 1–255 bytes of ``[A-Za-z0-9_.-]``, like a name
    (``Invalid Group``; docs/workflows.md, "Values and checks")."""
    if _GROUP.fullmatch(token) is None:
        raise ClientError(INVALID_GROUP)
    return token


def parse_tag(token: str) -> str:
    """[eventq] one tag (`inspect tagged`): 1–64 bytes of ``[A-Za-z0-9_.-]``
    (``Invalid Tags``)."""
    if _TAG.fullmatch(token) is None:
        raise ClientError(TAGS.error)
    return token


def parse_tags(token: str) -> tuple[str, ...]:
    """[eventq] -tags: 1–16 tags separated by ``,`` (no empty element), each a tag as
    ``parse_tag`` takes it, all distinct, in the order given (``Invalid Tags``)."""
    tags = tuple(token.split(_TAGS_SEPARATOR))
    if not MIN_TAGS <= len(tags) <= MAX_TAGS or len(set(tags)) != len(tags):
        raise ClientError(TAGS.error)
    for tag in tags:
        parse_tag(tag)
    return tags


# --- ids ------------------------------------------------------------------------------

_HEX = "[0-9A-Fa-f]"
# 32 hex digits in 8-4-4-4-12 groups; each of the four group boundaries may carry one
# hyphen or none (spec: "hyphens optional between the 8-4-4-4-12 groups").
_UUID_BODY = re.compile(
    "({h}{{8}})-?({h}{{4}})-?({h}{{4}})-?({h}{{4}})-?({h}{{12}})".format(h=_HEX)
)
_URN_PREFIX = "urn:uuid:"


def _unwrap_id(token: str) -> str:
    """The UUID text inside an optional ``urn:uuid:`` prefix or ``{…}`` wrapper."""
    if token.startswith(_URN_PREFIX):
        return token[len(_URN_PREFIX) :]
    if len(token) >= 2 and token[0] == "{" and token[-1] == "}":
        return token[1:-1]
    return token


def parse_id(token: str, require_v4: bool) -> uuid.UUID:
    """id: a UUID (spec table row "id"), ``Invalid ID`` otherwise.

    Either case; hyphens optional at the group boundaries; ``{…}`` and the ``urn:uuid:``
    prefix accepted; [eventq] trailing characters rejected. With ``require_v4``
    (add, schedule, run, result, complete, fail) the UUID must be version 4 with the
    RFC 4122 variant.
    """
    match = _UUID_BODY.fullmatch(_unwrap_id(token))
    if match is None:
        raise ClientError(INVALID_ID)
    value = uuid_of_int(int("".join(match.groups()), 16))  # 32 hex digits: checked
    if require_v4 and not (value.variant == uuid.RFC_4122 and value.version == 4):
        raise ClientError(INVALID_ID)
    return value


_AFTER_SEPARATOR = ","


def parse_after(token: str) -> tuple[uuid.UUID, ...]:
    """[eventq] -after: 1–100 ids separated by ``,``, no empty element, each in any
    spelling ``parse_id`` accepts for a version 4 UUID, all distinct as UUID values
    (``A`` and ``{A}`` are one id), in -after order (docs/workflows.md, "Values and checks";
    "Choices made"). ``Invalid After`` otherwise, whichever rule fails: an
    element that is no v4 id is ``Invalid After`` too, not ``Invalid ID``.

    That none is the job's own id needs the id: the grammar checks it
    (``grammar._after_excludes_own_id``).
    """
    elements = token.split(_AFTER_SEPARATOR)
    if not MIN_AFTER_IDS <= len(elements) <= MAX_AFTER_IDS:
        raise ClientError(AFTER.error)
    try:
        ids = tuple(parse_id(element, require_v4=True) for element in elements)
    except ClientError:
        raise ClientError(AFTER.error) from None
    if len(set(ids)) != len(ids):
        raise ClientError(AFTER.error)
    return ids


def canonical_id(value: uuid.UUID) -> str:
    """The reply form of an id: lowercase, hyphenated 8-4-4-4-12."""
    return str(value)


# --- times ----------------------------------------------------------------------------
# Times are unix milliseconds (UTC). The civil-date conversions below are pure
# arithmetic (H. Hinnant's days_from_civil / civil_from_days): no clock, any year.

_MS_PER_SECOND = 1_000
_MS_PER_DAY = 86_400_000
_TIME = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?Z"
)


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date."""
    year -= month <= 2
    era = year // 400
    year_of_era = year - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146_097 + day_of_era - 719_468


def _civil_from_days(days: int) -> tuple[int, int, int]:
    """The (year, month, day) of a day count since 1970-01-01."""
    days += 719_468
    era = days // 146_097
    day_of_era = days - era * 146_097
    year_of_era = (
        day_of_era - day_of_era // 1_460 + day_of_era // 36_524 - day_of_era // 146_096
    ) // 365
    day_of_year = day_of_era - (365 * year_of_era + year_of_era // 4 - year_of_era // 100)
    month_index = (5 * day_of_year + 2) // 153
    day = day_of_year - (153 * month_index + 2) // 5 + 1
    month = month_index + (3 if month_index < 10 else -9)
    return year_of_era + era * 400 + (month <= 2), month, day


def _days_in_month(year: int, month: int) -> int:
    if month == 2:
        return 29 if calendar.isleap(year) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _fraction_ms(fraction: str | None) -> int:
    """Milliseconds of a fractional second, truncated (``.5`` → 500, ``.1239`` → 123)."""
    if not fraction:
        return 0
    return int(fraction[:3].ljust(3, "0"))


def parse_time_ms(token: str) -> int:
    """time: UTC ``YYYY-MM-DDTHH:MM:SSZ`` with an optional fractional second.

    Returns unix milliseconds. Offsets such as ``+00:00`` are rejected, and so are
    out-of-range fields (month 13, February 30, hour 24, second 60), as Go's time.Parse
    rejects them. ``Invalid Time`` otherwise. Year 0000, which Go would take, is refused
    too: the core's times start at 0001-01-01 (``limits.MIN_TIME_MS``). Whether the
    time is late enough is the caller's check (it needs the clock).
    """
    match = _TIME.fullmatch(token)
    if match is None:
        raise ClientError(TIME.error)
    year, month, day, hour, minute, second = (int(part) for part in match.groups()[:6])
    if not (1 <= month <= 12 and 1 <= day <= _days_in_month(year, month)):
        raise ClientError(TIME.error)
    if hour > 23 or minute > 59 or second > 59:
        raise ClientError(TIME.error)
    seconds_of_day = (hour * 60 + minute) * 60 + second
    ms = (
        _days_from_civil(year, month, day) * _MS_PER_DAY
        + seconds_of_day * _MS_PER_SECOND
        + _fraction_ms(match.group(7))
    )
    if not TIME.ints.lo <= ms <= TIME.ints.hi:
        raise ClientError(TIME.error)
    return ms


def format_time_ms(ms: int) -> str:
    """Unix milliseconds as UTC ``YYYY-MM-DDTHH:MM:SS.mmmZ``: what ``parse_time_ms``
    reads back exactly (a forwarded schedule keeps its millisecond)."""
    return format_time(ms)[:-1] + f".{ms % _MS_PER_SECOND:03d}Z"


def format_time(ms: int) -> str:
    """Unix milliseconds as UTC ``YYYY-MM-DDTHH:MM:SSZ`` (sub-second part dropped)."""
    days, ms_of_day = divmod(ms, _MS_PER_DAY)
    year, month, day = _civil_from_days(days)
    minutes, second = divmod(ms_of_day // _MS_PER_SECOND, 60)
    hour, minute = divmod(minutes, 60)
    return f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}Z"


# --- a job's options -------------------------------------------------------------------

# The parser of each option of a job (eventq/core/fields.py), by its word: the grammar's
# rows of add, schedule, run and recur are made of the options and these.
OPTION_PARSERS: dict[str, Callable[[str], Any]] = {
    NAME.word: parse_name,
    TTR.word: parse_ttr_ms,
    TTL.word: parse_ttl_ms,
    TIME.word: parse_time_ms,
    EVERY.word: parse_every_ms,
    PRIORITY.word: parse_priority,
    MAX_ATTEMPTS.word: parse_max_attempts,
    MAX_FAILS.word: parse_max_fails,
    BACKOFF.word: parse_backoff_ms,
    AFTER.word: parse_after,
    TAGS.word: parse_tags,
}
