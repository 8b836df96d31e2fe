"""Properties of the parser: it never raises, chunking never matters, and every valid
request survives serialize → parse."""

from __future__ import annotations

import typing
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from eventq.errors import EventqError
from eventq.limits import MAX_NAME_BYTES, MAX_RETRY_COUNT, MAX_RETRY_DELAY_MS, MIN_RETRY_COUNT
from eventq.protocol import (
    Add,
    Close,
    Complete,
    Delete,
    Fail,
    InspectBulk,
    InspectDigest,
    InspectJob,
    InspectJobs,
    InspectQueue,
    InspectQueues,
    InspectScheduledJobs,
    InspectServer,
    Lease,
    Result,
    Run,
    Schedule,
    canonical_id,
)
from eventq.protocol.encode import encode_request
from eventq.protocol.requests import (
    Confirm,
    Edges,
    Inputs,
    InspectFailed,
    InspectFailedJobs,
    InspectWaitingJobs,
    Outcome,
    Pause,
    Peek,
    Peer,
    Request,
    Resume,
    Retry,
    RetryGroup,
    Touch,
)
from support.protocol_helpers import (
    NOW_MS,
    closes,
    events_in_chunks,
    events_whole,
    jobs_with_after,
    serialize,
    split_at,
)

REQUEST_TYPES = typing.get_args(Request)

# --- arbitrary input ------------------------------------------------------------------

# Fragments that steer random input into the interesting corners of the grammar.
# fmt: off
FRAGMENTS = [
    b"add", b"schedule", b"run", b"result", b"lease", b"complete", b"fail", b"delete",
    b"inspect", b"server", b"queues", b"queue", b"jobs", b"scheduled-jobs", b"job",
    b"digest", b" ", b"  ", b"\r\n", b"\n", b"\r", b"\t", b"-", b"=", b"-priority=",
    b"-max-attempts=", b"-max-fails=", b"-backoff=", b"touch", b"pause", b"resume", b"-ttr=",
    b"-x=", b"0", b"1", b"4", b"+5", b"-1", b"255",
    b"1048576", b"86400000", b"18446744073709551616", b"2016-06-14T06:46:46Z",
    b"2016-06-14T06:46:46.5Z", b"6ba7b810-9dad-41d1-80b4-00c04fd430c4",
    b"6ba7b8109dad11d180b400c04fd430c4", b"{", b"}", b"urn:uuid:", b"ping", b"p!",
    b"pong", b"\x00", b"\xff", "é".encode(),
    # [eventq] docs/workflows.md, "Dependencies" and "Inputs"
    b"-after=", b",", b"inputs", b"waiting-jobs", b"-tags=", b"retry", b"edges",
]
# fmt: on

protocolish = st.lists(
    st.one_of(st.sampled_from(FRAGMENTS), st.binary(max_size=8)), max_size=60
).map(b"".join)
any_input = st.one_of(st.binary(max_size=400), protocolish)
cuts = st.lists(st.integers(min_value=0, max_value=10_000), max_size=12)


def _check_events(events: list[object], closed: bool) -> None:
    for index, event in enumerate(events):
        assert isinstance(event, (*REQUEST_TYPES, EventqError, Close)), event
        if closes(event):
            assert index == len(events) - 1, "nothing may follow a closing event"
            assert closed
    assert closed == any(closes(e) for e in events)


@settings(max_examples=400)
@given(data=any_input, cut_points=cuts)
def test_arbitrary_bytes_only_produce_events_whatever_the_chunking(
        data: bytes, cut_points: list[int]) -> None:
    whole = events_whole(data)
    _check_events(*whole)
    assert events_in_chunks(data, split_at(data, cut_points)) == whole


@settings(max_examples=50)
@given(st.binary(min_size=1, max_size=64), st.integers(min_value=1, max_value=5))
def test_arbitrary_bytes_byte_by_byte_match_whole(data: bytes, repeat: int) -> None:
    data = data * repeat
    chunks = [data[i : i + 1] for i in range(len(data))]
    assert events_in_chunks(data, chunks) == events_whole(data)


# --- valid requests -------------------------------------------------------------------

names = st.text(alphabet="abcXYZ019_.-", min_size=1, max_size=12) | st.just("n" * MAX_NAME_BYTES)
v4_ids = st.uuids(version=4)
any_ids = st.uuids() | v4_ids
payloads = st.binary(max_size=64) | st.sampled_from([b"", b"\r\n", b"\n", b"a\r\nb", b"add x\r\n"])
ttrs = st.integers(1, 86_400_000)
ttls = st.integers(1, 2**64 - 1)
waits = st.integers(0, 86_400_000)
priorities = st.integers(-(2**31), 2**31 - 1)
counts = st.integers(0, 255)
offsets = st.integers(0, 2**32 - 1)
limits = st.integers(1, 100)
backoffs = st.just(0) | st.integers(0, 86_400_000)
MAX_TIME_MS = 253_402_300_799_999  # 9999-12-31T23:59:59.999Z


