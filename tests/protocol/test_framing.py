"""Framing (docs/protocol.md, "Connections and framing"): lines, limits, data blocks, closing."""

from __future__ import annotations

import time

import pytest

from eventq.errors import (
    INVALID_PAYLOAD_SIZE,
    LINE_TOO_LONG,
    UNKNOWN_COMMAND,
    ClientError,
    FramingError,
)
from eventq.limits import MAX_LINE_BYTES, MAX_PAYLOAD_BYTES
from eventq.protocol import Add, Close, Complete, InspectServer, Lease
from support.protocol_helpers import (
    TRAILER,
    TRAILER_EVENT,
    V4_ID,
    V4_TEXT,
    assert_parses_three_ways,
    events_bytewise,
    events_in_chunks,
    events_whole,
    new_parser,
)

ID = V4_TEXT
TOO_LONG = FramingError(LINE_TOO_LONG)


# --- line length ----------------------------------------------------------------------


def lease_line(length: int) -> tuple[bytes, Lease]:
    """A valid lease line of exactly ``length`` bytes (without \\r\\n): 255-byte names
    and one shorter name to make up the rest."""
    room = length - len("lease  0")  # bytes for the names and the spaces between them
    full, rest = divmod(room + 1, 256)  # each name but the first costs a space
    names = ["n" * 255] * full + (["m" * (rest - 1)] if rest > 1 else [])
    line = ("lease " + " ".join(names) + " 0").encode()
    assert len(line) == length and rest != 1
    return line + b"\r\n", Lease(tuple(names), 0)


def test_a_line_of_exactly_the_limit_is_accepted() -> None:
    wire, lease = lease_line(MAX_LINE_BYTES)
    assert_parses_three_ways(wire, lease)
    assert_parses_three_ways(b"x" * MAX_LINE_BYTES + b"\r\n", ClientError(UNKNOWN_COMMAND))


def test_a_line_one_byte_over_the_limit_closes() -> None:
    wire, _ = lease_line(MAX_LINE_BYTES + 1)
    assert_parses_three_ways(wire, TOO_LONG)
    assert_parses_three_ways(b"x" * (MAX_LINE_BYTES + 1) + b"\r\n", TOO_LONG)
    assert_parses_three_ways(b"x" * (MAX_LINE_BYTES + 1) + b"\n", TOO_LONG)


def test_a_long_line_fails_as_soon_as_that_is_certain() -> None:
    parser = new_parser()
    parser.feed(b"x" * MAX_LINE_BYTES)
    assert parser.next_event() is None
    parser.feed(b"\r")  # may still be the start of the terminator
    assert parser.next_event() is None
    parser.feed(b"\r")  # the first \r was content: 10,001 bytes at least
    assert parser.next_event() == TOO_LONG
    assert parser.closed

    parser = new_parser()
    parser.feed(b"x" * (MAX_LINE_BYTES + 1))  # no terminator needed to know
    assert parser.next_event() == TOO_LONG


def test_a_long_line_does_not_wait_for_its_end_in_small_feeds() -> None:
    parser = new_parser()
    for _ in range(MAX_LINE_BYTES):
        parser.feed(b"a")
        assert parser.next_event() is None
    parser.feed(b"a")
    assert parser.next_event() == TOO_LONG


def test_the_limit_does_not_count_data_blocks() -> None:
    payload = b"p" * (MAX_LINE_BYTES * 3)
    wire = f"add {ID} p 1 1 {len(payload)}\r\n".encode() + payload + b"\r\n"
    assert events_whole(wire) == ([Add(V4_ID, "p", 1, 1, payload)], False)


# --- line endings ---------------------------------------------------------------------


@pytest.mark.parametrize("wire", [b"\n", b"inspect server\n", b"x\n", b"x\r \n"])
def test_a_bare_newline_closes_without_a_reply(wire: bytes) -> None:
    assert_parses_three_ways(wire, Close())


def test_close_comes_after_the_earlier_requests() -> None:
    events, closed = events_whole(TRAILER + b"lease a 0\n" + TRAILER)
    assert (events, closed) == ([TRAILER_EVENT, Close()], True)


def test_cr_and_lf_may_arrive_in_separate_feeds() -> None:
    events, closed = events_in_chunks(b"", [b"inspect server\r", b"\n"])
    assert (events, closed) == ([InspectServer()], False)


def test_a_cr_inside_a_line_is_an_ordinary_byte() -> None:
    assert_parses_three_ways(b"\rinspect server\r\n", ClientError(UNKNOWN_COMMAND))
    assert_parses_three_ways(b"lease a\rb 0\r\n", ClientError("Invalid Name"))


def test_nothing_is_returned_after_a_close() -> None:
    parser = new_parser()
    parser.feed(b"\n" + TRAILER)
    assert parser.next_event() == Close()
    assert parser.closed
    parser.feed(TRAILER * 3)
    assert parser.next_event() is None
    assert parser.next_event() is None
    assert parser.closed


