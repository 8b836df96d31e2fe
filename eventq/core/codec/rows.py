"""The rows that several of the codec's tables share: the job map (``JOB_FIELDS``, an
import's snapshot), a job's options as add, schedule and recur carry them (made of
eventq/core/fields.py, the one table of a job's options), and the fields many commands
and events have alike.
"""

from __future__ import annotations

from typing import Any

from eventq.core.codec.kinds import (
    BIN,
    BOOL,
    INT,
    LINKS,
    STATE,
    STR,
    TAGS,
    UUID_BYTES,
    UUIDS,
    Absent,
    Field,
    Kind,
)
from eventq.core.commands import SNAPSHOT_FIELD_NAMES
from eventq.core.fields import (
    ADD_OPTIONS,
    BACKOFF,
    RECUR_OPTIONS,
    SCHEDULE_OPTIONS,
    WORKQ_OPTIONS,
    Data,
    Ids,
    Ints,
    Name,
    Option,
    Required,
    Tags,
)
from eventq.core.fields import TAGS as TAGS_OPTION

# ------------------------------------------------------------------- job options

_KIND_OF_RULE: dict[type, Kind] = {Ints: INT, Name: STR, Data: BIN, Tags: TAGS, Ids: UUIDS}


def option_row(option: Option[Any], key: str) -> Field:
    """The row of a job's option under ``key``. A workq option (or one without a
    default) is in every record; an eventq option is left out at its default, so that a
    record that does not use it keeps the bytes it had before the option existed."""
    required = option.workq or isinstance(option.absent, Required)
    absent = Absent.REQUIRED if required else option.absent
    return Field(key, option.attr, _KIND_OF_RULE[type(option.rule)], absent=absent)


def command_rows(options: tuple[Option[Any], ...]) -> tuple[Field, ...]:
    """The rows of ``options`` in a command's record, in that order."""
    return tuple(option_row(o, o.command_key) for o in options)


def _job_row(option: Option[Any]) -> Field:
    assert option.job_key is not None, option
    return option_row(option, option.job_key)


# ------------------------------------------------------------------------ the job

JOB_FIELDS: tuple[Field, ...] = (
    Field("i", "id", UUID_BYTES),
    *map(_job_row, WORKQ_OPTIONS),  # name, ttr, ttl, payload, priority, max-attempts, -fails
    Field("at", "attempts", INT),
    Field("fa", "fails", INT),
    Field("s", "state", STATE),
    Field("c", "created_ms", INT),
    Field("w", "scheduled_ms", INT, nil=True),
    Field("e", "expires_ms", INT, nil=True),
    Field("ld", "lease_deadline_ms", INT, nil=True),
    Field("x", "result", BIN, nil=True),
    Field("ok", "result_ok", BOOL, nil=True),
    # -backoff's, only when set: a job without a backoff has the record it had before
    # backoffs existed.
    _job_row(BACKOFF),
    Field("rn", "returns", INT, absent=0),
    Field("rt", "retry_ms", INT, absent=None),
    # Workflows', only when set: a job without upstreams has the record it had before
    # workflows existed.
    Field("up", "upstreams", LINKS, absent=(), note="[id, outcome, change, completed ms]"),
    Field("ca", "added_at", INT, absent=None, note="the add's position"),
    Field("rl", "released_ms", INT, absent=None),
    Field("fp", "finished_at", INT, absent=None, note="a position"),
    Field("fm", "finished_ms", INT, absent=None),
    Field("g", "group", STR, absent=None, note="None: failed or attempts-exhausted"),
    # Tags', only when set (docs/workflows.md, "Tags"): likewise.
    _job_row(TAGS_OPTION),
    # Retry's, only when set: a job never retried has the record it had before.
    Field("dt", "delayed_ms", INT, absent=None, note="retry -delay's time"),
    Field("er", "early", BOOL, absent=False, note="a retry made it ready before its time"),
    # A dependent's scope (docs/security.md, "Queue-name prefixes"), only when its add
    # had one.
    Field("sc", "scope", STR, absent=None, note="a dependent's token prefix"),
    Field("ver", "version", INT),  # last: after the snapshot's fields (SNAPSHOT_FIELDS)
)
# An import's snapshot: the job map without ``i`` (the command's own) and ``ver`` (the
# applying offset).
SNAPSHOT_FIELDS = tuple(f for f in JOB_FIELDS if f.attr in SNAPSHOT_FIELD_NAMES)
JOB_KEYS: dict[str, str] = {f.attr: f.key for f in JOB_FIELDS}  # Job attribute -> key

# --------------------------------------------------------------- shared by several

JOB_ID = Field("i", "job_id", UUID_BYTES)
ATTEMPT = Field("k", "attempt", INT)
RESULT = Field("x", "result", BIN)
QUEUE_NAME = Field("n", "name", STR)
# [eventq] The issuing token's prefix (docs/security.md, "Queue-name prefixes"), only
# when it has one: a command of a token without a prefix keeps the bytes it had.
SCOPE = Field("sc", "scope", STR, absent=None, note="the token's prefix")
DEPENDENT_CREATED = Field("c", "dependent_created", INT, note="the add's position")
DELAY = Field("dl", "delay_ms", INT, absent=0)
RECURRENCE_NAME = Field("rn", "name", STR)

# A new job's settings: add's and schedule's (schedule's time after the TTL).
ADD_FIELDS = (JOB_ID, *command_rows(ADD_OPTIONS), SCOPE)
SCHEDULE_FIELDS = (JOB_ID, *command_rows(SCHEDULE_OPTIONS), SCOPE)
# A recurrence's definition, as ``recur`` carries it (its record adds ``created``).
RECURRENCE_DEFINITION_FIELDS = (RECURRENCE_NAME, *command_rows(RECUR_OPTIONS))
