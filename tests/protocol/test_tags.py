"""The protocol's part of docs/workflows.md, "Tags", tags: ``-tags`` on add and
schedule (last in field order, with the flag count of "Values and checks"), unknown to
``run``; ``inspect tagged <tag> <cursor-offset> <limit>``; the job block's ``tags`` key.
Every check and its order, the exact error texts, each input whole, byte by byte and
followed by more (helpers.assert_parses_three_ways / assert_error)."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventq.errors import (
    INVALID_AFTER,
    INVALID_BACKOFF,
    INVALID_COMMAND_ARGS,
    INVALID_COMMAND_FLAGS,
    INVALID_CURSOR_OFFSET,
    INVALID_ID,
    INVALID_LIMIT,
    INVALID_MAX_ATTEMPTS,
    INVALID_MAX_FAILS,
    INVALID_NAME,
    INVALID_PAYLOAD_SIZE,
    INVALID_PRIORITY,
    INVALID_TAGS,
    INVALID_TIME,
    INVALID_TTL,
    INVALID_TTR,
    UNKNOWN_COMMAND,
    ClientError,
    FramingError,
)
from eventq.limits import MAX_TAG_BYTES, MAX_TAGS
from eventq.protocol import (
    Add,
    InspectJobs,
    InspectTagged,
    JobView,
    Schedule,
    canonical_id,
    job_blocks,
    parse_time_ms,
)
from eventq.protocol.encode import encode_request
from eventq.protocol.grammar import VERB_OF
from eventq.protocol.replies import job_blocks_stream, ordered_job_blocks
from eventq.protocol.reply_reader import Shape, blocks_reply, parse_blocks, reply_end
from support.protocol_helpers import (
    NOW_MS,
    V1_TEXT,
    V4_ID,
    V4_TEXT,
    assert_error,
    assert_parses_three_ways,
    events_whole,
    serialize,
)

ID = V4_TEXT
C = ClientError
F = FramingError
BLOCK = b"inspect server\r\n"  # a block that is itself a request: it must be consumed
SIZE = str(len(BLOCK))
T_2016 = NOW_MS  # 2016-06-14T06:46:46Z
U1 = uuid.UUID(int=(0x1 << 124) | 1, version=4)
LONGEST = tuple(f"{n:02d}" + "t" * (MAX_TAG_BYTES - 2) for n in range(MAX_TAGS))


def block_request(line: str, block: bytes = BLOCK) -> bytes:
    return line.encode("latin-1") + b"\r\n" + block + b"\r\n"


def test_an_invalid_tags_reply_is_byte_exact() -> None:
    assert ClientError(INVALID_TAGS).reply == b"-CLIENT-ERROR Invalid Tags\r\n"


# --- valid requests -------------------------------------------------------------------

# fmt: off
CASES = [
    (f"add {ID} p 1 1 4 -tags=nightly\r\npong\r\n",
     Add(V4_ID, "p", 1, 1, b"pong", tags=("nightly",))),
    # -tags order is kept, the flag anywhere on the line
    (f"add -tags=b,a.1,Z-_ {ID} p 1 1 0\r\n\r\n", Add(V4_ID, "p", 1, 1, b"", tags=("b", "a.1", "Z-_"))),
    # 16 tags of 64 bytes
    (f"add {ID} p 1 1 0 -tags={','.join(LONGEST)}\r\n\r\n", Add(V4_ID, "p", 1, 1, b"", tags=LONGEST)),
    # 3 workq flags + -tags: 4 flags
    (f"add {ID} p 1 1 0 -priority=1 -max-attempts=2 -max-fails=3 -tags=x\r\n\r\n",
     Add(V4_ID, "p", 1, 1, b"", 1, 2, 3, tags=("x",))),
    # 3 workq flags + -backoff + -after + -tags: 6 flags
    (f"add {ID} p 1 1 0 -tags=x,y -priority=1 -max-attempts=2 -max-fails=3 -backoff=4 "
     f"-after={U1}\r\n\r\n",
     Add(V4_ID, "p", 1, 1, b"", 1, 2, 3, 4, (U1,), ("x", "y"))),
    # 3 workq flags + -backoff + -tags: 5 flags
    (f"add {ID} p 1 1 0 -priority=1 -max-attempts=2 -max-fails=3 -backoff=4 -tags=x\r\n\r\n",
     Add(V4_ID, "p", 1, 1, b"", 1, 2, 3, 4, tags=("x",))),
    # the value ends at a second '=' (docs/protocol.md, "Connections and framing"), as for every flag
    (f"add {ID} p 1 1 0 -tags=a,b=c\r\n\r\n", Add(V4_ID, "p", 1, 1, b"", tags=("a", "b"))),
    # a tag that looks like a number or a flag's name is a tag
    (f"add {ID} p 1 1 0 -tags=0,-,.,priority\r\n\r\n",
     Add(V4_ID, "p", 1, 1, b"", tags=("0", "-", ".", "priority"))),
    (f"schedule {ID} p 1 1 2016-06-14T06:46:46Z 1 -tags=etl,nightly\r\nx\r\n",
     Schedule(V4_ID, "p", 1, 1, T_2016, b"x", tags=("etl", "nightly"))),
    (f"schedule {ID} p 1 1 2016-06-14T06:46:46Z 0 -after={U1} -backoff=5 -priority=-1 "
     f"-max-attempts=0 -max-fails=255 -tags=t\r\n\r\n",
     Schedule(V4_ID, "p", 1, 1, T_2016, b"", -1, 0, 255, 5, (U1,), ("t",))),
    # inspect tagged
    ("inspect tagged nightly 0 10\r\n", InspectTagged("nightly", 0, 10)),
    ("inspect tagged  a.b-c_D 4294967295 100\r\n", InspectTagged("a.b-c_D", 2**32 - 1, 100)),
    ("inspect tagged p 007 01\r\n", InspectTagged("p", 7, 1)),
    (f"inspect tagged {'t' * MAX_TAG_BYTES} 0 1\r\n", InspectTagged("t" * MAX_TAG_BYTES, 0, 1)),
    ("inspect tagged 0 0 1\r\n", InspectTagged("0", 0, 1)),
]
# fmt: on


@pytest.mark.parametrize(("wire", "expected"), CASES, ids=[c[0][:48] for c in CASES])
def test_valid_request(wire: str, expected: object) -> None:
    assert_parses_three_ways(wire.encode("latin-1"), expected)


def test_the_new_request_is_named_by_its_protocol_words() -> None:
    assert VERB_OF[InspectTagged] == "inspect tagged"


def test_a_request_without_tags_is_what_it_was() -> None:
    assert Add(V4_ID, "p", 1, 1, b"").tags == ()
    assert Schedule(V4_ID, "p", 1, 1, 0, b"").tags == ()
    assert events_whole(f"add {ID} p 1 1 0\r\n\r\n".encode())[0] == [Add(V4_ID, "p", 1, 1, b"")]
    # the gateway's encoding writes no -tags for a job without
    assert b"-tags" not in encode_request(Add(V4_ID, "p", 1, 1, b""))


# --- errors and the check order -------------------------------------------------------

# fmt: off
BAD_TAGS = [
    ",a", "a,", "a,,b", ",", ",,",  # empty elements
    "a,b,a", "x,x",  # a tag twice
    ",".join(f"t{n}" for n in range(MAX_TAGS + 1)),  # 17 tags
    "t" * (MAX_TAG_BYTES + 1), f"a,{'t' * (MAX_TAG_BYTES + 1)}",  # 65 bytes
    "a:b", "a;b", "a/b", "a*", "é", "a\tb", "{a}", "a\x00", "\x7f",
]
# fmt: on


@pytest.mark.parametrize("value", BAD_TAGS)
def test_a_bad_tags_value_is_invalid_tags(value: str) -> None:
    assert_error(f"add {ID} p 1 1 0 -tags={value}\r\n\r\n".encode("latin-1"), C(INVALID_TAGS))
    assert_error(block_request(f"schedule {ID} p 1 1 2030-01-01T00:00:00Z {SIZE} -tags={value}"),
                 C(INVALID_TAGS))


@pytest.mark.parametrize("value", [v for v in BAD_TAGS if "," not in v] + ["a,b", "a,a"])
def test_a_bad_tag_of_inspect_tagged_is_invalid_tags(value: str) -> None:
    """One tag, as a -tags element (so a list of two is no tag)."""
    assert_error(f"inspect tagged {value} 0 1\r\n".encode("latin-1"), C(INVALID_TAGS))


# fmt: off
ERRORS = [
    # check 1: flag syntax, before everything
    (block_request(f"add {ID} p 1 1 {SIZE} -tags= "), C(INVALID_COMMAND_FLAGS)),
    (block_request(f"add {ID} p 1 1 {SIZE} -tags=a -tags=b"), C(INVALID_COMMAND_FLAGS)),
    (b"inspect tagged -x= a\r\n", C(INVALID_COMMAND_FLAGS)),
    # check 3: flag counts. 3, plus one each for -backoff, -after and -tags among them.
    (block_request(f"add {ID} p 1 1 {SIZE} -priority=1 -max-attempts=1 -max-fails=1 "
                   f"-tags=a -x=1"), C(INVALID_COMMAND_ARGS)),
    (block_request(f"add {ID} p 1 1 {SIZE} -priority=1 -max-attempts=1 -max-fails=1 "
                   f"-tags=a -backoff=1 -x=1"), C(INVALID_COMMAND_ARGS)),
    (block_request(f"add {ID} p 1 1 {SIZE} -priority=1 -max-attempts=1 -max-fails=1 "
                   f"-tags=a -backoff=1 -after={U1} -x=1"), C(INVALID_COMMAND_ARGS)),
    (block_request(f"schedule {ID} p 1 1 2030-01-01T00:00:00Z {SIZE} -priority=1 "
                   f"-max-attempts=1 -max-fails=1 -tags=a -x=1"), C(INVALID_COMMAND_ARGS)),
    # a bad -tags value still counts (the count is check 3, the value check 6)
    (block_request(f"add {ID} p 1 1 {SIZE} -priority=1 -max-attempts=1 -max-fails=1 "
                   f"-tags=a,a -x=1"), C(INVALID_COMMAND_ARGS)),
    # within the count, an unknown name is check 4
    (block_request(f"add {ID} p 1 1 {SIZE} -priority=1 -max-attempts=1 -tags=a -x=1"),
     C(INVALID_COMMAND_FLAGS)),
    (block_request(f"add {ID} p 1 1 {SIZE} -tags=a -tag=b"), C(INVALID_COMMAND_FLAGS)),
    (block_request(f"add {ID} p 1 1 {SIZE} -Tags=a"), C(INVALID_COMMAND_FLAGS)),
    # a line without eventq flags is judged as workq judges it: 4 flags are too many
    (block_request(f"add {ID} p 1 1 {SIZE} -priority=1 -max-attempts=1 -max-fails=1 -x=1"),
     C(INVALID_COMMAND_ARGS)),
    # run: -tags is unknown (one flag: flags), and one flag too many with another
    (block_request(f"run {ID} p 1 1 {SIZE} -tags=a"), C(INVALID_COMMAND_FLAGS)),
    (block_request(f"run {ID} p 1 1 {SIZE} -tags=a,a"), C(INVALID_COMMAND_FLAGS)),
    (block_request(f"run {ID} p 1 1 {SIZE} -tags=a -priority=1"), C(INVALID_COMMAND_ARGS)),
    (block_request(f"run {ID} p 1 1 {SIZE} -priority=1 -tags=a"), C(INVALID_COMMAND_ARGS)),
    (block_request(f"run {ID} p 1 1 {SIZE} -tags=a -after={U1}"), C(INVALID_COMMAND_ARGS)),
    # check 5, framing, before the fields: a bad -tags does not save the stream
    (block_request(f"add {ID} p 1 1 x -tags=a,a"), F(INVALID_PAYLOAD_SIZE)),
    (block_request(f"add {ID} p 1 {SIZE} -tags=a"), F(INVALID_COMMAND_ARGS)),
    # check 6: every field before -tags, -after right before it
    (block_request(f"add {V1_TEXT} p 1 1 {SIZE} -tags=a,a"), C(INVALID_ID)),
    (block_request(f"add {ID} p 1 1 {SIZE} -tags=a,a -after={ID}"), C(INVALID_AFTER)),
    (block_request(f"add {ID} p 1 1 {SIZE} -tags=a,a -backoff=x"), C(INVALID_BACKOFF)),
    # -tags elsewhere: fail takes no flag (args), complete none (args), touch judges names
    (block_request(f"fail {ID} {SIZE} -tags=a"), C(INVALID_COMMAND_ARGS)),
    (f"touch {ID} -tags=a\r\n".encode(), C(INVALID_COMMAND_FLAGS)),
    (f"inputs {ID} -tags=a\r\n".encode(), C(INVALID_COMMAND_FLAGS)),
    # inspect tagged: counts, flags (Invalid command args, as every object), fields
    (b"inspect tagged\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect tagged a\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect tagged a 0\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect tagged a 0 1 2\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect tagged a 0 1 -x=1\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect tagged a 0 1 -tags=a\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect tagged bad! 0 -x=1\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect tagged p: 0 1\r\n", C(INVALID_TAGS)),
    (b"inspect tagged a,b x x\r\n", C(INVALID_TAGS)),
    (f"inspect tagged {'t' * (MAX_TAG_BYTES + 1)} 0 1\r\n".encode(), C(INVALID_TAGS)),
    (b"inspect tagged p 4294967296 1\r\n", C(INVALID_CURSOR_OFFSET)),
    (b"inspect tagged p -1 1\r\n", C(INVALID_CURSOR_OFFSET)),  # "-1": no "=", so a word
    (b"inspect tagged p x 0\r\n", C(INVALID_CURSOR_OFFSET)),
    (b"inspect tagged p 0 101\r\n", C(INVALID_LIMIT)),
    (b"inspect tagged p 0 0\r\n", C(INVALID_LIMIT)),
    (b"inspect Tagged p 0 1\r\n", C(UNKNOWN_COMMAND)),
    (b"inspect tags p 0 1\r\n", C(UNKNOWN_COMMAND)),
    (b"tagged p 0 1\r\n", C(UNKNOWN_COMMAND)),
]
# fmt: on


@pytest.mark.parametrize(("wire", "error"), ERRORS, ids=[w[:60].decode("latin-1") for w, _ in ERRORS])
def test_error(wire: bytes, error: ClientError) -> None:
    assert_error(wire, error)


# --- check 6: the fields in the spec's order ------------------------------------------
# As in test_protocol_workflows.py: rung i has the first i fields good and the rest bad,
# so its error is field i's. Flags come first on the line: field order, not token
# order, decides.

# fmt: off
_JOB_FLAGS = [
    ("-max-attempts=1", "-max-attempts=256", INVALID_MAX_ATTEMPTS),
    ("-max-fails=1", "-max-fails=x", INVALID_MAX_FAILS),
    ("-priority=1", "-priority=+-1", INVALID_PRIORITY),
    ("-backoff=5", "-backoff=5x", INVALID_BACKOFF),
    (f"-after={U1}", f"-after={U1},{U1}", INVALID_AFTER),
    ("-tags=a,b", "-tags=a,a", INVALID_TAGS),
]
LADDERS = {
    "add": (
        lambda i, n, r, t, a, f, p, b, af, tg: block_request(
            f"add {tg} {af} {b} {p} {f} {a} {i} {n} {r} {t} {SIZE}"),
        [(ID, V1_TEXT, INVALID_ID), ("p", "p?", INVALID_NAME), ("1", "0", INVALID_TTR),
         ("1", "-1", INVALID_TTL), *_JOB_FLAGS],
    ),
    "schedule": (
        lambda i, n, r, t, tm, a, f, p, b, af, tg: block_request(
            f"schedule {i} {tg} {af} {p} {n} {f} {r} {b} {a} {t} {tm} {SIZE}"),
        [(ID, "x", INVALID_ID), ("p", "p!", INVALID_NAME), ("1", "x", INVALID_TTR),
         ("1", "0", INVALID_TTL), ("2016-06-14T06:46:46Z", "2016-06-14T06:46:45Z", INVALID_TIME),
         *_JOB_FLAGS],
    ),
    "inspect tagged": (
        lambda tg, o, lim: f"inspect tagged {tg} {o} {lim}\r\n".encode(),
        [("p", "p!", INVALID_TAGS), ("0", "x", INVALID_CURSOR_OFFSET), ("1", "x", INVALID_LIMIT)],
    ),
}
# fmt: on


@pytest.mark.parametrize("command", LADDERS)
def test_field_order(command: str) -> None:
    build, ladder = LADDERS[command]
    for rung, (_, _, error) in enumerate(ladder):
        tokens = [good for good, _, _ in ladder[:rung]] + [bad for _, bad, _ in ladder[rung:]]
        assert_error(build(*tokens), ClientError(error))
    events, _ = events_whole(build(*(good for good, _, _ in ladder)))
    assert len(events) == 1 and not isinstance(events[0], ClientError)


def test_inspect_tagged_counts_and_pages_as_inspect_jobs() -> None:
    """Its offset and limit are checked as inspect jobs checks them, its tag as -tags
    checks one tag (a name that is no tag: Invalid Tags, not Invalid Name)."""
    lines = ["p 0 1", "p 0", "p x 1", "p 0 x", "p 0 1 -x=1", "p 0 1 2", "-x= p",
             "p 4294967295 100", "p 00 0100", "p 0 101", "p 4294967296 1"]
    for line in lines:
        [job] = events_whole(f"inspect jobs {line}\r\n".encode())[0]
        [tagged] = events_whole(f"inspect tagged {line}\r\n".encode())[0]
        if isinstance(job, InspectJobs):
            assert tagged == InspectTagged(job.name, job.offset, job.limit), line
        else:
            assert tagged == job, line
    # 65 to 255 bytes: a name, not a tag
    [tagged] = events_whole(f"inspect tagged {'n' * 65} 0 1\r\n".encode())[0]
    assert tagged == C(INVALID_TAGS)


# --- replies: the job block's tags key ------------------------------------------------

JID = uuid.UUID("16fd2706-8baf-433b-82eb-8c7fada847da")
CREATED = parse_time_ms("2024-01-01T00:00:00Z")
WORKQ_KEYS = (
    b"name etl\r\nttr 60000\r\nttl 86400000\r\npayload-size 2\r\npayload {}\r\n"
    b"max-attempts 0\r\nattempts 0\r\nmax-fails 0\r\nfails 0\r\npriority 0\r\n"
)


def etl(**changes: object) -> JobView:
    """The spec's example job: queue etl, payload ``{}``, WAITING on 2 upstreams, one
    COMPLETED, tagged ``nightly``."""
    fields: dict[str, object] = dict(
        id=JID, name="etl", ttr_ms=60000, ttl_ms=86400000, payload=b"{}", max_attempts=0,
        attempts=0, max_fails=0, fails=0, priority=0, state=5, created_ms=CREATED,
        after=2, waiting=1, tags=("nightly",),
    )
    fields.update(changes)
    return JobView(**fields)  # type: ignore[arg-type]


def test_the_spec_example_job_block() -> None:
    """docs/workflows.md, "Dependencies": the example block, byte for byte."""
    assert job_blocks([etl()]) == (
        b"+OK 1\r\n16fd2706-8baf-433b-82eb-8c7fada847da 15\r\n" + WORKQ_KEYS
        + b"state 5\r\ncreated 2024-01-01T00:00:00Z\r\nafter 2\r\nwaiting 1\r\n"
        b"tags nightly\r\n"
    )


def test_tags_follow_time_and_waiting_in_their_order() -> None:
    view = etl(state=0, after=0, waiting=0, scheduled_ms=CREATED + 7000, tags=("b", "a", "c"))
    assert job_blocks([view]) == (
        b"+OK 1\r\n16fd2706-8baf-433b-82eb-8c7fada847da 14\r\n" + WORKQ_KEYS
        + b"state 0\r\ncreated 2024-01-01T00:00:00Z\r\ntime 2024-01-01T00:00:07Z\r\n"
        b"tags b,a,c\r\n"
    )
    plain = job_blocks([etl(state=0, after=0, waiting=0, tags=("x",))])
    assert plain.endswith(b"created 2024-01-01T00:00:00Z\r\ntags x\r\n")
    assert plain.split(b"\r\n")[1].endswith(b" 13")


def test_a_job_without_tags_keeps_its_block() -> None:
    assert job_blocks([etl(tags=())]) == job_blocks([etl()]).replace(b"tags nightly\r\n", b"").replace(
        b" 15\r\n", b" 14\r\n")
    assert b"tags" not in job_blocks([etl(tags=(), after=0, waiting=0, state=0)])


def test_sixteen_long_tags_in_a_block_read_back() -> None:
    reply = job_blocks([etl(tags=LONGEST)])
    assert reply_end(reply + b"+OK\r\n", Shape.BLOCKS) == len(reply)
    [block] = parse_blocks(reply)
    assert block.value(b"tags") == ",".join(LONGEST).encode()


def test_the_peer_form_keeps_order_last_after_tags() -> None:
    reply = ordered_job_blocks([(9, etl())])
    assert reply.endswith(b"waiting 1\r\ntags nightly\r\norder 9\r\n")
    [block] = parse_blocks(reply)
    assert blocks_reply([block.without(b"order")]) == job_blocks([etl()])
    assert b"".join(job_blocks_stream(1, iter([etl()]))) == job_blocks([etl()])


# --- properties -----------------------------------------------------------------------

names = st.text(alphabet="abcXYZ019_.-", min_size=1, max_size=12)
tag_texts = st.text(alphabet="abcXYZ019_.-", min_size=1, max_size=MAX_TAG_BYTES)
v4_ids = st.uuids(version=4)


@st.composite
def jobs_with_tags(draw: st.DrawFn) -> Add | Schedule:
    """A valid add or schedule with 1-16 distinct tags (and sometimes -after)."""
    own = draw(v4_ids)
    tags = tuple(draw(st.lists(tag_texts, min_size=1, max_size=MAX_TAGS, unique=True)))
    after = tuple(draw(st.lists(v4_ids.filter(lambda u: u != own), max_size=3, unique=True)))
    flags = dict(priority=draw(st.integers(-(2**31), 2**31 - 1)),
                 max_attempts=draw(st.integers(0, 255)), max_fails=draw(st.integers(0, 255)),
                 backoff_ms=draw(st.integers(0, 86_400_000)), after=after, tags=tags)
    payload = draw(st.binary(max_size=16))
    ttl = draw(st.integers(1, 2**64 - 1))
    if draw(st.booleans()):
        return Add(own, draw(names), draw(st.integers(1, 86_400_000)), ttl, payload, **flags)
    time_ms = draw(st.integers(max(0, NOW_MS - ttl + 1), 253_402_300_799_999))
    return Schedule(own, draw(names), draw(st.integers(1, 86_400_000)), ttl, time_ms, payload,
                    **flags)


@given(st.data())
def test_a_valid_add_or_schedule_with_tags_round_trips(data: st.DataObject) -> None:
    """Serialized with flags anywhere and defaults explicit or not, it parses back to
    itself; so does the gateway's own encoding of it (eventq/protocol/encode.py)."""
    request = data.draw(jobs_with_tags())
    wire = serialize(
        request,
        flag_slots=data.draw(st.lists(st.integers(0, 10), max_size=6)),
        explicit_defaults=data.draw(st.booleans()),
        separator=data.draw(st.sampled_from([" ", "  "])),
    )
    assert events_whole(wire) == ([request], False)
    assert events_whole(encode_request(request)) == ([request], False)