def test_an_empty_parser_needs_data() -> None:
    parser = new_parser()
    assert parser.next_event() is None
    parser.feed(b"")
    assert parser.next_event() is None
    assert not parser.closed


# --- data blocks ----------------------------------------------------------------------


def test_a_data_block_of_exactly_one_mebibyte_is_accepted() -> None:
    payload = bytes(range(256)) * (MAX_PAYLOAD_BYTES // 256)
    wire = f"complete {ID} {MAX_PAYLOAD_BYTES}\r\n".encode() + payload + b"\r\n"
    assert events_whole(wire + TRAILER) == ([Complete(V4_ID, payload), TRAILER_EVENT], False)


def test_a_data_block_one_byte_over_closes() -> None:
    payload = b"x" * (MAX_PAYLOAD_BYTES + 1)
    wire = f"add {ID} p 1 1 {MAX_PAYLOAD_BYTES + 1}\r\n".encode() + payload + b"\r\n"
    assert_parses_three_ways(wire, FramingError(INVALID_PAYLOAD_SIZE))


@pytest.mark.parametrize("after", [b"XY", b"\rX", b"\n\r", b"\r\r", b" \r\n", b"\n"])
def test_a_data_block_must_be_followed_by_crlf(after: bytes) -> None:
    wire = f"add {ID} p 1 1 4\r\n".encode() + b"pong" + after
    assert_parses_three_ways(wire, FramingError(INVALID_PAYLOAD_SIZE))


def test_the_crlf_after_a_block_may_arrive_in_separate_feeds() -> None:
    head = f"add {ID} p 1 1 4\r\n".encode()
    events, closed = events_in_chunks(b"", [head, b"po", b"ng", b"\r", b"\n", TRAILER])
    assert (events, closed) == ([Add(V4_ID, "p", 1, 1, b"pong"), TRAILER_EVENT], False)


def test_a_block_is_not_searched_for_line_ends() -> None:
    payload = b"\n\r\n\n" + TRAILER + b"\r"
    wire = f"add {ID} p 1 1 {len(payload)}\r\n".encode() + payload + b"\r\n"
    assert_parses_three_ways(wire, Add(V4_ID, "p", 1, 1, payload))


def test_a_bad_trailer_fails_on_its_first_wrong_byte() -> None:
    parser = new_parser()
    parser.feed(f"add {ID} p 1 1 4\r\npongX".encode())
    assert parser.next_event() == FramingError(INVALID_PAYLOAD_SIZE)


def test_a_request_waits_for_the_second_byte_of_its_trailer() -> None:
    parser = new_parser()
    parser.feed(f"add {ID} p 1 1 4\r\npong\r".encode())
    assert parser.next_event() is None
    parser.feed(b"\n")
    assert parser.next_event() == Add(V4_ID, "p", 1, 1, b"pong")


# --- cost: linear in the input --------------------------------------------------------


def _drain_bytewise(wire: bytes) -> list[object]:
    parser = new_parser()
    events = []
    for i in range(len(wire)):
        parser.feed(wire[i : i + 1])
        while (event := parser.next_event()) is not None:
            events.append(event)
    return events


def test_a_mebibyte_block_fed_byte_by_byte_is_linear() -> None:
    payload = b"z" * MAX_PAYLOAD_BYTES
    wire = f"complete {ID} {len(payload)}\r\n".encode() + payload + b"\r\n"
    started = time.perf_counter()
    assert _drain_bytewise(wire) == [Complete(V4_ID, payload)]
    # Linear work is about a second; copying the buffer per byte would take hours.
    assert time.perf_counter() - started < 30


def test_many_pipelined_requests_fed_byte_by_byte() -> None:
    wire = TRAILER * 20_000  # 320 KB of lines
    events, closed = events_bytewise(wire)
    assert events == [TRAILER_EVENT] * 20_000 and not closed


@pytest.mark.parametrize("chunk_size", [1_000, 7_919, 65_536])
def test_large_pipelined_blocks_in_any_chunking(chunk_size: int) -> None:
    # Blocks big enough that the buffer drops consumed bytes while lines are pending.
    requests = [Add(V4_ID, "p", 1, 1, bytes([n]) * (100_000 + n)) for n in range(3)]
    wire = b"".join(
        f"add {ID} p 1 1 {len(r.payload)}\r\n".encode() + r.payload + b"\r\n" + TRAILER
        for r in requests
    )
    expected = [event for r in requests for event in (r, TRAILER_EVENT)]
    chunks = [wire[i : i + chunk_size] for i in range(0, len(wire), chunk_size)]
    assert events_in_chunks(wire, chunks) == (expected, False)
    # the first line split between \r and \n, everything else in one feed
    cut = wire.index(b"\n")
    assert events_in_chunks(wire, [wire[:cut], wire[cut:]]) == (expected, False)
