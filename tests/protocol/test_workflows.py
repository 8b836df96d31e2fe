"""The parser's part of docs/workflows.md, "Dependencies" and "Inputs": ``-after`` on add
and schedule, the ``inputs`` verb and ``inspect waiting-jobs`` (checks, their order, the
exact error texts, whole / byte by byte / with trailing data), and that every other line
is judged as before."""

from __future__ import annotations

import itertools
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
    INVALID_TIME,
    INVALID_TTL,
    INVALID_TTR,
    UNKNOWN_COMMAND,
    ClientError,
    FramingError,
)
from eventq.limits import MAX_AFTER_IDS, MAX_LINE_BYTES
from eventq.protocol import (
    Add,
    Inputs,
    InspectJobs,
    InspectWaitingJobs,
    Schedule,
    canonical_id,
    parse_after,
)
from eventq.protocol.encode import encode_request
from eventq.protocol.grammar import VERB_OF
from support.protocol_helpers import (
    NOW_MS,
    V1_TEXT,
    V4_ID,
    V4_TEXT,
    assert_error,
    assert_parses_three_ways,
    events_whole,
    jobs_with_after,
    serialize,
)

ID = V4_TEXT
C = ClientError
F = FramingError
BLOCK = b"inspect server\r\n"  # a block that is itself a request: it must be consumed
SIZE = str(len(BLOCK))
T_2016 = NOW_MS  # 2016-06-14T06:46:46Z


def v4(n: int) -> uuid.UUID:
    """The n-th of a run of distinct version 4 UUIDs, none equal to ``V4_ID``."""
    return uuid.UUID(int=(0x1 << 124) | n, version=4)


U1, U2, U3 = v4(1), v4(2), v4(3)


def spellings(value: uuid.UUID) -> list[str]:
    """Every spelling of an id that ``parse_id`` accepts, one per form."""
    text = canonical_id(value)
    bare = text.replace("-", "")
    return [text, text.upper(), bare, bare.upper(), "{%s}" % text, "urn:uuid:" + text,
            "urn:uuid:" + bare, bare[:8] + "-" + bare[8:]]


def urn(value: uuid.UUID) -> str:
    """The longest accepted spelling: 45 bytes."""
    return "urn:uuid:" + canonical_id(value)


def block_request(line: str, block: bytes = BLOCK) -> bytes:
    return line.encode("latin-1") + b"\r\n" + block + b"\r\n"


def test_an_invalid_after_reply_is_byte_exact() -> None:
    assert ClientError(INVALID_AFTER).reply == b"-CLIENT-ERROR Invalid After\r\n"
    assert len(urn(U1)) == 45


# --- valid requests -------------------------------------------------------------------

# fmt: off
CASES = [
    (f"add {ID} p 1 1 4 -after={U1}\r\npong\r\n",
     Add(V4_ID, "p", 1, 1, b"pong", after=(U1,))),
    # -after order is kept, each id in its own spelling, the flag anywhere on the line
    (f"add -after={{{U2}}},{urn(U1)},{canonical_id(U3).upper()} {ID} p 1 1 0\r\n\r\n",
     Add(V4_ID, "p", 1, 1, b"", after=(U2, U1, U3))),
    # 3 workq flags + -backoff + -after: 5 flags
    (f"add {ID} p 1 1 0 -priority=1 -max-attempts=2 -max-fails=3 -backoff=4 -after={U1}\r\n\r\n",
     Add(V4_ID, "p", 1, 1, b"", 1, 2, 3, 4, (U1,))),
    # 3 workq flags + -after, no -backoff: 4 flags
    (f"add {ID} p 1 1 0 -priority=1 -max-attempts=2 -max-fails=3 -after={U1}\r\n\r\n",
     Add(V4_ID, "p", 1, 1, b"", 1, 2, 3, 0, (U1,))),
    # the value ends at a second '=' (docs/protocol.md, "Connections and framing"), as for every flag
    (f"add {ID} p 1 1 0 -after={U1},{U2}={U3}\r\n\r\n",
     Add(V4_ID, "p", 1, 1, b"", after=(U1, U2))),
    (f"schedule {ID} p 1 1 2016-06-14T06:46:46Z 1 -after={U3},{U1}\r\nx\r\n",
     Schedule(V4_ID, "p", 1, 1, T_2016, b"x", after=(U3, U1))),
    (f"schedule {ID} p 1 1 2016-06-14T06:46:46Z 0 -after={U1} -backoff=5 -priority=-1 "
     f"-max-attempts=0 -max-fails=255\r\n\r\n",
     Schedule(V4_ID, "p", 1, 1, T_2016, b"", -1, 0, 255, 5, (U1,))),
    # inputs: any spelling of a v4 id
    (f"inputs {ID}\r\n", Inputs(V4_ID)),
    (f"inputs  urn:uuid:{ID.upper()} \r\n", Inputs(V4_ID)),
    (f"inputs {{{ID.replace('-', '')}}}\r\n", Inputs(V4_ID)),
    # inspect waiting-jobs: as inspect jobs
    ("inspect waiting-jobs ping 0 10\r\n", InspectWaitingJobs("ping", 0, 10)),
    ("inspect waiting-jobs  a.b-c_D 4294967295 100\r\n",
     InspectWaitingJobs("a.b-c_D", 2**32 - 1, 100)),
    ("inspect waiting-jobs p 007 01\r\n", InspectWaitingJobs("p", 7, 1)),
]
# fmt: on