@given(jobs_with_tags(), st.integers(0, MAX_TAGS - 1))
def test_repeating_a_tag_is_refused(request: Add | Schedule, index: int) -> None:
    good = ",".join(request.tags)
    bad = good + "," + request.tags[index % len(request.tags)]
    wire = serialize(request).replace(f"-tags={good}".encode(), f"-tags={bad}".encode())
    assert events_whole(wire) == ([C(INVALID_TAGS)], False)


@given(tag_texts, st.integers(0, 2**32 - 1), st.integers(1, 100))
def test_inspect_tagged_round_trips(tag: str, offset: int, limit: int) -> None:
    request = InspectTagged(tag, offset, limit)
    assert events_whole(serialize(request)) == ([request], False)
    assert events_whole(encode_request(request)) == ([request], False)


@given(st.lists(tag_texts, min_size=1, max_size=MAX_TAGS, unique=True))
def test_tags_in_a_block_read_back_in_order(tags: list[str]) -> None:
    [block] = parse_blocks(job_blocks([etl(tags=tuple(tags))]))
    assert block.value(b"tags").decode().split(",") == tags


def test_the_spellings_of_ids_do_not_matter_to_tags() -> None:
    """-tags beside -after in every id spelling: the tags are the same."""
    text = canonical_id(U1)
    for spelling in (text, text.upper(), "{%s}" % text, "urn:uuid:" + text):
        [event], _ = events_whole(f"add {ID} p 1 1 0 -after={spelling} -tags=a\r\n\r\n".encode())
        assert isinstance(event, Add) and event.tags == ("a",) and event.after == (U1,)
