"""Test helpers for the protocol parser: feeding, draining, and a request serializer."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence

from hypothesis import strategies as st

from eventq.errors import EventqError
from eventq.limits import MAX_AFTER_IDS
from eventq.protocol import (
    Add,
    Close,
    Complete,
    Confirm,
    Delete,
    Edges,
    Fail,
    Inputs,
    InspectBulk,
    InspectDigest,
    InspectFailed,
    InspectFailedJobs,
    InspectJob,
    InspectJobs,
    InspectQueue,
    InspectQueues,
    InspectScheduledJobs,
    InspectServer,
    InspectTagged,
    InspectWaitingJobs,
    Lease,
    Outcome,
    Parser,
    Pause,
    Peek,
    Peer,
    Request,
    Result,
    Resume,
    Retry,
    RetryGroup,
    Run,
    Schedule,
    Touch,
    canonical_id,
    format_time,
)

NOW_MS = 1_465_886_806_000  # 2016-06-14T06:46:46Z, the clock of every test parser

V4_ID = uuid.UUID("6ba7b810-9dad-41d1-80b4-00c04fd430c4")
V4_TEXT = canonical_id(V4_ID)
V1_TEXT = "6ba7b810-9dad-11d1-80b4-00c04fd430c4"  # valid UUID, version 1

# A request that may follow anything that leaves the stream in step.
TRAILER = b"inspect server\r\n"
TRAILER_EVENT = InspectServer()


def new_parser(now_ms: int = NOW_MS) -> Parser:
    return Parser(lambda: now_ms)


def drain(parser: Parser) -> list[object]:
    events = []
    while (event := parser.next_event()) is not None:
        events.append(event)
    return events


def events_in_chunks(data: bytes, chunks: Iterable[bytes], now_ms: int = NOW_MS) -> tuple[list[object], bool]:
    """Feed ``chunks`` one by one, draining after each; the events and ``closed``."""
    parser = new_parser(now_ms)
    events: list[object] = []
    for chunk in chunks:
        parser.feed(chunk)
        events.extend(drain(parser))
    assert parser.next_event() is None
    return events, parser.closed


def events_whole(data: bytes, now_ms: int = NOW_MS) -> tuple[list[object], bool]:
    return events_in_chunks(data, [data], now_ms)


def events_bytewise(data: bytes, now_ms: int = NOW_MS) -> tuple[list[object], bool]:
    return events_in_chunks(data, (data[i : i + 1] for i in range(len(data))), now_ms)


def split_at(data: bytes, cuts: Iterable[int]) -> list[bytes]:
    """``data`` cut at the given offsets (any order, duplicates allowed)."""
    points = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    return [data[a:b] for a, b in zip(points, points[1:])]


def closes(event: object) -> bool:
    return isinstance(event, Close) or (isinstance(event, EventqError) and event.closes_connection)


def assert_parses_three_ways(wire: bytes, expected: object) -> None:
    """``wire`` is one request: fed whole, byte by byte, and followed by another
    request, it yields ``expected`` (and then the other request, if still in step)."""
    for feed in (events_whole, events_bytewise):
        events, closed = feed(wire)
        assert events == [expected], feed.__name__
        assert closed == closes(expected)
    events, closed = events_whole(wire + TRAILER)
    if closes(expected):
        assert (events, closed) == ([expected], True)
    else:
        assert (events, closed) == ([expected, TRAILER_EVENT], False)


def assert_error(wire: bytes, error: EventqError) -> None:
    """``wire`` yields ``error``; a closing error ends the stream, any other keeps it
    in step (what follows still parses, whether fed whole or byte by byte)."""
    assert_parses_three_ways(wire, error)
    for feed in (events_whole, events_bytewise):
        events, closed = feed(wire + TRAILER + TRAILER)
        if error.closes_connection:
            assert (events, closed) == ([error], True)
        else:
            assert (events, closed) == ([error, TRAILER_EVENT, TRAILER_EVENT], False)


# --- a small request serializer (the inverse of the parser) ---------------------------

IdFormat = Callable[[uuid.UUID], str]


Flags = dict[str, int | str]


def _words_and_flags(request: Request, fmt_id: IdFormat) -> tuple[list[str], Flags, bytes | None]:
    """The words after the verb, the flags, and the data block of a request."""
    match request:
        case Add(id, name, ttr, ttl, payload, priority, max_attempts, max_fails, backoff, after,
                 tags):
            words = ["add", fmt_id(id), name, str(ttr), str(ttl), str(len(payload))]
            flags = _job_flags(priority, max_attempts, max_fails, backoff, after, fmt_id, tags)
            return words, flags, payload
        case Schedule(id, name, ttr, ttl, time_ms, payload, priority, max_attempts, max_fails, backoff,
                      after, tags):
            words = ["schedule", fmt_id(id), name, str(ttr), str(ttl), _time(time_ms), str(len(payload))]
            flags = _job_flags(priority, max_attempts, max_fails, backoff, after, fmt_id, tags)
            return words, flags, payload
        case Inputs(id):
            return ["inputs", fmt_id(id)], {}, None
        case Touch(id, ttr):
            return ["touch", fmt_id(id)], ({} if ttr is None else {"ttr": ttr}), None
        case Pause(name):
            return ["pause", name], {}, None
        case Resume(name):
            return ["resume", name], {}, None
        case Run(id, name, ttr, wait, payload, priority):
            words = ["run", fmt_id(id), name, str(ttr), str(wait), str(len(payload))]
            return words, {"priority": priority}, payload
        case Result(id, wait):
            return ["result", fmt_id(id), str(wait)], {}, None
        case Lease(names, wait):
            return ["lease", *names, str(wait)], {}, None
        case Complete(id, result):
            return ["complete", fmt_id(id), str(len(result))], {}, result
        case Fail(id, result, group):
            return ["fail", fmt_id(id), str(len(result))], ({} if group is None else {
                "group": group}), result
        case Retry(id, delay):
            return ["retry", fmt_id(id)], ({"delay": delay} if delay else {}), None
        case RetryGroup(group, count):
            return ["retry-group", group, str(count)], {}, None
        case InspectFailed(offset, limit):
            return ["inspect", "failed", str(offset), str(limit)], {}, None
        case InspectFailedJobs(group, offset, limit):
            return ["inspect", "failed-jobs", group, str(offset), str(limit)], {}, None
        case Delete(id):
            return ["delete", fmt_id(id)], {}, None
        case InspectServer():
            return ["inspect", "server"], {}, None
        case InspectDigest():
            return ["inspect", "digest"], {}, None
        case InspectBulk():
            return ["inspect", "bulk"], {}, None
        case Peer():
            return ["peer"], {}, None
        case Peek(names):
            return ["peek", *names], {}, None
        case Confirm(id, claim):
            return ["confirm", fmt_id(id), str(claim)], {}, None
        case Outcome(node, request_id, wait_ms):
            return ["outcome", node, str(request_id), str(wait_ms)], {}, None
        case Edges(id, limit):
            return ["edges", fmt_id(id), str(limit)], {}, None
        case InspectQueues(offset, limit):
            return ["inspect", "queues", str(offset), str(limit)], {}, None
        case InspectQueue(name):
            return ["inspect", "queue", name], {}, None
        case InspectJobs(name, offset, limit):
            return ["inspect", "jobs", name, str(offset), str(limit)], {}, None
        case InspectScheduledJobs(name, offset, limit):
            return ["inspect", "scheduled-jobs", name, str(offset), str(limit)], {}, None
        case InspectWaitingJobs(name, offset, limit):
            return ["inspect", "waiting-jobs", name, str(offset), str(limit)], {}, None
        case InspectTagged(tag, offset, limit):
            return ["inspect", "tagged", tag, str(offset), str(limit)], {}, None
        case InspectJob(id):
            return ["inspect", "job", fmt_id(id)], {}, None
    raise TypeError(request)


def _job_flags(priority: int, max_attempts: int, max_fails: int, backoff: int = 0,
               after: tuple[uuid.UUID, ...] = (), fmt_id: IdFormat = canonical_id,
               tags: tuple[str, ...] = ()) -> Flags:
    flags: Flags = {"priority": priority, "max-attempts": max_attempts, "max-fails": max_fails}
    if backoff:  # [eventq] a fourth flag, only when given (workq clients never send it)
        flags["backoff"] = backoff
    if after:  # [eventq] one more, only when given; each id spelled by fmt_id
        flags["after"] = ",".join(map(fmt_id, after))
    if tags:  # [eventq] one more, only when given, in -tags order
        flags["tags"] = ",".join(tags)
    return flags


def _time(ms: int) -> str:
    text = format_time(ms)
    return text if ms % 1000 == 0 else f"{text[:-1]}.{ms % 1000:03d}Z"


def serialize(
    request: Request,
    fmt_id: IdFormat = canonical_id,
    flag_slots: Sequence[int] = (),
    explicit_defaults: bool = False,
    separator: str = " ",
) -> bytes:
    """The wire form of ``request``.

    Flags equal to their default 0 are left out unless ``explicit_defaults``. The
    ``i``-th flag is placed after word ``flag_slots[i] % len(words)`` (word 0 is the
    verb, so a flag never precedes it); words are joined with ``separator`` (one or more spaces).
    """
    words, flags, block = _words_and_flags(request, fmt_id)
    tokens = [[word] for word in words]
    present = [(k, v) for k, v in flags.items() if v != 0 or explicit_defaults]
    for index, (key, value) in enumerate(present):
        slot = flag_slots[index] if index < len(flag_slots) else len(words) - 1
        tokens[slot % len(words)].append(f"-{key}={value}")
    line = separator.join(token for group in tokens for token in group)
    wire = line.encode("latin-1") + b"\r\n"
    return wire if block is None else wire + block + b"\r\n"


names = st.text(alphabet="abcXYZ019_.-", min_size=1, max_size=12)
v4_ids = st.uuids(version=4)


@st.composite
def jobs_with_after(draw: st.DrawFn) -> Add | Schedule:
    """A valid add or schedule with 1-100 distinct upstreams, none the job itself."""
    own = draw(v4_ids)
    after = tuple(draw(st.lists(v4_ids.filter(lambda u: u != own), min_size=1,
                                max_size=MAX_AFTER_IDS, unique=True)))
    flags = dict(priority=draw(st.integers(-(2**31), 2**31 - 1)),
                 max_attempts=draw(st.integers(0, 255)), max_fails=draw(st.integers(0, 255)),
                 backoff_ms=draw(st.integers(0, 86_400_000)), after=after)
    payload = draw(st.binary(max_size=16))
    ttl = draw(st.integers(1, 2**64 - 1))
    if draw(st.booleans()):
        return Add(own, draw(names), draw(st.integers(1, 86_400_000)), ttl, payload, **flags)
    time_ms = draw(st.integers(max(0, NOW_MS - ttl + 1), 253_402_300_799_999))
    return Schedule(own, draw(names), draw(st.integers(1, 86_400_000)), ttl, time_ms, payload,
                    **flags)