@pytest.mark.parametrize(("wire", "expected"), CASES, ids=[c[0][:48] for c in CASES])
def test_valid_request(wire: str, expected: object) -> None:
    assert_parses_three_ways(wire.encode("latin-1"), expected)


def test_the_new_requests_are_named_by_their_protocol_words() -> None:
    assert VERB_OF[Inputs] == "inputs"
    assert VERB_OF[InspectWaitingJobs] == "inspect waiting-jobs"


def test_a_request_without_after_is_what_it_was() -> None:
    """Every existing construction still works: ``after`` defaults to no upstreams."""
    assert Add(V4_ID, "p", 1, 1, b"").after == ()
    assert Schedule(V4_ID, "p", 1, 1, 0, b"").after == ()
    assert events_whole(f"add {ID} p 1 1 0\r\n\r\n".encode())[0] == [Add(V4_ID, "p", 1, 1, b"")]


# --- 1-100 ids, distinct, not the job's own -------------------------------------------


def _add_after(ids: list[str], job: str = ID) -> bytes:
    return f"add {job} p 1 1 0 -after={','.join(ids)}\r\n\r\n".encode()


def test_100_ids_in_their_longest_spelling_are_accepted() -> None:
    ids = [v4(n) for n in range(MAX_AFTER_IDS)]
    wire = _add_after([urn(u) for u in ids])
    assert_parses_three_ways(wire, Add(V4_ID, "p", 1, 1, b"", after=tuple(ids)))


def test_101_ids_are_refused() -> None:
    ids = [v4(n) for n in range(MAX_AFTER_IDS + 1)]
    assert_error(_add_after([canonical_id(u) for u in ids]), C(INVALID_AFTER))
    assert_error(_add_after([urn(u) for u in ids]), C(INVALID_AFTER))


def test_the_longest_schedule_line_fits() -> None:
    """spec: 100 ids in their longest spelling, 16 tags of 64 bytes and every other
    schedule field at its longest make a line of 6,099 bytes, under the 10,000-byte
    limit."""
    ids = tuple(v4(n) for n in range(MAX_AFTER_IDS))
    tags = tuple(f"{n:02d}" + "t" * 62 for n in range(16))
    line = (
        f"schedule urn:uuid:{ID} {'n' * 255} 86400000 18446744073709551615 "
        f"9999-12-31T23:59:59.999Z 1048576 -priority=-2147483648 -max-attempts=255 "
        f"-max-fails=255 -backoff=86400000 -after={','.join(map(urn, ids))} "
        f"-tags={','.join(tags)}"
    )
    assert len(line) == 6_099 < MAX_LINE_BYTES
    payload = b"x" * 1_048_576
    [event], closed = events_whole(line.encode() + b"\r\n" + payload + b"\r\n")
    assert isinstance(event, Schedule) and event.after == ids and event.tags == tags
    assert not closed


@pytest.mark.parametrize("spelling", range(len(spellings(U1))))
def test_two_spellings_of_one_id_are_one_id(spelling: int) -> None:
    for other in spellings(U1):
        assert_error(_add_after([spellings(U1)[spelling], canonical_id(U2), other]),
                     C(INVALID_AFTER))


