"""Where a reply ends, for every reply shape: fed whole, cut at every byte, and with the
next reply behind it (a forwarding gateway relays exactly one reply: docs/architecture.md,
"Scaling out")."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventq.errors import NotFound, ServerError
from eventq.protocol import replies
from eventq.protocol.reply_reader import (
    Block,
    MalformedReply,
    Shape,
    blocks_reply,
    data_reply_fields,
    parse_blocks,
    reply_end,
)

ID = uuid.UUID("6ba7b810-9dad-41d1-80b4-00c04fd430c8")
TRICKY = b"a\r\nb\r\n+OK 3\r\n"  # a payload that looks like lines and replies


def job(payload: bytes = TRICKY, scheduled_ms=None) -> replies.JobView:
    return replies.JobView(ID, "q", 1000, 60000, payload, 3, 1, 0, 0, 7, 4,
                           1_700_000_000_000, scheduled_ms)


CASES = [
    (replies.ok(), Shape.STATUS),
    (NotFound().reply, Shape.DATA),
    (ServerError("moving; retry").reply, Shape.BLOCKS),
    (replies.lease_reply(ID, "q", 1000, TRICKY), Shape.DATA),
    (replies.result_reply(ID, True, b""), Shape.DATA),
    (replies.job_blocks([job(), job(b""), job(b"x" * 300, 1_700_000_000_000)]), Shape.BLOCKS),
    (replies.job_blocks([]), Shape.BLOCKS),
    (replies.queue_blocks([replies.QueueView("a", 1, 2), replies.QueueView("b", 0, 0)]),
     Shape.BLOCKS),
    (replies.server_reply(3, 0, 1_700_000_000_000), Shape.BLOCKS),
    (replies.bulk_blocks([replies.BulkView(0, 5, 1)]), Shape.BLOCKS),
    (replies.digest_reply("ab" * 32), Shape.LINES),
]


@pytest.mark.parametrize(("reply", "shape"), CASES)
def test_a_reply_ends_exactly_where_it_ends(reply: bytes, shape: Shape) -> None:
    assert reply_end(reply, shape) == len(reply)
    assert reply_end(bytearray(reply), shape) == len(reply)  # what a peer link reads into
    assert reply_end(reply + replies.ok() + reply, shape) == len(reply)
    for cut in range(len(reply)):
        assert reply_end(reply[:cut], shape) is None, cut


@given(st.binary(max_size=200), st.binary(max_size=50))
def test_job_blocks_parse_back_whatever_the_payload(payload: bytes, other: bytes) -> None:
    reply = replies.job_blocks([job(payload), job(other)])
    assert reply_end(reply + b"+OK\r\n", Shape.BLOCKS) == len(reply)
    blocks = parse_blocks(reply)
    assert [b.value(b"payload") for b in blocks] == [payload, other]
    assert blocks_reply(blocks) == reply


def test_blocks_can_drop_a_key() -> None:
    block = Block(b"x", ((b"ready-len", b"1"), (b"order", b"9"), (b"scheduled-len", b"2")))
    assert block.without(b"order").to_bytes() == b"x 2\r\nready-len 1\r\nscheduled-len 2\r\n"


def test_data_reply_fields() -> None:
    words, data = data_reply_fields(replies.lease_reply(ID, "q", 1000, TRICKY))
    assert words == [str(ID).encode(), b"q", b"1000", b"%d" % len(TRICKY)]
    assert data == TRICKY


@pytest.mark.parametrize("reply", [b"", b"+OK 1", b"+OK 1\r\nno-end", b"+OK 1\r\nx q y\r\n"])
def test_a_data_reply_cut_short_or_without_a_size_is_malformed(reply: bytes) -> None:
    """Not a TypeError or ValueError: the caller's peer link reports MalformedReply."""
    with pytest.raises(MalformedReply):
        data_reply_fields(reply)


def test_what_is_not_a_reply_says_so() -> None:
    with pytest.raises(MalformedReply):
        reply_end(b"HTTP/1.1 200 OK\r\n", Shape.BLOCKS)
