"""The command grammar of the workq protocol as one data table (docs/protocol.md,
"Commands").

``GRAMMAR`` maps each verb to a ``Command`` (or, for ``inspect``, to a table of
``Command`` by object). A ``Command`` says how many positional words it takes, how
many flags and which names, whether a data block follows and which size error it
uses, and the fields in the order the spec checks them ("Checked: …"). The
parser interprets this table; nothing in it is specific to one verb.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from eventq.core.fields import (
    AFTER,
    BACKOFF,
    EVERY,
    MAX_ATTEMPTS,
    MAX_FAILS,
    NAME,
    PAYLOAD,
    PRIORITY,
    TAGS,
    TIME,
    TTL,
    TTR,
    Option,
)
from eventq.errors import (
    INVALID_AFTER,
    INVALID_PAYLOAD_SIZE,
    INVALID_RESULT_SIZE,
    INVALID_TIME,
    ClientError,
)
from eventq.limits import MAX_ADD_FLAGS, MAX_RUN_FLAGS

from . import requests as rq
from .values import (
    OPTION_PARSERS,
    parse_claim,
    parse_count,
    parse_cursor_offset,
    parse_delay_ms,
    parse_group,
    parse_id,
    parse_limit,
    parse_name,
    parse_tag,
    parse_ttr_ms,
    parse_wait_timeout_ms,
)

Clock = Callable[[], int]
ParsedFields = Mapping[str, Any]  # request keyword -> value, in field order
Check = Callable[[ParsedFields, Clock], None]

# --- vocabulary of the table ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Arg:
    """The positional word at ``index`` (negative counts from the end)."""

    index: int

    def read(self, words: tuple[str, ...], flags: Mapping[str, str], parse: Callable) -> Any:
        return parse(words[self.index])


@dataclass(frozen=True, slots=True)
class Args:
    """The positional words ``words[start:stop]``, each parsed, as a tuple."""

    start: int
    stop: int | None

    def read(self, words: tuple[str, ...], flags: Mapping[str, str], parse: Callable) -> Any:
        return tuple(parse(word) for word in words[self.start : self.stop])


@dataclass(frozen=True, slots=True)
class Flag:
    """The flag ``-name=value``, or ``default`` when the flag is absent."""

    name: str
    default: Any

    def read(self, words: tuple[str, ...], flags: Mapping[str, str], parse: Callable) -> Any:
        return parse(flags[self.name]) if self.name in flags else self.default


@dataclass(frozen=True, slots=True)
class Field:
    """One request field: its keyword, where its token is, how it is parsed.

    ``check`` runs right after the field is parsed, with the fields parsed so far and
    the clock, for a rule that spans fields (schedule's "time + ttl in the future").
    """

    keyword: str
    source: Arg | Args | Flag
    parse: Callable[[str], Any]
    check: Check | None = None


@dataclass(frozen=True, slots=True)
class DataBlock:
    """A data block follows the line: its size is the word at ``size_index``."""

    size_index: int
    size_error: str  # reply text when the size or the block's framing is wrong
    keyword: str  # request field that receives the bytes


@dataclass(frozen=True, slots=True)
class Command:
    """The grammar of one command (after its verb, and its object for inspect)."""

    request: type
    min_words: int
    max_words: int | None  # None: no upper bound (lease)
    fields: tuple[Field, ...] = ()
    max_flags: int = 0
    data: DataBlock | None = None
    extra_flags: frozenset[str] = frozenset()  # each one given allows one flag more

    def accepts_flag_count(self, flags: Mapping[str, str]) -> bool:
        """At most ``max_flags`` flags, plus one for each of ``extra_flags`` among them."""
        return len(flags) <= self.max_flags + len(self.extra_flags.intersection(flags))

    @property
    def flag_names(self) -> frozenset[str]:
        """The flags this command knows (any other name is ``Invalid command flags``)."""
        return frozenset(f.source.name for f in self.fields if isinstance(f.source, Flag))

    def accepts_word_count(self, count: int) -> bool:
        return count >= self.min_words and (self.max_words is None or count <= self.max_words)


@dataclass(frozen=True, slots=True)
class Subcommands:
    """A verb whose first positional word names the real command (``inspect``)."""

    commands: Mapping[str, Command]


# --- parsers and checks used by the table --------------------------------------------


def _job_id(token: str) -> uuid.UUID:
    """An id that must be a version 4 UUID (add, schedule, run, result, complete, fail)."""
    return parse_id(token, require_v4=True)


def _any_id(token: str) -> uuid.UUID:
    """Any valid UUID (delete, inspect job: an unknown id is -NOT-FOUND, not invalid)."""
    return parse_id(token, require_v4=False)


def _time_plus_ttl_in_future(values: ParsedFields, now_ms: Clock) -> None:
    """schedule: ``time + ttl`` must be in the future (a past time wakes at once)."""
    if values[TIME.attr] + values[TTL.attr] <= now_ms():
        raise ClientError(INVALID_TIME)


def _after_excludes_own_id(values: ParsedFields, now_ms: Clock) -> None:
    """[eventq] -after: no upstream is the job itself (docs/workflows.md, "Values and checks"),
    compared as UUID values like the rest of -after. The id is the first
    field, so it is parsed by now."""
    if values["id"] in values[AFTER.attr]:
        raise ClientError(INVALID_AFTER)


# --- the table ------------------------------------------------------------------------

def _arg(option: Option[Any], index: int, check: Check | None = None) -> Field:
    """The row of a job's option (eventq/core/fields.py) given as positional word
    ``index``."""
    return Field(option.attr, Arg(index), OPTION_PARSERS[option.word], check)


def _flag(option: Option[Any], check: Check | None = None) -> Field:
    """The row of a job's option given as its flag, ``-word=``, its default when absent."""
    return Field(option.attr, Flag(option.word, option.default), OPTION_PARSERS[option.word], check)


def _payload(size_index: int) -> DataBlock:
    """A job's payload, the data block whose size is word ``size_index``."""
    return DataBlock(size_index, PAYLOAD.error, PAYLOAD.attr)


# pause, resume, touch and inputs judge every flag by its name (docs/protocol.md,
# "eventq extensions"; docs/workflows.md, "Values and checks": new verbs have no flag
# count): any other
# flag is "Invalid command flags", however many there are (a line holds fewer than this).
ANY_FLAG_COUNT = 10_000
# The flags of add and schedule, in the order they are checked: max-attempts,
# max-fails, priority, then [eventq] backoff, after (docs/workflows.md,
# "Dependencies") and tags (docs/workflows.md, "Tags"), last in field order.
_JOB_FLAGS = (
    _flag(MAX_ATTEMPTS), _flag(MAX_FAILS), _flag(PRIORITY), _flag(BACKOFF),
    _flag(AFTER, check=_after_excludes_own_id), _flag(TAGS),
)  # fmt: skip
# recur's: add's but -after (a recurrence's jobs have no upstreams).
_RECUR_FLAGS = tuple(f for f in _JOB_FLAGS if f.keyword != AFTER.attr)
# [eventq] add and schedule take at most MAX_ADD_FLAGS flags plus one for each of
# eventq's among them (docs/workflows.md, "Values and checks", flag counts), so a line
# without them is judged as workq judges it. run knows none of them but -backoff's
# absence: -after and -tags are unknown to it (Invalid command flags, or Invalid command
# args when they make more than one flag).
_EVENTQ_JOB_FLAGS = frozenset(
    o.word for o in (MAX_ATTEMPTS, MAX_FAILS, PRIORITY, BACKOFF, AFTER, TAGS) if not o.workq
)

# fmt: off
GRAMMAR: Mapping[str, Command | Subcommands] = {
    # add <id> <name> <ttr> <ttl> <size> [flags]; id, name, ttr, ttl, max-attempts,
    # max-fails, priority, [eventq] backoff, after, tags.
    "add": Command(
        rq.Add, 5, 5,
        fields=(
            Field("id", Arg(0), _job_id), _arg(NAME, 1), _arg(TTR, 2), _arg(TTL, 3),
            *_JOB_FLAGS,
        ),
        max_flags=MAX_ADD_FLAGS,
        extra_flags=_EVENTQ_JOB_FLAGS,
        data=_payload(4),
    ),
    # schedule <id> <name> <ttr> <ttl> <time> <size> [flags]; id, name, ttr, ttl, time,
    # max-attempts, max-fails, priority, [eventq] backoff, after, tags.
    "schedule": Command(
        rq.Schedule, 6, 6,
        fields=(
            Field("id", Arg(0), _job_id), _arg(NAME, 1), _arg(TTR, 2), _arg(TTL, 3),
            _arg(TIME, 4, check=_time_plus_ttl_in_future),
            *_JOB_FLAGS,
        ),
        max_flags=MAX_ADD_FLAGS,
        extra_flags=_EVENTQ_JOB_FLAGS,
        data=_payload(5),
    ),
    # run <id> <name> <ttr> <wait-timeout> <size> [-priority=]; id, name, ttr, priority,
    # wait-timeout. [eventq] -after and -tags are unknown to run (docs/workflows.md,
    # "Values and checks": how many flags).
    "run": Command(
        rq.Run, 5, 5,
        fields=(
            Field("id", Arg(0), _job_id), _arg(NAME, 1), _arg(TTR, 2), _flag(PRIORITY),
            Field("wait_timeout_ms", Arg(3), parse_wait_timeout_ms),
        ),
        max_flags=MAX_RUN_FLAGS,
        data=_payload(4),
    ),
    # result <id> <wait-timeout>; id (v4), wait-timeout.
    "result": Command(
        rq.Result, 2, 2,
        fields=(
            Field("id", Arg(0), _job_id),
            Field("wait_timeout_ms", Arg(1), parse_wait_timeout_ms),
        ),
    ),
    # lease <name>... <wait-timeout>; at least one name; wait-timeout, then each name.
    "lease": Command(
        rq.Lease, 2, None,
        fields=(
            Field("wait_timeout_ms", Arg(-1), parse_wait_timeout_ms),
            Field("names", Args(0, -1), parse_name),
        ),
    ),
    # complete <id> <size> + result; fail <id> <size> + result; id (v4).
    "complete": Command(
        rq.Complete, 2, 2,
        fields=(Field("id", Arg(0), _job_id),),
        data=DataBlock(1, INVALID_PAYLOAD_SIZE, "result"),
    ),
    # [eventq] fail takes no flag, or one when it is -group (docs/workflows.md, "Failure groups and
    # retry"; any other flag: Invalid command args, as before); id
    # (v4), group.
    "fail": Command(
        rq.Fail, 2, 2,
        fields=(Field("id", Arg(0), _job_id), Field("group", Flag("group", None), parse_group)),
        extra_flags=frozenset({"group"}),
        data=DataBlock(1, INVALID_RESULT_SIZE, "result"),
    ),
    # delete <id>; [eventq] a valid non-v4 UUID is -NOT-FOUND, so any UUID parses.
    "delete": Command(rq.Delete, 1, 1, fields=(Field("id", Arg(0), _any_id),)),
    # eventq extensions (docs/protocol.md, "eventq extensions"): touch <id> [-ttr=]; id (v4), ttr.
    "touch": Command(
        rq.Touch, 1, 1,
        fields=(Field("id", Arg(0), _job_id), Field("ttr_ms", Flag("ttr", None), parse_ttr_ms)),
        max_flags=ANY_FLAG_COUNT,
    ),
    # pause <name> / resume <name>; no flags.
    "pause": Command(
        rq.Pause, 1, 1, fields=(Field("name", Arg(0), parse_name),), max_flags=ANY_FLAG_COUNT
    ),
    "resume": Command(
        rq.Resume, 1, 1, fields=(Field("name", Arg(0), parse_name),), max_flags=ANY_FLAG_COUNT
    ),
    # eventq extension (docs/workflows.md, "Inputs"): inputs <id>; one positional,
    # then any flag is "Invalid command flags" (no flag count), then the id (v4).
    "inputs": Command(
        rq.Inputs, 1, 1, fields=(Field("id", Arg(0), _job_id),), max_flags=ANY_FLAG_COUNT
    ),
    # eventq extension (docs/security.md, "Tokens and roles"): auth <token>; one
    # positional, then any flag is "Invalid command flags" (no flag count); the token is
    # any word.
    "auth": Command(
        rq.Auth, 1, 1, fields=(Field("token", Arg(0), str),), max_flags=ANY_FLAG_COUNT
    ),
    # eventq extension, internal (docs/architecture.md, "Scaling out";
    # eventq/gateway/peers.py): as <name> [-prefix=<prefix>], the client a peer forwards
    # the next requests for; one positional, each flag judged by its name; name and
    # prefix are names' characters.
    "as": Command(
        rq.As, 1, 1,
        fields=(Field("name", Arg(0), parse_name), Field("prefix", Flag("prefix", None), parse_name)),
        max_flags=ANY_FLAG_COUNT,
    ),
    # eventq extension (docs/workflows.md, "Recurring jobs"): recur <recurrence-name>
    # <job-name> <ttr> <ttl> <every-ms> <size> [flags] + payload; exactly 6 positional
    # (a wrong count closes, as add's), each flag judged by its name (no flag count),
    # the block framed as add's; recurrence-name, job-name, ttr, ttl, every,
    # max-attempts, max-fails, priority, backoff, tags.
    "recur": Command(
        rq.Recur, 6, 6,
        fields=(
            Field("name", Arg(0), parse_name), _arg(NAME.held_as("job_name"), 1),
            _arg(TTR, 2), _arg(TTL, 3), _arg(EVERY, 4),
            *_RECUR_FLAGS,
        ),
        max_flags=ANY_FLAG_COUNT,
        data=_payload(5),
    ),
    # unrecur <recurrence-name>; one positional, any flag "Invalid command flags".
    "unrecur": Command(
        rq.Unrecur, 1, 1, fields=(Field("name", Arg(0), parse_name),), max_flags=ANY_FLAG_COUNT
    ),
    # eventq extensions (docs/workflows.md, "Failure groups and retry"), flags judged
    # by name with no count: retry <id> [-delay=]; id (v4), delay. retry-group <group>
    # <count>; no flag; group, count.
    "retry": Command(
        rq.Retry, 1, 1,
        fields=(Field("id", Arg(0), _job_id), Field("delay_ms", Flag("delay", 0), parse_delay_ms)),
        max_flags=ANY_FLAG_COUNT,
    ),
    "retry-group": Command(
        rq.RetryGroup, 2, 2,
        fields=(Field("group", Arg(0), parse_group), Field("count", Arg(1), parse_count)),
        max_flags=ANY_FLAG_COUNT,
    ),
    # eventq extension, internal: the connection is another eventq process's
    # (docs/architecture.md, "Scaling out").
    "peer": Command(rq.Peer, 0, 0),
    # eventq extension, internal: where each name's best ready job stands.
    "peek": Command(rq.Peek, 1, None, fields=(Field("names", Args(0, None), parse_name),)),
    # eventq extension, internal, peers only: take a claim offered for a lease
    # (docs/fencing.md, "A claim made for another process: offered, then confirmed").
    "confirm": Command(
        rq.Confirm, 2, 2, fields=(Field("id", Arg(0), _job_id), Field("claim", Arg(1), parse_claim))
    ),
    # eventq extension, internal, peers only: the reply to a command another process
    # wrote and lost the partition of before it applied it (docs/architecture.md,
    # "Abandoned commands").
    "outcome": Command(
        rq.Outcome, 3, 3, fields=(Field("node", Arg(0), parse_name),
                                  Field("request_id", Arg(1), parse_claim),
                                  Field("wait_ms", Arg(2), parse_wait_timeout_ms))
    ),
    # eventq extension, internal: a job's upstreams and registered dependents, from the
    # owner of its partition (the dashboard's job page).
    "edges": Command(
        rq.Edges, 2, 2, fields=(Field("id", Arg(0), _any_id), Field("limit", Arg(1), parse_limit))
    ),
    "inspect": Subcommands({
        "server": Command(rq.InspectServer, 0, 0),
        "queues": Command(
            rq.InspectQueues, 2, 2,
            fields=(
                Field("offset", Arg(0), parse_cursor_offset),
                Field("limit", Arg(1), parse_limit),
            ),
        ),
        "queue": Command(rq.InspectQueue, 1, 1, fields=(Field("name", Arg(0), parse_name),)),
        "jobs": Command(
            rq.InspectJobs, 3, 3,
            fields=(
                Field("name", Arg(0), parse_name),
                Field("offset", Arg(1), parse_cursor_offset),
                Field("limit", Arg(2), parse_limit),
            ),
        ),
        "scheduled-jobs": Command(
            rq.InspectScheduledJobs, 3, 3,
            fields=(
                Field("name", Arg(0), parse_name),
                Field("offset", Arg(1), parse_cursor_offset),
                Field("limit", Arg(2), parse_limit),
            ),
        ),
        # eventq extension (docs/workflows.md, "Dependencies"): as inspect jobs, same
        # checks in the same order; flags are "Invalid command args" like every object's.
        "waiting-jobs": Command(
            rq.InspectWaitingJobs, 3, 3,
            fields=(
                Field("name", Arg(0), parse_name),
                Field("offset", Arg(1), parse_cursor_offset),
                Field("limit", Arg(2), parse_limit),
            ),
        ),
        # eventq extension (docs/workflows.md, "Tags"): tag (Invalid Tags), offset,
        # limit; flags are "Invalid command args" like every object's.
        "tagged": Command(
            rq.InspectTagged, 3, 3,
            fields=(
                Field("tag", Arg(0), parse_tag),
                Field("offset", Arg(1), parse_cursor_offset),
                Field("limit", Arg(2), parse_limit),
            ),
        ),
        # eventq extensions (docs/workflows.md, "Failure groups and retry"): failed as
        # inspect queues; failed-jobs: group, offset, limit.
        "failed": Command(
            rq.InspectFailed, 2, 2,
            fields=(
                Field("offset", Arg(0), parse_cursor_offset),
                Field("limit", Arg(1), parse_limit),
            ),
        ),
        "failed-jobs": Command(
            rq.InspectFailedJobs, 3, 3,
            fields=(
                Field("group", Arg(0), parse_group),
                Field("offset", Arg(1), parse_cursor_offset),
                Field("limit", Arg(2), parse_limit),
            ),
        ),
        "job": Command(rq.InspectJob, 1, 1, fields=(Field("id", Arg(0), _any_id),)),
        # eventq extension: a digest of the whole job state.
        "digest": Command(rq.InspectDigest, 0, 0),
        # eventq extension: where the bulk lane stands (docs/architecture.md, "Lanes").
        "bulk": Command(rq.InspectBulk, 0, 0),
        # eventq extension (docs/workflows.md, "Recurring jobs"): as inspect queues.
        "recurring": Command(
            rq.InspectRecurring, 2, 2,
            fields=(
                Field("offset", Arg(0), parse_cursor_offset),
                Field("limit", Arg(1), parse_limit),
            ),
        ),
    }),
}
# fmt: on


def _verbs(grammar: Mapping[str, Command | Subcommands]) -> dict[type, str]:
    verbs = {}
    for verb, entry in grammar.items():
        if isinstance(entry, Subcommands):
            verbs.update({c.request: f"{verb} {obj}" for obj, c in entry.commands.items()})
        else:
            verbs[entry.request] = verb
    return verbs


VERB_OF: Mapping[type, str] = _verbs(GRAMMAR)
"""Each request type's words in the protocol (``InspectScheduledJobs`` -> ``inspect
scheduled-jobs``): the metrics' label for its requests."""