@pytest.mark.parametrize("spelling", spellings(V4_ID))
def test_the_job_itself_is_no_upstream(spelling: str) -> None:
    assert_error(_add_after([spelling]), C(INVALID_AFTER))
    assert_error(_add_after([canonical_id(U1), spelling]), C(INVALID_AFTER))
    # whatever spelling the job's own id has
    assert_error(_add_after([canonical_id(V4_ID)], spelling), C(INVALID_AFTER))
    assert_error(
        block_request(f"schedule {ID} p 1 1 2030-01-01T00:00:00Z {SIZE} -after={spelling}"),
        C(INVALID_AFTER),
    )


# fmt: off
BAD_AFTER = [
    f",{U1}", f"{U1},", f"{U1},,{U2}", ",", ",,",  # empty elements
    V1_TEXT,  # a valid UUID, but version 1
    f"{U1},{V1_TEXT}",
    "00000000-0000-4000-0000-000000000000",  # version 4 but not the RFC 4122 variant
    f"{U1}x", f"{{{U1}", f"urn:uuid:{{{U1}}}", f"{str(U1)[:-1]}", "x", "-", "0",
    f"{U1}\t",  # a tab is an ordinary character, so part of the element
    f"{U1};{U2}",  # the separator is ","
]
# fmt: on


@pytest.mark.parametrize("value", BAD_AFTER)
def test_a_bad_after_is_invalid_after_not_invalid_id(value: str) -> None:
    assert_error(_add_after([value]), C(INVALID_AFTER))
    with pytest.raises(ClientError) as raised:
        parse_after(value)
    assert raised.value == C(INVALID_AFTER)


def test_parse_after_keeps_order_and_values() -> None:
    assert parse_after(f"{U3},{spellings(U1)[4]},{spellings(U2)[6]}") == (U3, U1, U2)
    assert parse_after(canonical_id(U1)) == (U1,)


# --- errors and the check order -------------------------------------------------------

