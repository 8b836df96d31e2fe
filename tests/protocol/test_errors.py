"""Every client error of the spec through the parser: its text, the check order, and
whether the connection closes (FramingError) or the stream stays in step."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from eventq.errors import (
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
    INVALID_RESULT_SIZE,
    INVALID_TIME,
    INVALID_TTL,
    INVALID_TTR,
    INVALID_WAIT_TIMEOUT,
    LINE_TOO_LONG,
    UNKNOWN_COMMAND,
    ClientError,
    FramingError,
)
from eventq.protocol import Parser, Schedule
from support.protocol_helpers import (
    NOW_MS,
    TRAILER,
    V1_TEXT,
    V4_ID,
    V4_TEXT,
    assert_error,
    events_bytewise,
    events_whole,
)

ID = V4_TEXT
C = ClientError
F = FramingError
# A data block that is itself a valid request: if the parser did not consume it as
# the block of the failed request, it would show up as an extra event.
BLOCK = b"inspect server\r\n"
SIZE = str(len(BLOCK))


def block_request(line: str, block: bytes = BLOCK) -> bytes:
    return line.encode("latin-1") + b"\r\n" + block + b"\r\n"


# fmt: off
ERRORS = [
    # Unknown command
    (b"\r\n", C(UNKNOWN_COMMAND)),
    (b"bogus\r\n", C(UNKNOWN_COMMAND)),
    (f"ADD {ID} p 1 1 0\r\n".encode(), C(UNKNOWN_COMMAND)),  # verbs are case-sensitive
    (f" delete {ID}\r\n".encode(), C(UNKNOWN_COMMAND)),  # the verb is the first piece
    (f"-x=1 delete {ID}\r\n".encode(), C(UNKNOWN_COMMAND)),  # a flag is no verb
    (b"inspect\tserver\r\n", C(UNKNOWN_COMMAND)),  # tabs are ordinary characters
    (b"inspect\rserver\r\n", C(UNKNOWN_COMMAND)),  # so is a lone \r
    (b"inspect bogus\r\n", C(UNKNOWN_COMMAND)),
    (b"inspect Server\r\n", C(UNKNOWN_COMMAND)),
    (b"inspect bogus 1 2 3 -x=1\r\n", C(UNKNOWN_COMMAND)),  # object before counts
    # Invalid command flags (check 1, before the verb; check 4, names)
    (b"bogus -=1\r\n", C(INVALID_COMMAND_FLAGS)),
    (b"bogus -x=\r\n", C(INVALID_COMMAND_FLAGS)),
    (b"-x=\r\n", C(INVALID_COMMAND_FLAGS)),
    (f"delete {ID} -a==1\r\n".encode(), C(INVALID_COMMAND_FLAGS)),
    (f"delete {ID} -a=1 -a=2\r\n".encode(), C(INVALID_COMMAND_FLAGS)),
    (block_request(f"add {ID} p 1 1 {SIZE} -priority=1 -priority=1"), C(INVALID_COMMAND_FLAGS)),
    (block_request(f"add {ID} p 1 1 {SIZE} -bogus=1"), C(INVALID_COMMAND_FLAGS)),
    (block_request(f"add {ID} p 1 1 {SIZE} -Priority=1"), C(INVALID_COMMAND_FLAGS)),
    (block_request(f"run {ID} p 1 1 {SIZE} -max-attempts=1"), C(INVALID_COMMAND_FLAGS)),
    # Invalid command args (check 3)
    (b"delete\r\n", C(INVALID_COMMAND_ARGS)),
    (f"delete {ID} {ID}\r\n".encode(), C(INVALID_COMMAND_ARGS)),
    (f"delete {ID} -x=1\r\n".encode(), C(INVALID_COMMAND_ARGS)),  # count before names
    (f"result {ID}\r\n".encode(), C(INVALID_COMMAND_ARGS)),
    (f"result {ID} 1 -x=1\r\n".encode(), C(INVALID_COMMAND_ARGS)),
    (b"lease\r\n", C(INVALID_COMMAND_ARGS)),
    (b"lease 100\r\n", C(INVALID_COMMAND_ARGS)),
    (b"lease ping 100 -x=1\r\n", C(INVALID_COMMAND_ARGS)),
    (b"lease ping 100 -priority=1\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect -x=1\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect server now\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect server -x=1\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect digest x\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect digest -x=1\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect bulk 0\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect bulk -x=1\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect queues 0\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect queue\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect queue a b\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect jobs a 0\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect scheduled-jobs a 0 1 2\r\n", C(INVALID_COMMAND_ARGS)),
    (b"inspect job\r\n", C(INVALID_COMMAND_ARGS)),
    (f"confirm {ID}\r\n".encode(), C(INVALID_COMMAND_ARGS)),
    (f"confirm {ID} 1 2\r\n".encode(), C(INVALID_COMMAND_ARGS)),
    (f"confirm {ID} -1\r\n".encode(), C(INVALID_COMMAND_ARGS)),  # a claim is a position
    (f"confirm {ID} 9223372036854775808\r\n".encode(), C(INVALID_COMMAND_ARGS)),
    (b"confirm nope 1\r\n", C(INVALID_ID)),
    (b"outcome host-1 1\r\n", C(INVALID_COMMAND_ARGS)),
    (b"outcome host-1 -1 0\r\n", C(INVALID_COMMAND_ARGS)),  # a request id
    (b"outcome host/1 1 0\r\n", C(INVALID_NAME)),  # a run's name: a name's bytes
    (b"outcome host-1 1 86400001\r\n", C(INVALID_WAIT_TIMEOUT)),
    (f"edges {ID}\r\n".encode(), C(INVALID_COMMAND_ARGS)),
    (f"edges {ID} 1 2\r\n".encode(), C(INVALID_COMMAND_ARGS)),
    (f"edges {ID} 1 -x=1\r\n".encode(), C(INVALID_COMMAND_ARGS)),
    (b"edges nope 1\r\n", C(INVALID_ID)),
    (f"edges {ID} 0\r\n".encode(), C(INVALID_LIMIT)),
    (f"edges {ID} 101\r\n".encode(), C(INVALID_LIMIT)),
    # too many flags: the block can still be located, so the stream stays in step
    (block_request(f"run {ID} p 1 1 {SIZE} -priority=1 -x=2"), C(INVALID_COMMAND_ARGS)),
    (block_request(f"add {ID} p 1 1 {SIZE} -priority=1 -max-attempts=1 -max-fails=1 -x=1"),
     C(INVALID_COMMAND_ARGS)),
    (block_request(f"complete {ID} {SIZE} -x=1"), C(INVALID_COMMAND_ARGS)),
    # the wrong number of words on a data command: the block cannot be found, close
    (block_request(f"add {ID} p 1 {SIZE}"), F(INVALID_COMMAND_ARGS)),
    (block_request(f"add {ID} p 1 1 1 {SIZE}"), F(INVALID_COMMAND_ARGS)),
    (block_request(f"schedule {ID} p 1 1 {SIZE}"), F(INVALID_COMMAND_ARGS)),
    (block_request(f"run {ID} p 1 {SIZE}"), F(INVALID_COMMAND_ARGS)),
    (block_request(f"complete {SIZE}"), F(INVALID_COMMAND_ARGS)),
    (block_request(f"fail {ID} x {SIZE}"), F(INVALID_COMMAND_ARGS)),
    (b"complete\r\n", F(INVALID_COMMAND_ARGS)),
    # Line too long
    (b"x" * 10_001 + b"\r\n", F(LINE_TOO_LONG)),
    # Invalid payload size / Invalid result size (check 5: framing; closes)
    (block_request(f"add {ID} p 1 1 x"), F(INVALID_PAYLOAD_SIZE)),
    (block_request(f"add {ID} p 1 1 -1"), F(INVALID_PAYLOAD_SIZE)),
    (block_request(f"add {ID} p 1 1 1048577"), F(INVALID_PAYLOAD_SIZE)),
    (block_request(f"add {ID} p 1 1 15"), F(INVALID_PAYLOAD_SIZE)),  # block too long
    (block_request(f"add {ID} p 1 1 17"), F(INVALID_PAYLOAD_SIZE)),  # block too short
    (block_request(f"schedule {ID} p 1 1 2030-01-01T00:00:00Z 0x10"), F(INVALID_PAYLOAD_SIZE)),
    (block_request(f"run {ID} p 1 1 1_6"), F(INVALID_PAYLOAD_SIZE)),
    (block_request(f"complete {ID} 16.0"), F(INVALID_PAYLOAD_SIZE)),
    (block_request(f"complete {ID} 15"), F(INVALID_PAYLOAD_SIZE)),
    (block_request(f"fail {ID} x"), F(INVALID_RESULT_SIZE)),
    (block_request(f"fail {ID} 17"), F(INVALID_RESULT_SIZE)),
    (f"fail {ID} 4\r\npongXY".encode(), F(INVALID_RESULT_SIZE)),
    (f"add {ID} p 1 1 4\r\npong\n\r".encode(), F(INVALID_PAYLOAD_SIZE)),
    (f"add {ID} p 1 1 4\r\npong\r\r".encode(), F(INVALID_PAYLOAD_SIZE)),
    # Invalid ID
    (block_request(f"add {V1_TEXT} p 1 1 {SIZE}"), C(INVALID_ID)),
    (block_request(f"add {ID}x p 1 1 {SIZE}"), C(INVALID_ID)),
    (block_request(f"schedule {V1_TEXT} p 1 1 2030-01-01T00:00:00Z {SIZE}"), C(INVALID_ID)),
    (block_request(f"run {V1_TEXT} p 1 1 {SIZE}"), C(INVALID_ID)),
    (f"result {V1_TEXT} 1\r\n".encode(), C(INVALID_ID)),
    (block_request(f"complete {V1_TEXT} {SIZE}"), C(INVALID_ID)),
    (block_request(f"fail nope {SIZE}"), C(INVALID_ID)),
    (b"delete nope\r\n", C(INVALID_ID)),
    (f"inspect job {ID[:-1]}\r\n".encode(), C(INVALID_ID)),
    # Invalid Name
    (block_request(f"add {ID} p! 1 1 {SIZE}"), C(INVALID_NAME)),
    (block_request(f"add {ID} {'n' * 256} 1 1 {SIZE}"), C(INVALID_NAME)),
    (b"lease ok b/d 100\r\n", C(INVALID_NAME)),
    (b"lease a\tb 100\r\n", C(INVALID_NAME)),
    (b"inspect queue p\xe9\r\n", C(INVALID_NAME)),
    (b"inspect jobs p: 0 1\r\n", C(INVALID_NAME)),
    (b"inspect scheduled-jobs p: 0 1\r\n", C(INVALID_NAME)),
    # Invalid TTR / TTL
    (block_request(f"add {ID} p 0 1 {SIZE}"), C(INVALID_TTR)),
    (block_request(f"run {ID} p 86400001 1 {SIZE}"), C(INVALID_TTR)),
    (block_request(f"schedule {ID} p +1 1 2030-01-01T00:00:00Z {SIZE}"), C(INVALID_TTR)),
    (block_request(f"add {ID} p 1 0 {SIZE}"), C(INVALID_TTL)),
    (block_request(f"schedule {ID} p 1 18446744073709551616 2030-01-01T00:00:00Z {SIZE}"), C(INVALID_TTL)),
    # Invalid Time
    (block_request(f"schedule {ID} p 1 1 2030-01-01T00:00:00+00:00 {SIZE}"), C(INVALID_TIME)),
    (block_request(f"schedule {ID} p 1 1 2016-06-14T06:46:45.999Z {SIZE}"), C(INVALID_TIME)),
    # Invalid Max Attempts / Max Fails / Priority
    (block_request(f"add {ID} p 1 1 {SIZE} -max-attempts=256"), C(INVALID_MAX_ATTEMPTS)),
    (block_request(f"schedule {ID} p 1 1 2030-01-01T00:00:00Z {SIZE} -max-attempts=+1"),
     C(INVALID_MAX_ATTEMPTS)),
    (block_request(f"add {ID} p 1 1 {SIZE} -max-fails=-1"), C(INVALID_MAX_FAILS)),
    (block_request(f"add {ID} p 1 1 {SIZE} -priority=2147483648"), C(INVALID_PRIORITY)),
    (block_request(f"run {ID} p 1 1 {SIZE} -priority=x"), C(INVALID_PRIORITY)),
    # Invalid wait timeout
    (block_request(f"run {ID} p 1 86400001 {SIZE}"), C(INVALID_WAIT_TIMEOUT)),
    (f"result {ID} -1\r\n".encode(), C(INVALID_WAIT_TIMEOUT)),
    (b"lease p 1.5\r\n", C(INVALID_WAIT_TIMEOUT)),
    # Invalid cursor offset / Invalid limit
    (b"inspect queues -1 1\r\n", C(INVALID_CURSOR_OFFSET)),
    (b"inspect jobs p 4294967296 1\r\n", C(INVALID_CURSOR_OFFSET)),
    (b"inspect scheduled-jobs p x 1\r\n", C(INVALID_CURSOR_OFFSET)),
    (b"inspect queues 0 0\r\n", C(INVALID_LIMIT)),
    (b"inspect jobs p 0 101\r\n", C(INVALID_LIMIT)),
    (b"inspect scheduled-jobs p 0 +1\r\n", C(INVALID_LIMIT)),
    # [eventq] extensions (docs/protocol.md, "eventq extensions")
    (block_request(f"add {ID} p 1 1 {SIZE} -backoff=86400001"), C(INVALID_BACKOFF)),
    (block_request(f"add {ID} p 1 1 {SIZE} -backoff=-1"), C(INVALID_BACKOFF)),
    (block_request(f"schedule {ID} p 1 1 2016-06-14T06:46:46Z {SIZE} -backoff=x"), C(INVALID_BACKOFF)),
    # 4 flags only when -backoff is one of them
    (block_request(f"add {ID} p 1 1 {SIZE} -priority=1 -max-fails=1 -max-attempts=1 -x=1"),
     C(INVALID_COMMAND_ARGS)),
    (block_request(f"add {ID} p 1 1 {SIZE} -priority=1 -max-fails=1 -max-attempts=1 -backoff=1 -x=1"),
     C(INVALID_COMMAND_ARGS)),
    (b"touch\r\n", C(INVALID_COMMAND_ARGS)),
    (f"touch {ID} {ID}\r\n".encode(), C(INVALID_COMMAND_ARGS)),
    (f"touch {ID} -ttr=1 -x=1\r\n".encode(), C(INVALID_COMMAND_FLAGS)),  # names, not counts
    (f"touch {V1_TEXT}\r\n".encode(), C(INVALID_ID)),
    (f"touch {ID} -ttr=0\r\n".encode(), C(INVALID_TTR)),
    (f"touch {ID} -ttr=86400001\r\n".encode(), C(INVALID_TTR)),
    (b"pause\r\n", C(INVALID_COMMAND_ARGS)),
    (b"pause a b\r\n", C(INVALID_COMMAND_ARGS)),
    (b"pause a -x=1 -y=2\r\n", C(INVALID_COMMAND_FLAGS)),
    (b"resume a -ttr=1\r\n", C(INVALID_COMMAND_FLAGS)),
    (b"pause a!\r\n", C(INVALID_NAME)),
    (b"resume a!\r\n", C(INVALID_NAME)),
]
# fmt: on


@pytest.mark.parametrize(("wire", "error"), ERRORS, ids=[w[:48].decode("latin-1") for w, _ in ERRORS])
def test_error(wire: bytes, error: ClientError) -> None:
    assert_error(wire, error)


def test_every_parser_error_text_is_reached() -> None:
    reached = {error.text for _, error in ERRORS}
    # State errors (Duplicate job, Duplicate result, NOT-FOUND, TIMEOUT) are the core's.
    assert reached == {
        UNKNOWN_COMMAND, LINE_TOO_LONG, INVALID_COMMAND_ARGS, INVALID_COMMAND_FLAGS,
        INVALID_PAYLOAD_SIZE, INVALID_RESULT_SIZE, INVALID_ID, INVALID_NAME, INVALID_TTR,
        INVALID_TTL, INVALID_TIME, INVALID_MAX_ATTEMPTS, INVALID_MAX_FAILS, INVALID_PRIORITY,
        INVALID_WAIT_TIMEOUT, INVALID_CURSOR_OFFSET, INVALID_LIMIT, INVALID_BACKOFF,
    }


# --- check order across checks 1-5 ----------------------------------------------------

# fmt: off
ORDER = [
    # 1 flag syntax before 2 verb
    (b"bogus -x=\r\n", C(INVALID_COMMAND_FLAGS)),
    # 1 flag syntax before 3 counts
    (b"delete -x=\r\n", C(INVALID_COMMAND_FLAGS)),
    (b"inspect -x=\r\n", C(INVALID_COMMAND_FLAGS)),
    # 1 flag syntax on a data command: its block is still consumed when it can be found
    (block_request(f"add {ID} p 1 1 {SIZE} -=1"), C(INVALID_COMMAND_FLAGS)),
    (block_request(f"complete -x= {ID} {SIZE}"), C(INVALID_COMMAND_FLAGS)),
    (block_request(f"complete {ID} x -x="), F(INVALID_COMMAND_FLAGS)),
    (block_request(f"complete {ID} -x= 1 {SIZE}"), F(INVALID_COMMAND_FLAGS)),
    # 3 counts before 4 flag names
    (b"lease p 1 -bogus=1\r\n", C(INVALID_COMMAND_ARGS)),
    (block_request(f"run {ID} p 1 1 {SIZE} -bogus=1 -priority=1"), C(INVALID_COMMAND_ARGS)),
    # 4 flag names before 5 framing: the reply names the flag; the bad size closes
    (block_request(f"add {ID} p 1 1 x -bogus=1"), F(INVALID_COMMAND_FLAGS)),
    (f"add {ID} p 1 1 4 -bogus=1\r\npongXY".encode(), F(INVALID_COMMAND_FLAGS)),
    # 3 flag count before 5 framing, likewise
    (block_request(f"fail {ID} x -a=1"), F(INVALID_COMMAND_ARGS)),
    # 5 framing before 6 fields
    (block_request("add bad bad! 0 0 x -priority=x"), F(INVALID_PAYLOAD_SIZE)),
    (b"add bad bad! 0 0 4\r\npongXY", F(INVALID_PAYLOAD_SIZE)),
    (block_request("fail bad x"), F(INVALID_RESULT_SIZE)),
    # inspect: the object is part of check 2, its arguments are check 3
    (b"inspect bogus -x=\r\n", C(INVALID_COMMAND_FLAGS)),
    (b"inspect jobs bad! 0\r\n", C(INVALID_COMMAND_ARGS)),
]
# fmt: on


@pytest.mark.parametrize(("wire", "error"), ORDER, ids=[w[:48].decode("latin-1") for w, _ in ORDER])
def test_check_order(wire: bytes, error: ClientError) -> None:
    assert_error(wire, error)


# --- check 6: the fields, in the order listed under each command ----------------------
# Each ladder lists (good value, bad value, error) per field in the spec's field order.
# Rung i has the first i fields good and the rest bad: its error is field i's.

Ladder = list[tuple[str, str, str]]
JOB_FLAGS: Ladder = [
    ("-max-attempts=1", "-max-attempts=256", INVALID_MAX_ATTEMPTS),
    ("-max-fails=1", "-max-fails=x", INVALID_MAX_FAILS),
    ("-priority=1", "-priority=+-1", INVALID_PRIORITY),
]

# fmt: off
LADDERS: dict[str, tuple[Callable[..., bytes], Ladder]] = {
    "add": (
        # flags first on the line: the field order, not the token order, decides
        lambda i, n, r, t, a, f, p: block_request(f"add {p} {f} {a} {i} {n} {r} {t} {SIZE}"),
        [(ID, V1_TEXT, INVALID_ID), ("p", "p?", INVALID_NAME), ("1", "0", INVALID_TTR),
         ("1", "-1", INVALID_TTL), *JOB_FLAGS],
    ),
    # [eventq] backoff is checked after priority
    "add -backoff": (
        lambda i, n, r, t, a, f, p, b: block_request(f"add {b} {p} {f} {a} {i} {n} {r} {t} {SIZE}"),
        [(ID, V1_TEXT, INVALID_ID), ("p", "p?", INVALID_NAME), ("1", "0", INVALID_TTR),
         ("1", "-1", INVALID_TTL), *JOB_FLAGS, ("-backoff=5", "-backoff=5x", INVALID_BACKOFF)],
    ),
    # touch: id (v4), then ttr
    "touch": (
        lambda t, i: f"touch {t} {i}\r\n".encode(),
        [(ID, V1_TEXT, INVALID_ID), ("-ttr=5", "-ttr=0", INVALID_TTR)],
    ),
    "pause": (lambda n: f"pause {n}\r\n".encode(), [("p", "p!", INVALID_NAME)]),
    "resume": (lambda n: f"resume {n}\r\n".encode(), [("p", "p!", INVALID_NAME)]),
    "schedule": (
        lambda i, n, r, t, tm, a, f, p: block_request(
            f"schedule {i} {p} {n} {f} {r} {a} {t} {tm} {SIZE}"),
        [(ID, "x", INVALID_ID), ("p", "p!", INVALID_NAME), ("1", "x", INVALID_TTR),
         ("1", "0", INVALID_TTL),
         # a time that is valid but too early is refused right after the time field
         ("2016-06-14T06:46:46Z", "2016-06-14T06:46:45Z", INVALID_TIME), *JOB_FLAGS],
    ),
    "run": (
        lambda i, n, r, p, w: block_request(f"run {i} {n} {r} {w} {SIZE} {p}"),
        [(ID, V1_TEXT, INVALID_ID), ("p", "p,", INVALID_NAME), ("1", "86400001", INVALID_TTR),
         ("-priority=1", "-priority=1.0", INVALID_PRIORITY),
         ("1", "86400001", INVALID_WAIT_TIMEOUT)],
    ),
    "result": (
        lambda i, w: f"result {i} {w}\r\n".encode(),
        [(ID, V1_TEXT, INVALID_ID), ("1", "x", INVALID_WAIT_TIMEOUT)],
    ),
    "lease": (
        # wait-timeout first, then each name
        lambda w, n1, n2: f"lease {n1} {n2} {w}\r\n".encode(),
        [("1", "-1", INVALID_WAIT_TIMEOUT), ("a", "a$", INVALID_NAME), ("b", "b$", INVALID_NAME)],
    ),
    "complete": (lambda i: block_request(f"complete {i} {SIZE}"), [(ID, V1_TEXT, INVALID_ID)]),
    "fail": (lambda i: block_request(f"fail {i} {SIZE}"), [(ID, V1_TEXT, INVALID_ID)]),
    "delete": (lambda i: f"delete {i}\r\n".encode(), [(ID, "x", INVALID_ID)]),
    "inspect queues": (
        lambda o, n: f"inspect queues {o} {n}\r\n".encode(),
        [("0", "x", INVALID_CURSOR_OFFSET), ("1", "x", INVALID_LIMIT)],
    ),
    "inspect queue": (lambda n: f"inspect queue {n}\r\n".encode(), [("p", "p!", INVALID_NAME)]),
    "inspect jobs": (
        lambda n, o, lim: f"inspect jobs {n} {o} {lim}\r\n".encode(),
        [("p", "p!", INVALID_NAME), ("0", "x", INVALID_CURSOR_OFFSET), ("1", "x", INVALID_LIMIT)],
    ),
    "inspect scheduled-jobs": (
        lambda n, o, lim: f"inspect scheduled-jobs {n} {o} {lim}\r\n".encode(),
        [("p", "p!", INVALID_NAME), ("0", "x", INVALID_CURSOR_OFFSET), ("1", "x", INVALID_LIMIT)],
    ),
    "inspect job": (lambda i: f"inspect job {i}\r\n".encode(), [(ID, "x", INVALID_ID)]),
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


# --- the schedule clock ---------------------------------------------------------------


def test_schedule_time_plus_ttl_must_be_after_now() -> None:
    def schedule(ttl: int, time: str) -> bytes:
        return f"schedule {ID} p 1 {ttl} {time} 0\r\n\r\n".encode()

    # now is 2016-06-14T06:46:46Z; time + ttl == now is not in the future
    assert events_whole(schedule(1000, "2016-06-14T06:46:45Z"))[0] == [ClientError(INVALID_TIME)]
    assert events_whole(schedule(1001, "2016-06-14T06:46:45Z"))[0] == [
        Schedule(V4_ID, "p", 1, 1001, NOW_MS - 1000, b"")
    ]
    # a huge ttl makes even year 0001 acceptable (a past time wakes at once)
    assert events_whole(schedule(2**64 - 1, "0001-01-01T00:00:00Z"))[0][0].time_ms < 0


def test_the_clock_is_read_when_the_request_is_complete() -> None:
    now = [NOW_MS]
    parser = Parser(lambda: now[0])
    parser.feed(f"schedule {ID} p 1 1000 2016-06-14T06:46:46Z 1\r\n".encode())
    assert parser.next_event() is None
    now[0] += 1000  # the block arrives a second later: time + ttl is no longer ahead
    parser.feed(b"x\r\n")
    assert parser.next_event() == ClientError(INVALID_TIME)


def test_errors_are_returned_in_request_order() -> None:
    wire = (
        b"bogus\r\n"
        + block_request(f"add {ID} p 0 1 {SIZE}")
        + b"lease p 1\r\n"
        + b"inspect queues 0 0\r\n"
        + TRAILER
    )
    for feed in (events_whole, events_bytewise):
        events, closed = feed(wire)
        assert events[:2] == [ClientError(UNKNOWN_COMMAND), ClientError(INVALID_TTR)]
        assert events[3] == ClientError(INVALID_LIMIT)
        assert len(events) == 5 and not closed
