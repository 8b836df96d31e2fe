"""The parser's part of docs/workflows.md, "Recurring jobs": ``recur``, ``unrecur`` and
``inspect recurring`` (checks, their order, the exact error texts; each input whole,
byte by byte and followed by trailing data), the gateway's encoding of them, and the
``inspect recurring`` block byte for byte."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventq.errors import (
    INVALID_BACKOFF,
    INVALID_COMMAND_ARGS,
    INVALID_COMMAND_FLAGS,
    INVALID_CURSOR_OFFSET,
    INVALID_EVERY,
    INVALID_LIMIT,
    INVALID_MAX_ATTEMPTS,
    INVALID_MAX_FAILS,
    INVALID_NAME,
    INVALID_PAYLOAD_SIZE,
    INVALID_PRIORITY,
    INVALID_TAGS,
    INVALID_TTL,
    INVALID_TTR,
    UNKNOWN_COMMAND,
    ClientError,
    FramingError,
)
from eventq.limits import MAX_EVERY_MS, MAX_LINE_BYTES
from eventq.protocol import replies
from eventq.protocol.encode import encode_request
from eventq.protocol.grammar import VERB_OF
from eventq.protocol.requests import InspectRecurring, Recur, Unrecur
from support.protocol_helpers import (
    assert_error,
    assert_parses_three_ways,
    events_bytewise,
    events_whole,
)

C = ClientError
F = FramingError
BLOCK = b"inspect server\r\n"  # a block that is itself a request: it must be consumed
SIZE = str(len(BLOCK))


def block_request(line: str, block: bytes = BLOCK) -> bytes:
    return line.encode("latin-1") + b"\r\n" + block + b"\r\n"


# --- valid requests -------------------------------------------------------------------

# fmt: off
CASES = [
    ("recur nightly etl 60000 86400000 86400000 2\r\n{}\r\n",
     Recur("nightly", "etl", 60_000, 86_400_000, 86_400_000, b"{}")),
    # every flag, anywhere on the line, in any order: no flag count
    ("recur -tags=a,b-c,d.e_f n q 1 1 1000 0 -backoff=5 -priority=-3 -max-attempts=2 "
     "-max-fails=255\r\n\r\n",
     Recur("n", "q", 1, 1, 1000, b"", -3, 2, 255, 5, ("a", "b-c", "d.e_f"))),
    # the limits of every; leading zeros; a payload holding CRLF and a request
    (f"recur a.b-c_D q 86400000 18446744073709551615 {MAX_EVERY_MS} 18\r\n"
     "inspect server\r\n\r\n\r\n",
     Recur("a.b-c_D", "q", 86_400_000, 2**64 - 1, MAX_EVERY_MS, b"inspect server\r\n\r\n")),
    ("recur r q 1 1 0001000 1\r\nx\r\n", Recur("r", "q", 1, 1, 1000, b"x")),
    # the defaults given explicitly, and a flag given twice keeps the last
    ("recur r q 1 1 1000 0 -priority=0 -max-attempts=0 -max-fails=0 -backoff=0\r\n\r\n",
     Recur("r", "q", 1, 1, 1000, b"")),
    ("unrecur nightly\r\n", Unrecur("nightly")),
    ("unrecur  a.b-c_D \r\n", Unrecur("a.b-c_D")),
    ("inspect recurring 0 10\r\n", InspectRecurring(0, 10)),
    ("inspect recurring 4294967295 100\r\n", InspectRecurring(2**32 - 1, 100)),
    ("inspect recurring 007 01\r\n", InspectRecurring(7, 1)),
]
# fmt: on


@pytest.mark.parametrize(("wire", "expected"), CASES, ids=[c[0][:48] for c in CASES])
def test_valid_request(wire: str, expected: object) -> None:
    assert_parses_three_ways(wire.encode("latin-1"), expected)


def test_the_requests_are_named_by_their_protocol_words() -> None:
    assert VERB_OF[Recur] == "recur"
    assert VERB_OF[Unrecur] == "unrecur"
    assert VERB_OF[InspectRecurring] == "inspect recurring"


def test_sixteen_tags_of_64_bytes_fit_a_line() -> None:
    tags = tuple(f"{n:02d}" + "t" * 62 for n in range(16))
    line = (f"recur {'n' * 255} {'q' * 255} 86400000 18446744073709551615 {MAX_EVERY_MS} "
            f"1048576 -priority=-2147483648 -max-attempts=255 -max-fails=255 "
            f"-backoff=86400000 -tags={','.join(tags)}")
    assert len(line) < MAX_LINE_BYTES
    [event], closed = events_whole(line.encode() + b"\r\n" + b"x" * 1_048_576 + b"\r\n")
    assert isinstance(event, Recur) and event.tags == tags and not closed


# --- errors and the check order -------------------------------------------------------

GOOD = "n q 1 1 1000"

# fmt: off
ERRORS = [
    # 1 flag syntax, before everything (the block is still read: the stream stays)
    (block_request(f"recur {GOOD} {SIZE} -tags="), C(INVALID_COMMAND_FLAGS)),
    (block_request(f"recur {GOOD} {SIZE} -tags=a -tags=b"), C(INVALID_COMMAND_FLAGS)),
    # 3 exactly 6 positional: a wrong count cannot find the block, so it closes
    (block_request(f"recur {GOOD}"), F(INVALID_COMMAND_ARGS)),
    (block_request(f"recur {GOOD} {SIZE} x"), F(INVALID_COMMAND_ARGS)),
    (b"recur\r\n", F(INVALID_COMMAND_ARGS)),
    (b"recur -x=1\r\n", F(INVALID_COMMAND_ARGS)),
    # ... and a flag syntax error still names itself, and closes too
    (block_request(f"recur {GOOD} -x="), F(INVALID_COMMAND_FLAGS)),
    # 4 flag names: any other flag, however many the line has (no flag count)
    (block_request(f"recur {GOOD} {SIZE} -after=x"), C(INVALID_COMMAND_FLAGS)),
    (block_request(f"recur {GOOD} {SIZE} -ttr=1"), C(INVALID_COMMAND_FLAGS)),
    (block_request(f"recur {GOOD} {SIZE} -time=1"), C(INVALID_COMMAND_FLAGS)),
    (block_request(f"recur {GOOD} {SIZE} -Priority=1"), C(INVALID_COMMAND_FLAGS)),
    (block_request(f"recur {GOOD} {SIZE} -priority=1 -max-attempts=1 -max-fails=1 -backoff=1 "
                   f"-tags=a -x=1"), C(INVALID_COMMAND_FLAGS)),
    # 5 framing: a bad size, or a block not followed by CRLF, closes; a failed earlier
    # check keeps its text
    (block_request(f"recur {GOOD} x"), F(INVALID_PAYLOAD_SIZE)),
    (block_request(f"recur {GOOD} -1"), F(INVALID_PAYLOAD_SIZE)),
    (block_request(f"recur {GOOD} 1048577"), F(INVALID_PAYLOAD_SIZE)),
    (block_request(f"recur {GOOD} 2"), F(INVALID_PAYLOAD_SIZE)),
    (block_request(f"recur {GOOD} x -y=1"), F(INVALID_COMMAND_FLAGS)),
    (block_request(f"recur {GOOD} x -tags="), F(INVALID_COMMAND_FLAGS)),
    (block_request("recur n: q 1 1 1000 x"), F(INVALID_PAYLOAD_SIZE)),  # framing first
    # 6 the fields
    (block_request(f"recur n! q 1 1 1000 {SIZE}"), C(INVALID_NAME)),
    (block_request(f"recur n q: 1 1 1000 {SIZE}"), C(INVALID_NAME)),
    (block_request(f"recur {'n' * 256} q 1 1 1000 {SIZE}"), C(INVALID_NAME)),
    (block_request(f"recur n q 0 1 1000 {SIZE}"), C(INVALID_TTR)),
    (block_request(f"recur n q 86400001 1 1000 {SIZE}"), C(INVALID_TTR)),
    (block_request(f"recur n q 1 0 1000 {SIZE}"), C(INVALID_TTL)),
    (block_request(f"recur n q 1 18446744073709551616 1000 {SIZE}"), C(INVALID_TTL)),
    (block_request(f"recur n q 1 1 999 {SIZE}"), C(INVALID_EVERY)),
    (block_request(f"recur n q 1 1 0 {SIZE}"), C(INVALID_EVERY)),
    (block_request(f"recur n q 1 1 {MAX_EVERY_MS + 1} {SIZE}"), C(INVALID_EVERY)),
    (block_request(f"recur n q 1 1 +1000 {SIZE}"), C(INVALID_EVERY)),
    (block_request(f"recur n q 1 1 1e3 {SIZE}"), C(INVALID_EVERY)),
    (block_request(f"recur {GOOD} {SIZE} -max-attempts=256"), C(INVALID_MAX_ATTEMPTS)),
    (block_request(f"recur {GOOD} {SIZE} -max-fails=x"), C(INVALID_MAX_FAILS)),
    (block_request(f"recur {GOOD} {SIZE} -priority=2147483648"), C(INVALID_PRIORITY)),
    (block_request(f"recur {GOOD} {SIZE} -backoff=86400001"), C(INVALID_BACKOFF)),
    (block_request(f"recur {GOOD} {SIZE} -tags=a,a"), C(INVALID_TAGS)),
    (block_request(f"recur {GOOD} {SIZE} -tags=a,"), C(INVALID_TAGS)),
    (block_request(f"recur {GOOD} {SIZE} -tags=a:b"), C(INVALID_TAGS)),
    (block_request(f"recur {GOOD} {SIZE} -tags={'t' * 65}"), C(INVALID_TAGS)),
    (block_request(f"recur {GOOD} {SIZE} -tags=" + ",".join(map(str, range(17)))),
     C(INVALID_TAGS)),
    # unrecur: exactly one positional, then any flag, then the name
    (b"unrecur\r\n", C(INVALID_COMMAND_ARGS)),
    (b"unrecur a b\r\n", C(INVALID_COMMAND_ARGS)),
    (b"unrecur a b -x=1\r\n", C(INVALID_COMMAND_ARGS)),  # the count before the names
    (b"unrecur -x=1\r\n", C(INVALID_COMMAND_ARGS)),
    (b"unrecur a -x=\r\n", C(INVALID_COMMAND_FLAGS)),
    (b"unrecur a -x=1\r\n", C(INVALID_COMMAND_FLAGS)),
    (b"unrecur a -x=1 -y=1 -z=1 -w=1 -v=1\r\n", C(INVALID_COMMAND_FLAGS)),  # no count
    (b"unrecur a! -x=1\r\n", C(INVALID_COMMAND_FLAGS)),  # flags before the name
    (b"unrecur a!\r\n", C(INVALID_NAME)),
    (b"unrecur recur:a\r\n", C(INVALID_NAME)),
    # inspect recurring: as inspect queues (flags: Invalid command args, as every object)
    (b"inspect recurring\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect recurring 0\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect recurring 0 1 2\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect recurring 0 1 -x=1\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect recurring 0 1 -x=\r\n", C(INVALID_COMMAND_FLAGS)),
    (b"inspect recurring x 1\r\n", C(INVALID_CURSOR_OFFSET)),
    (b"inspect recurring 4294967296 1\r\n", C(INVALID_CURSOR_OFFSET)),
    (b"inspect recurring x x\r\n", C(INVALID_CURSOR_OFFSET)),
    (b"inspect recurring 0 0\r\n", C(INVALID_LIMIT)),
    (b"inspect recurring 0 101\r\n", C(INVALID_LIMIT)),
    # verbs are case-sensitive words
    (b"Unrecur a\r\n", C(UNKNOWN_COMMAND)),
    (b"inspect Recurring 0 1\r\n", C(UNKNOWN_COMMAND)),
    (b"inspect recurrences 0 1\r\n", C(UNKNOWN_COMMAND)),
    (b"recurs a\r\n", C(UNKNOWN_COMMAND)),
]
# fmt: on


@pytest.mark.parametrize(("wire", "error"), ERRORS,
                         ids=[w[:48].decode("latin-1") for w, _ in ERRORS])
def test_error(wire: bytes, error: ClientError) -> None:
    assert_error(wire, error)


def test_inspect_recurring_is_checked_as_inspect_queues() -> None:
    for line in ["0 1", "0", "x 1", "0 x", "x x", "0 1 -x=1", "0 1 2", "-x= 0", "4294967295 100",
                 "00 0100", "0 101", "4294967296 0"]:
        [queues], _ = events_whole(f"inspect queues {line}\r\n".encode())
        [recurring], _ = events_whole(f"inspect recurring {line}\r\n".encode())
        if isinstance(queues, ClientError):
            assert recurring == queues, line
        else:
            assert recurring == InspectRecurring(queues.offset, queues.limit), line


# --- check 6: the fields in the spec's order ------------------------------------------
# Rung i has the first i fields good and the rest bad, so its error is field i's; the
# flags come first on the line: field order, not token order, decides.

# fmt: off
LADDER = [
    ("n", "n!", INVALID_NAME), ("q", "q?", INVALID_NAME), ("1", "0", INVALID_TTR),
    ("1", "0", INVALID_TTL), ("1000", "999", INVALID_EVERY),
    ("-max-attempts=1", "-max-attempts=256", INVALID_MAX_ATTEMPTS),
    ("-max-fails=1", "-max-fails=x", INVALID_MAX_FAILS),
    ("-priority=1", "-priority=+-1", INVALID_PRIORITY),
    ("-backoff=5", "-backoff=5x", INVALID_BACKOFF),
    ("-tags=a,b", "-tags=a,a", INVALID_TAGS),
]
# fmt: on


def _recur_line(n, q, r, t, e, a, f, p, b, tg) -> bytes:
    return block_request(f"recur {tg} {b} {p} {f} {a} {n} {q} {r} {t} {e} {SIZE}")


def test_field_order() -> None:
    for rung, (_, _, error) in enumerate(LADDER):
        tokens = [good for good, _, _ in LADDER[:rung]] + [bad for _, bad, _ in LADDER[rung:]]
        assert_error(_recur_line(*tokens), ClientError(error))
    events, _ = events_whole(_recur_line(*(good for good, _, _ in LADDER)))
    assert events == [Recur("n", "q", 1, 1, 1000, BLOCK, 1, 1, 1, 5, ("a", "b"))]


# --- round trips ----------------------------------------------------------------------

names = st.from_regex(r"[A-Za-z0-9_.\-]{1,40}", fullmatch=True)
tags = st.lists(st.from_regex(r"[A-Za-z0-9_.\-]{1,64}", fullmatch=True), max_size=16, unique=True)


@st.composite
def recurs(draw: st.DrawFn) -> Recur:
    return Recur(draw(names), draw(names), draw(st.integers(1, 86_400_000)),
                 draw(st.integers(1, 2**64 - 1)), draw(st.integers(1000, MAX_EVERY_MS)),
                 draw(st.binary(max_size=32)), draw(st.integers(-(2**31), 2**31 - 1)),
                 draw(st.integers(0, 255)), draw(st.integers(0, 255)),
                 draw(st.integers(0, 86_400_000)), tuple(draw(tags)))


@given(recurs())
def test_the_gateways_encoding_parses_back(request: Recur) -> None:
    """What a gateway forwards to the recurrence's owner (eventq/protocol/encode.py) is
    the request it parsed, whole and byte by byte."""
    for feed in (events_whole, events_bytewise):
        assert feed(encode_request(request)) == ([request], False)
    assert events_whole(encode_request(Unrecur(request.name))) == ([Unrecur(request.name)], False)


def test_inspect_recurring_encodes() -> None:
    request = InspectRecurring(3, 7)
    assert events_whole(encode_request(request)) == ([request], False)


# --- the reply --------------------------------------------------------------------------


def test_an_inspect_recurring_block_is_byte_exact() -> None:
    plain = replies.RecurrenceView("nightly", "etl", 60_000, 86_400_000, 86_400_000, b"{}", 0, 0,
                                   0, 1_704_000_000_000, 1_704_067_200_000)
    assert replies.recurrence_blocks([plain]) == (
        b"+OK 1\r\nnightly 11\r\nname etl\r\nttr 60000\r\nttl 86400000\r\nevery 86400000\r\n"
        b"payload-size 2\r\npayload {}\r\nmax-attempts 0\r\nmax-fails 0\r\npriority 0\r\n"
        b"created 2023-12-31T05:20:00Z\r\nnext 2024-01-01T00:00:00Z\r\n")
    full = replies.RecurrenceView("a", "q", 1, 2, 1000, b"\r\n", 3, 4, -5, 0, 1000, 6, ("x", "y"))
    assert replies.recurrence_blocks([full, plain]).startswith(
        b"+OK 2\r\na 13\r\nname q\r\nttr 1\r\nttl 2\r\nevery 1000\r\npayload-size 2\r\n"
        b"payload \r\n\r\nmax-attempts 3\r\nmax-fails 4\r\npriority -5\r\n"
        b"created 1970-01-01T00:00:00Z\r\nnext 1970-01-01T00:00:01Z\r\nbackoff 6\r\n"
        b"tags x,y\r\nnightly 11\r\n")
    backoff_only = replies.RecurrenceView("b", "q", 1, 2, 1000, b"", 0, 0, 0, 0, 0, backoff_ms=1)
    assert replies.recurrence_blocks([backoff_only]).startswith(b"+OK 1\r\nb 12\r\n")
    assert b"".join(replies.recurrence_blocks_stream(2, [full, plain])) == (
        replies.recurrence_blocks([full, plain]))
    assert replies.recurrence_blocks([]) == b"+OK 0\r\n"