# fmt: off
ERRORS = [
    # check 1: flag syntax, before everything
    (block_request(f"add {ID} p 1 1 {SIZE} -after= "), C(INVALID_COMMAND_FLAGS)),
    (block_request(f"add {ID} p 1 1 {SIZE} -after={U1} -after={U2}"), C(INVALID_COMMAND_FLAGS)),
    (f"inputs {ID} -x=\r\n".encode(), C(INVALID_COMMAND_FLAGS)),
    (b"inputs -x= a b\r\n", C(INVALID_COMMAND_FLAGS)),
    (b"inspect waiting-jobs -x= a\r\n", C(INVALID_COMMAND_FLAGS)),
    # check 3: flag counts. 3, plus one each for -backoff and -after among them.
    (block_request(f"add {ID} p 1 1 {SIZE} -priority=1 -max-attempts=1 -max-fails=1 "
                   f"-after={U1} -x=1"), C(INVALID_COMMAND_ARGS)),
    (block_request(f"add {ID} p 1 1 {SIZE} -priority=1 -max-attempts=1 -max-fails=1 "
                   f"-after={U1} -backoff=1 -x=1"), C(INVALID_COMMAND_ARGS)),
    (block_request(f"schedule {ID} p 1 1 2030-01-01T00:00:00Z {SIZE} -priority=1 "
                   f"-max-attempts=1 -max-fails=1 -after={U1} -x=1"), C(INVALID_COMMAND_ARGS)),
    # within the count, an unknown name is check 4
    (block_request(f"add {ID} p 1 1 {SIZE} -priority=1 -max-attempts=1 -after={U1} -x=1"),
     C(INVALID_COMMAND_FLAGS)),
    # a line without eventq flags is judged as workq judges it: 4 flags are too many
    (block_request(f"add {ID} p 1 1 {SIZE} -priority=1 -max-attempts=1 -max-fails=1 -x=1"),
     C(INVALID_COMMAND_ARGS)),
    # -tags (spec section 4, tests/protocol/test_tags.py) counts like -after
    (block_request(f"add {ID} p 1 1 {SIZE} -priority=1 -max-attempts=1 -max-fails=1 "
                   f"-after={U1} -tags=a -x=1"), C(INVALID_COMMAND_ARGS)),
    # run: -after is unknown (one flag: flags), and makes one flag too many with another
    (block_request(f"run {ID} p 1 1 {SIZE} -after={U1}"), C(INVALID_COMMAND_FLAGS)),
    (block_request(f"run {ID} p 1 1 {SIZE} -after=x"), C(INVALID_COMMAND_FLAGS)),
    (block_request(f"run {ID} p 1 1 {SIZE} -after={U1} -priority=1"), C(INVALID_COMMAND_ARGS)),
    (block_request(f"run {ID} p 1 1 {SIZE} -after={U1} -backoff=1"), C(INVALID_COMMAND_ARGS)),
    # check 5, framing, before the fields: a bad -after does not save the stream
    (block_request(f"add {ID} p 1 1 x -after=x"), F(INVALID_PAYLOAD_SIZE)),
    (block_request(f"add {ID} p 1 {SIZE} -after={U1}"), F(INVALID_COMMAND_ARGS)),
    # check 6: the id before -after (self-reference needs a valid id first)
    (block_request(f"add {V1_TEXT} p 1 1 {SIZE} -after={V1_TEXT}"), C(INVALID_ID)),
    (block_request(f"add x p 1 1 {SIZE} -after=x"), C(INVALID_ID)),
    # inputs: exactly one positional, then any flag, then the id (v4)
    (b"inputs\r\n", C(INVALID_COMMAND_ARGS)),
    (f"inputs {ID} {ID}\r\n".encode(), C(INVALID_COMMAND_ARGS)),
    (f"inputs {ID} x -x=1\r\n".encode(), C(INVALID_COMMAND_ARGS)),  # count before names
    (b"inputs -x=1\r\n", C(INVALID_COMMAND_ARGS)),
    (f"inputs {ID} -x=1\r\n".encode(), C(INVALID_COMMAND_FLAGS)),
    (f"inputs {ID} -after={U1}\r\n".encode(), C(INVALID_COMMAND_FLAGS)),
    (f"inputs {ID} -ttr=1 -x=1 -y=2 -z=3 -w=4\r\n".encode(), C(INVALID_COMMAND_FLAGS)),  # no count
    (b"inputs x -x=1\r\n", C(INVALID_COMMAND_FLAGS)),  # flags before the id
    (f"inputs {V1_TEXT}\r\n".encode(), C(INVALID_ID)),
    (f"inputs {ID}x\r\n".encode(), C(INVALID_ID)),
    (b"inputs nope\r\n", C(INVALID_ID)),
    # inputs carries no data block: what follows is a request of its own (see trailers)
    # inspect waiting-jobs: counts, flags (Invalid command args, as every object), fields
    (b"inspect waiting-jobs\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect waiting-jobs a 0\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect waiting-jobs a 0 1 2\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect waiting-jobs a 0 1 -x=1\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect waiting-jobs bad! 0 -x=1\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect waiting-jobs p: 0 1\r\n", C(INVALID_NAME)),
    (b"inspect waiting-jobs p 4294967296 1\r\n", C(INVALID_CURSOR_OFFSET)),
    (b"inspect waiting-jobs p 0 101\r\n", C(INVALID_LIMIT)),
    (b"inspect waiting-jobs p 0 0\r\n", C(INVALID_LIMIT)),
    (b"inspect Waiting-jobs p 0 1\r\n", C(UNKNOWN_COMMAND)),
    (b"inspect waiting p 0 1\r\n", C(UNKNOWN_COMMAND)),
    # verbs are case-sensitive, and a line that starts with a space has no verb
    (f"Inputs {ID}\r\n".encode(), C(UNKNOWN_COMMAND)),
    (f"INPUTS {ID}\r\n".encode(), C(UNKNOWN_COMMAND)),
    (f" inputs {ID}\r\n".encode(), C(UNKNOWN_COMMAND)),
    (f"input {ID}\r\n".encode(), C(UNKNOWN_COMMAND)),
    (f"inputs\t{ID}\r\n".encode(), C(UNKNOWN_COMMAND)),
    (b"inspect inputs x\r\n", C(UNKNOWN_COMMAND)),
]
# fmt: on


@pytest.mark.parametrize(("wire", "error"), ERRORS, ids=[w[:48].decode("latin-1") for w, _ in ERRORS])
def test_error(wire: bytes, error: ClientError) -> None:
    assert_error(wire, error)


# --- check 6: the fields in the spec's order ------------------------------------------
# As in test_protocol_errors.py: rung i has the first i fields good and the rest bad,
# so its error is field i's. Flags come first on the line: field order, not token
# order, decides.

