"""The options of a job, one table (docs/protocol.md, "Arguments").

A job's options are what ``add``, ``schedule``, ``run`` and ``recur`` set: its queue
name, TTR, TTL, payload and flags. Each is one row (``Option``): the attribute that
holds it (in the core's commands and ``Job``, and in the protocol's requests), the
protocol's word for it (its flag ``-word=``, or the name of its positional word), what
an absent flag means, the core's check of a value, the protocol's reply text for a
value it refuses, its keys in the records, and whether it is workq's own.

Derived from this table, never written again:

- the checks and defaults of ``Add``, ``Schedule``, ``Recur``, a recurrence's
  ``Definition`` and ``Job`` (eventq/core/commands.py, job.py), ``Import``'s defaults;
- the codec's rows of these fields (eventq/core/codec): a workq option is in every
  record; an eventq one is left out at its default, so that a record that does not use
  it keeps the bytes it had before it existed;
- the protocol's grammar rows, flags, defaults and ranges (eventq/protocol: grammar,
  values, requests, encode), and the flags that add and schedule count as extra;
- the fields a workq job shares with eventq's job (eventq/migrate/mapping.py).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any, Generic, TypeVar

from eventq.core._check import (
    check_bytes,
    check_int,
    check_name,
    check_tags,
    check_uuid,
    is_valid_name,
)
from eventq.errors import (
    INVALID_AFTER,
    INVALID_BACKOFF,
    INVALID_EVERY,
    INVALID_MAX_ATTEMPTS,
    INVALID_MAX_FAILS,
    INVALID_NAME,
    INVALID_PAYLOAD_SIZE,
    INVALID_PRIORITY,
    INVALID_TAGS,
    INVALID_TIME,
    INVALID_TTL,
    INVALID_TTR,
)
from eventq.limits import (
    MAX_AFTER_IDS,
    MAX_ATTEMPTS_LIMIT,
    MAX_BACKOFF_MS,
    MAX_EVERY_MS,
    MAX_FAILS_LIMIT,
    MAX_PAYLOAD_BYTES,
    MAX_PRIORITY,
    MAX_TIME_MS,
    MAX_TTL_MS,
    MAX_TTR_MS,
    MIN_EVERY_MS,
    MIN_PRIORITY,
    MIN_TIME_MS,
    MIN_TTL_MS,
    MIN_TTR_MS,
)

T = TypeVar("T")

# ------------------------------------------------------------------------- rules
# What values an option takes. Each rule is called with the attribute's name and a
# value, and raises ValueError (eventq/core/_check.py) for one it refuses; ``passes``
# is the source of a test that a value (the variable it names) is surely taken, true
# for the common values: the checks run once per command built, decoded ones too.


@dataclass(frozen=True, slots=True)
class Ints:
    """An int in ``lo..hi``, both included (the core's range and the protocol's)."""

    lo: int
    hi: int

    def __call__(self, name: str, value: object) -> None:
        check_int(name, value, self.lo, self.hi)

    def passes(self, v: str) -> str:
        return f"type({v}) is int and {self.lo} <= {v} <= {self.hi}"


@dataclass(frozen=True, slots=True)
class Name:
    """A queue name: 1..255 bytes of ``[A-Za-z0-9_.-]``."""

    def __call__(self, name: str, value: object) -> None:
        check_name(name, value)

    def passes(self, v: str) -> str:
        return f"type({v}) is str and is_valid_name({v})"


@dataclass(frozen=True, slots=True)
class Data:
    """Bytes of at most ``most`` bytes (a data block)."""

    most: int

    def __call__(self, name: str, value: object) -> None:
        check_bytes(name, value, self.most)

    def passes(self, v: str) -> str:
        return f"type({v}) is bytes and len({v}) <= {self.most}"


@dataclass(frozen=True, slots=True)
class Tags:
    """A tuple of 0 to 16 distinct tags (none: no -tags)."""

    def __call__(self, name: str, value: object) -> None:
        check_tags(name, value)

    def passes(self, v: str) -> str:
        return f"type({v}) is tuple and not {v}"  # none (every workq job): one test


@dataclass(frozen=True, slots=True)
class Ids:
    """A tuple of at most ``most`` distinct UUIDs (none: no -after). That none is the
    job's own id needs the job's: its command checks it."""

    most: int

    def __call__(self, name: str, value: object) -> None:
        if type(value) is not tuple:
            raise ValueError(f"{name} must be a tuple of UUIDs, got {type(value).__name__}")
        if len(value) > self.most:
            raise ValueError(f"{name} names at most {self.most} upstreams, not {len(value)}")
        for upstream in value:
            check_uuid("an upstream id", upstream)
        if len(set(value)) != len(value):
            raise ValueError(f"{name} names an upstream twice")

    def passes(self, v: str) -> str:
        return f"type({v}) is tuple and not {v}"  # none (every workq job): one test


Rule = Ints | Name | Data | Tags | Ids

# ------------------------------------------------------------------------ options


class Required(Enum):
    """An option without a default: a positional word, in every request and record."""

    REQUIRED = "required"


REQUIRED = Required.REQUIRED


@dataclass(frozen=True, slots=True)
class Option(Generic[T]):
    """One option of a job.

    ``attr``: the attribute that holds it (a recurrence holds its job's ``name`` as
    ``job_name``: ``held_as``); ``word``: the protocol's flag (``-word=``) or the name
    of its positional word; ``absent``: what a flag left out means (``REQUIRED``: a
    positional word); ``rule``: the values the core takes; ``error``: the protocol's
    reply text for a value it refuses; ``command_key`` and ``job_key``: its keys in the
    records of add, schedule and recur and in the job map (None: a job holds it under
    another name, or not at all); ``workq``: workq's own, in every record, where an
    eventq option is left out of a record at its default.
    """

    attr: str
    word: str
    absent: T | Required
    rule: Rule
    error: str
    command_key: str
    job_key: str | None
    workq: bool

    @property
    def default(self) -> T:
        """What the flag left out means (a dataclass field's default)."""
        if isinstance(self.absent, Required):
            raise TypeError(f"{self.word} is a positional word: it has no default")
        return self.absent

    @property
    def ints(self) -> Ints:
        """The range of an int option."""
        if not isinstance(self.rule, Ints):
            raise TypeError(f"{self.word} is not an int")
        return self.rule

    def check(self, value: object) -> None:
        """``ValueError`` unless the core takes ``value`` (named by ``attr``)."""
        self.rule(self.attr, value)

    def held_as(self, attr: str) -> Option[T]:
        """The same option held by another attribute."""
        return dataclasses.replace(self, attr=attr)


# Each row: attribute, word, absent, rule; refusal, command key, job key, workq's.
NAME: Option[str] = Option(
    "name", "name", REQUIRED, Name(),
    INVALID_NAME, "n", "n", workq=True)
TTR: Option[int] = Option(
    "ttr_ms", "ttr", REQUIRED, Ints(MIN_TTR_MS, MAX_TTR_MS),
    INVALID_TTR, "r", "r", workq=True)
# 0 is no TTL, a run job's: only the core's Add and Job take it (``with_no_ttl``).
TTL: Option[int] = Option(
    "ttl_ms", "ttl", REQUIRED, Ints(MIN_TTL_MS, MAX_TTL_MS),
    INVALID_TTL, "l", "l", workq=True)
NO_TTL = 0
# schedule's time; the job holds it as ``scheduled_ms``.
TIME: Option[int] = Option(
    "time_ms", "time", REQUIRED, Ints(MIN_TIME_MS, MAX_TIME_MS),
    INVALID_TIME, "s", None, workq=True)
# [eventq] recur's every-ms (docs/protocol.md, "eventq extensions"); a job has none.
EVERY: Option[int] = Option(
    "every_ms", "every-ms", REQUIRED, Ints(MIN_EVERY_MS, MAX_EVERY_MS),
    INVALID_EVERY, "ev", None, workq=False)
PAYLOAD: Option[bytes] = Option(
    "payload", "payload", REQUIRED, Data(MAX_PAYLOAD_BYTES),
    INVALID_PAYLOAD_SIZE, "d", "d", workq=True)
PRIORITY: Option[int] = Option(
    "priority", "priority", 0, Ints(MIN_PRIORITY, MAX_PRIORITY),
    INVALID_PRIORITY, "p", "p", workq=True)
# 0: the hard cap (job.attempt_limit).
MAX_ATTEMPTS: Option[int] = Option(
    "max_attempts", "max-attempts", 0, Ints(0, MAX_ATTEMPTS_LIMIT),
    INVALID_MAX_ATTEMPTS, "a", "ma", workq=True)
MAX_FAILS: Option[int] = Option(
    "max_fails", "max-fails", 0, Ints(0, MAX_FAILS_LIMIT),
    INVALID_MAX_FAILS, "f", "mf", workq=True)
# [eventq] docs/protocol.md, "-backoff".
BACKOFF: Option[int] = Option(
    "backoff_ms", "backoff", 0, Ints(0, MAX_BACKOFF_MS),
    INVALID_BACKOFF, "b", "b", workq=False)
# [eventq] the upstreams, in -after order; a job holds them as links (``upstreams``).
AFTER: Option[tuple[uuid.UUID, ...]] = Option(
    "after", "after", (), Ids(MAX_AFTER_IDS),
    INVALID_AFTER, "af", None, workq=False)
# [eventq] the job's tags, in -tags order.
TAGS: Option[tuple[str, ...]] = Option(
    "tags", "tags", (), Tags(),
    INVALID_TAGS, "tg", "tg", workq=False)

# The options of each command that makes a job (or a recurrence of jobs), in the order
# of its record's fields, which is the order the core checks them in.
ADD_OPTIONS: tuple[Option[Any], ...] = (
    NAME, TTR, TTL, PAYLOAD, PRIORITY, MAX_ATTEMPTS, MAX_FAILS, BACKOFF, AFTER, TAGS,
)  # fmt: skip
SCHEDULE_OPTIONS: tuple[Option[Any], ...] = ADD_OPTIONS[:3] + (TIME,) + ADD_OPTIONS[3:]
RECUR_OPTIONS: tuple[Option[Any], ...] = (
    NAME.held_as("job_name"), TTR, TTL, EVERY, PAYLOAD, PRIORITY, MAX_ATTEMPTS, MAX_FAILS,
    BACKOFF, TAGS,
)  # fmt: skip
# What a workq job has of these (eventq/cmdlog's WorkqJob holds them by the same names).
WORKQ_OPTIONS: tuple[Option[Any], ...] = tuple(o for o in ADD_OPTIONS if o.workq)


def with_no_ttl(options: tuple[Option[Any], ...]) -> tuple[Option[Any], ...]:
    """``options`` taking a TTL of 0 too: no TTL, a run job's (the core's ``Add`` and
    ``Job`` take it; the protocol's add and schedule, and recur, do not)."""
    no_ttl = dataclasses.replace(TTL, rule=Ints(NO_TTL, TTL.ints.hi))
    return tuple(no_ttl if option is TTL else option for option in options)


def checker(options: tuple[Option[Any], ...]) -> Callable[[object], None]:
    """What checks ``options`` of an object, in order (the first refused is reported).

    Made as Python source, as the codec's readers are (eventq/core/codec/compiled.py;
    ``__source__`` shows it): each option costs a type test and a comparison, and its
    rule is called only for a value the test does not surely take."""
    lines = ["def check(c):"]
    names: dict[str, Any] = {"is_valid_name": is_valid_name}
    for index, option in enumerate(options):
        assert option.attr.isidentifier(), option
        rule = names[f"rule{index}"] = option.rule
        lines += [
            f"    v = c.{option.attr}",
            f"    if not ({rule.passes('v')}):",
            f"        rule{index}({option.attr!r}, v)",
        ]
    text = "\n".join(lines if options else [*lines, "    pass"])
    exec(compile(text, "<eventq.core.fields: checker>", "exec"), names)
    check: Callable[[object], None] = names["check"]
    setattr(check, "__source__", text)  # for whoever debugs a table
    return check


def check_declared(cls: type, options: tuple[Option[Any], ...], defaults: bool = True) -> None:
    """``cls`` (a dataclass) has an attribute of each option, with the option's default
    when the option has one (unless not ``defaults``: a snapshot's fields are all
    given): a class and the table cannot drift apart (raised when the module that
    declares ``cls`` loads)."""
    declared = {f.name: f for f in dataclasses.fields(cls)}
    for option in options:
        found = declared.get(option.attr)
        if found is None:
            raise AssertionError(f"{cls.__name__} has no {option.attr}")
        if defaults and not isinstance(option.absent, Required) and found.default != option.absent:
            raise AssertionError(f"{cls.__name__}.{option.attr}'s default is not the option's")