@st.composite
def schedules(draw: st.DrawFn) -> Schedule:
    ttl = draw(ttls)
    time_ms = draw(st.integers(max(0, NOW_MS - ttl + 1), MAX_TIME_MS))  # time + ttl > now
    return Schedule(
        draw(v4_ids), draw(names), draw(ttrs), ttl, time_ms, draw(payloads),
        draw(priorities), draw(counts), draw(counts), draw(backoffs),
    )


requests_ = st.one_of(
    st.builds(Add, v4_ids, names, ttrs, ttls, payloads, priorities, counts, counts, backoffs),
    schedules(),
    st.builds(Run, v4_ids, names, ttrs, waits, payloads, priorities),
    st.builds(Result, v4_ids, waits),
    st.builds(Lease, st.lists(names, min_size=1, max_size=5).map(tuple), waits),
    st.builds(Complete, v4_ids, payloads),
    st.builds(Fail, v4_ids, payloads),
    st.builds(Delete, any_ids),
    st.just(InspectServer()),
    st.builds(InspectQueues, offsets, limits),
    st.builds(InspectQueue, names),
    st.builds(InspectJobs, names, offsets, limits),
    st.builds(InspectScheduledJobs, names, offsets, limits),
    st.builds(InspectJob, any_ids),
    st.just(InspectDigest()),
    st.just(InspectBulk()),
    st.just(Peer()),
    st.builds(Peek, st.lists(names, min_size=1, max_size=5).map(tuple)),
    st.builds(Confirm, v4_ids, st.integers(min_value=0, max_value=2**63 - 1)),
    st.builds(Outcome, names, st.integers(min_value=0, max_value=2**63 - 1), waits),
    st.builds(Edges, any_ids, limits),
    st.builds(Touch, v4_ids, st.none() | ttrs),
    st.builds(Pause, names),
    st.builds(Resume, names),
    # [eventq] docs/workflows.md, "Dependencies" and "Inputs"
    jobs_with_after(),
    st.builds(Inputs, v4_ids),
    st.builds(InspectWaitingJobs, names, offsets, limits),
    # [eventq] docs/workflows.md, "Failure groups and retry" (groups are names by their rule)
    st.builds(Fail, v4_ids, payloads, names),
    st.builds(Retry, v4_ids, st.integers(0, MAX_RETRY_DELAY_MS)),
    st.builds(RetryGroup, names, st.integers(MIN_RETRY_COUNT, MAX_RETRY_COUNT)),
    st.builds(InspectFailed, offsets, limits),
    st.builds(InspectFailedJobs, names, offsets, limits),
)


def _id_spellings(value: uuid.UUID) -> list[str]:
    text = canonical_id(value)
    bare = text.replace("-", "")
    return [text, text.upper(), bare, "{%s}" % text, "urn:uuid:" + bare, bare[:8] + "-" + bare[8:]]


@st.composite
def wire_forms(draw: st.DrawFn, request: Request) -> bytes:
    """One of the many valid spellings of ``request``."""
    spelling = draw(st.integers(0, 5))
    return serialize(
        request,
        fmt_id=lambda value: _id_spellings(value)[spelling],
        flag_slots=draw(st.lists(st.integers(0, 10), max_size=3)),
        explicit_defaults=draw(st.booleans()),
        separator=draw(st.sampled_from([" ", "  ", "   "])),
    )


@given(st.data())
def test_serialize_then_parse_round_trips(data: st.DataObject) -> None:
    request = data.draw(requests_)
    wire = data.draw(wire_forms(request))
    assert events_whole(wire) == ([request], False)


@given(st.lists(requests_, min_size=1, max_size=8), cuts)
def test_pipelined_requests_parse_in_order_in_any_chunking(
        batch: list[Request], cut_points: list[int]) -> None:
    wire = b"".join(serialize(request) for request in batch)
    assert events_in_chunks(wire, split_at(wire, cut_points)) == (batch, False)


@given(st.lists(requests_, min_size=1, max_size=8), cuts)
def test_encoded_requests_parse_back_to_themselves(batch: list[Request], cut_points: list[int]) -> None:
    """What a gateway forwards to another process (docs/architecture.md, "Scaling out")
    is the request it got."""
    wire = b"".join(encode_request(request) for request in batch)
    assert events_whole(wire) == (batch, False)
    assert events_in_chunks(wire, split_at(wire, cut_points)) == (batch, False)