# fmt: off
_JOB_FLAGS = [
    ("-max-attempts=1", "-max-attempts=256", INVALID_MAX_ATTEMPTS),
    ("-max-fails=1", "-max-fails=x", INVALID_MAX_FAILS),
    ("-priority=1", "-priority=+-1", INVALID_PRIORITY),
    ("-backoff=5", "-backoff=5x", INVALID_BACKOFF),
    (f"-after={U1},{U2}", f"-after={U1},{U1}", INVALID_AFTER),
]
LADDERS = {
    "add": (
        lambda i, n, r, t, a, f, p, b, af: block_request(
            f"add {af} {b} {p} {f} {a} {i} {n} {r} {t} {SIZE}"),
        [(ID, V1_TEXT, INVALID_ID), ("p", "p?", INVALID_NAME), ("1", "0", INVALID_TTR),
         ("1", "-1", INVALID_TTL), *_JOB_FLAGS],
    ),
    "add, self-reference": (
        lambda i, n, r, t, a, f, p, b, af: block_request(
            f"add {af} {b} {p} {f} {a} {i} {n} {r} {t} {SIZE}"),
        [(ID, V1_TEXT, INVALID_ID), ("p", "p?", INVALID_NAME), ("1", "0", INVALID_TTR),
         ("1", "-1", INVALID_TTL), *_JOB_FLAGS[:-1], (f"-after={U1}", f"-after={ID}", INVALID_AFTER)],
    ),
    "schedule": (
        lambda i, n, r, t, tm, a, f, p, b, af: block_request(
            f"schedule {i} {af} {p} {n} {f} {r} {b} {a} {t} {tm} {SIZE}"),
        [(ID, "x", INVALID_ID), ("p", "p!", INVALID_NAME), ("1", "x", INVALID_TTR),
         ("1", "0", INVALID_TTL), ("2016-06-14T06:46:46Z", "2016-06-14T06:46:45Z", INVALID_TIME),
         *_JOB_FLAGS],
    ),
    "inputs": (lambda i: f"inputs {i}\r\n".encode(), [(ID, V1_TEXT, INVALID_ID)]),
    "inspect waiting-jobs": (
        lambda n, o, lim: f"inspect waiting-jobs {n} {o} {lim}\r\n".encode(),
        [("p", "p!", INVALID_NAME), ("0", "x", INVALID_CURSOR_OFFSET), ("1", "x", INVALID_LIMIT)],
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


def test_inspect_waiting_jobs_is_checked_as_inspect_jobs() -> None:
    """Same checks, same order, same request shape (spec: "As inspect jobs")."""
    lines = ["p 0 1", "p 0", "p: 0 1", "p x 1", "p 0 x", "p: x x", "p 0 1 -x=1", "p 0 1 2",
             "-x= p", "p 4294967295 100", "p 00 0100", "p 0 101"]
    for line in lines:
        jobs = events_whole(f"inspect jobs {line}\r\n".encode())
        waiting = events_whole(f"inspect waiting-jobs {line}\r\n".encode())
        [job], [wait] = jobs[0], waiting[0]
        if isinstance(job, InspectJobs):
            assert wait == InspectWaitingJobs(job.name, job.offset, job.limit), line
        else:
            assert wait == job, line


# --- properties -----------------------------------------------------------------------

@given(st.data())
def test_a_valid_add_or_schedule_with_after_round_trips(data: st.DataObject) -> None:
    """Serialized with each id in any accepted spelling (mixed within -after), flags
    anywhere and defaults explicit or not, it parses back to itself; so does the
    gateway's own encoding of it (eventq/protocol/encode.py)."""
    request = data.draw(jobs_with_after())
    choices = itertools.cycle(data.draw(st.lists(st.integers(0, 7), min_size=1, max_size=8)))
    wire = serialize(
        request,
        fmt_id=lambda value: spellings(value)[next(choices)],
        flag_slots=data.draw(st.lists(st.integers(0, 10), max_size=5)),
        explicit_defaults=data.draw(st.booleans()),
        separator=data.draw(st.sampled_from([" ", "  "])),
    )
    assert events_whole(wire) == ([request], False)
    assert events_whole(encode_request(request)) == ([request], False)


@given(jobs_with_after(), st.integers(0, MAX_AFTER_IDS - 1), st.sampled_from(range(8)))
def test_repeating_an_upstream_or_naming_the_job_is_refused(
        request: Add | Schedule, index: int, spelling: int) -> None:
    after = list(request.after)
    for extra in (after[index % len(after)], request.id):
        wire = serialize(request, fmt_id=canonical_id)
        good = ",".join(map(canonical_id, after))
        bad = good + "," + spellings(extra)[spelling]
        wire = wire.replace(f"-after={good}".encode(), f"-after={bad}".encode())
        assert events_whole(wire) == ([C(INVALID_AFTER)], False)
