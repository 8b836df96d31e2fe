"""Exact reply bytes of docs/workflows.md, "Dependencies" and "Inputs": the job block's
``after`` and ``waiting`` keys, state 5 WAITING, the queue block's ``waiting-len``, the
``inputs`` reply; and that the reply reader finds where each ends and reads it back."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventq.protocol import (
    InputView,
    JobView,
    QueueView,
    inputs_reply,
    job_blocks,
    parse_time_ms,
    queue_blocks,
)
from eventq.protocol.replies import (
    edges_reply,
    inputs_reply_stream,
    job_blocks_stream,
    ordered_job_blocks,
)
from eventq.protocol.reply_reader import (
    MalformedReply,
    Shape,
    blocks_reply,
    data_reply_entries,
    parse_blocks,
    reply_end,
)

ID = uuid.UUID("16fd2706-8baf-433b-82eb-8c7fada847da")
UP1 = uuid.UUID("6ba7b810-9dad-41d1-80b4-00c04fd430c4")
UP2 = uuid.UUID("6ba7b810-9dad-41d1-80b4-00c04fd430c8")
WAITING = 5  # docs/workflows.md, "Job and queue blocks": "5 WAITING"
CREATED = parse_time_ms("2024-01-01T00:00:00Z")


def etl(**changes: object) -> JobView:
    """The spec's example job: queue etl, payload ``{}``, WAITING on 2 upstreams."""
    fields: dict[str, object] = dict(
        id=ID, name="etl", ttr_ms=60000, ttl_ms=86400000, payload=b"{}", max_attempts=0,
        attempts=0, max_fails=0, fails=0, priority=0, state=WAITING, created_ms=CREATED,
        after=2, waiting=1,
    )
    fields.update(changes)
    return JobView(**fields)  # type: ignore[arg-type]


WORKQ_KEYS = (
    b"name etl\r\nttr 60000\r\nttl 86400000\r\npayload-size 2\r\npayload {}\r\n"
    b"max-attempts 0\r\nattempts 0\r\nmax-fails 0\r\nfails 0\r\npriority 0\r\n"
)


def test_the_spec_example_job_block_without_its_tags_line() -> None:
    """docs/workflows.md, "Dependencies": a WAITING dependent with 2 upstreams, one
    COMPLETED, tagged ``nightly``. Without its tags it is the example without its ``tags
    nightly`` line, and its key count is 14, not 15 (the whole example, tags and all:
    tests/protocol/test_tags.py)."""
    assert job_blocks([etl()]) == (
        b"+OK 1\r\n16fd2706-8baf-433b-82eb-8c7fada847da 14\r\n" + WORKQ_KEYS
        + b"state 5\r\ncreated 2024-01-01T00:00:00Z\r\nafter 2\r\nwaiting 1\r\n"
    )


def test_after_and_waiting_follow_time() -> None:
    """A released dependent (waiting 0) has a ready time: ``time``, then ``after`` and
    ``waiting`` (docs/workflows.md, "Job and queue blocks")."""
    view = etl(state=0, waiting=0, scheduled_ms=parse_time_ms("2024-01-01T00:00:07Z"))
    assert job_blocks([view]) == (
        b"+OK 1\r\n16fd2706-8baf-433b-82eb-8c7fada847da 15\r\n" + WORKQ_KEYS
        + b"state 0\r\ncreated 2024-01-01T00:00:00Z\r\ntime 2024-01-01T00:00:07Z\r\n"
        b"after 2\r\nwaiting 0\r\n"
    )


def test_a_job_without_upstreams_keeps_the_workq_block() -> None:
    for view in (etl(after=0, waiting=0, state=0),
                 etl(after=0, waiting=0, state=0, scheduled_ms=CREATED)):
        reply = job_blocks([view])
        assert b"after" not in reply and b"waiting" not in reply
        assert reply.split(b"\r\n")[1].endswith(b" 13" if view.scheduled_ms else b" 12")
    # state 5 alone encodes as any state does (a WAITING job always has upstreams)
    assert b"state 5\r\n" in job_blocks([etl(after=0, waiting=0)])


def test_the_peer_form_keeps_order_last() -> None:
    reply = ordered_job_blocks([(9, etl())])
    assert reply.endswith(b"after 2\r\nwaiting 1\r\norder 9\r\n")
    assert b" 15\r\n" in reply
    [block] = parse_blocks(reply)
    assert blocks_reply([block.without(b"order")]) == job_blocks([etl()])


def test_the_streamed_page_is_the_same_bytes() -> None:
    views = [etl(), etl(after=0, waiting=0, state=0)]
    assert b"".join(job_blocks_stream(2, iter(views))) == job_blocks(views)


@pytest.mark.parametrize(("after", "waiting"), [(0, 1), (1, 2), (2, -1), (-1, 0)])
def test_a_job_view_refuses_impossible_counts(after: int, waiting: int) -> None:
    with pytest.raises(ValueError):
        etl(after=after, waiting=waiting)


# --- queue blocks ---------------------------------------------------------------------


def test_waiting_len_comes_after_scheduled_len_and_before_paused() -> None:
    assert queue_blocks([QueueView("q", 3, 1, waiting_len=7)]) == (
        b"+OK 1\r\nq 3\r\nready-len 3\r\nscheduled-len 1\r\nwaiting-len 7\r\n"
    )
    assert queue_blocks([QueueView("q", 3, 1, paused=True, waiting_len=7)]) == (
        b"+OK 1\r\nq 4\r\nready-len 3\r\nscheduled-len 1\r\nwaiting-len 7\r\npaused 1\r\n"
    )


def test_a_queue_without_waiting_jobs_keeps_its_block() -> None:
    assert queue_blocks([QueueView("q", 3, 1, waiting_len=0)]) == (
        b"+OK 1\r\nq 2\r\nready-len 3\r\nscheduled-len 1\r\n"
    )
    assert queue_blocks([QueueView("q", 0, 0, True, 0)]) == (
        b"+OK 1\r\nq 3\r\nready-len 0\r\nscheduled-len 0\r\npaused 1\r\n"
    )
    # positional construction as the gateway's merge_queues does it still works
    assert QueueView("q", 1, 2, True) == QueueView("q", 1, 2, paused=True, waiting_len=0)
    with pytest.raises(ValueError):
        QueueView("q", 0, 0, waiting_len=-1)


# --- inputs ---------------------------------------------------------------------------


def test_inputs_reply() -> None:
    """``+OK <n>``, then per finished upstream in -after order ``<upstream-id> <1|0>
    <size>`` and its raw result (docs/workflows.md, "Inputs")."""
    reply = inputs_reply([InputView(UP2, True, b"a\r\nb"), InputView(UP1, False, b"")])
    assert reply == (
        b"+OK 2\r\n"
        b"6ba7b810-9dad-41d1-80b4-00c04fd430c8 1 4\r\na\r\nb\r\n"
        b"6ba7b810-9dad-41d1-80b4-00c04fd430c4 0 0\r\n\r\n"
    )
    assert inputs_reply([]) == b"+OK 0\r\n"  # no upstreams, or none finished


def test_edges_reply_lists_upstreams_then_dependents_as_lines() -> None:
    """edges (internal, the dashboard's job page): one line per edge, read as LINES."""
    reply = edges_reply([(UP1, "completed"), (UP2, "unfinished")], [ID])
    assert reply == (
        b"+OK 3\r\n"
        b"upstream 6ba7b810-9dad-41d1-80b4-00c04fd430c4 completed\r\n"
        b"upstream 6ba7b810-9dad-41d1-80b4-00c04fd430c8 unfinished\r\n"
        b"dependent 16fd2706-8baf-433b-82eb-8c7fada847da\r\n")
    assert reply_end(reply + b"+OK\r\n", Shape.LINES) == len(reply)
    assert edges_reply([], []) == b"+OK 0\r\n"


def test_inputs_in_pieces() -> None:
    views = [InputView(UP1, True, b"x" * 10), InputView(UP2, False, b"no")]
    assert b"".join(inputs_reply_stream(2, iter(views))) == inputs_reply(views)
    assert b"".join(inputs_reply_stream(0, iter([]))) == b"+OK 0\r\n"
    with pytest.raises(ValueError):
        list(inputs_reply_stream(3, iter(views)))


# --- the reply reader -----------------------------------------------------------------

TRICKY = b"a\r\nb\r\n+OK 3\r\n"  # a result that looks like lines and replies

CASES = [
    (job_blocks([etl(payload=TRICKY), etl(after=0, waiting=0), etl(scheduled_ms=CREATED)]),
     Shape.BLOCKS),
    (ordered_job_blocks([(1, etl()), (2, etl(waiting=2))]), Shape.BLOCKS),
    (queue_blocks([QueueView("a", 1, 2, waiting_len=3), QueueView("b", 0, 0, True, 9),
                   QueueView("c", 0, 0)]), Shape.BLOCKS),
    (inputs_reply([InputView(UP1, True, TRICKY), InputView(UP2, False, b"")]), Shape.DATA),
    (inputs_reply([]), Shape.DATA),
]


@pytest.mark.parametrize(("reply", "shape"), CASES)
def test_a_reply_ends_exactly_where_it_ends(reply: bytes, shape: Shape) -> None:
    assert reply_end(reply, shape) == len(reply)
    assert reply_end(reply + b"+OK\r\n" + reply, shape) == len(reply)
    for cut in range(len(reply)):
        assert reply_end(reply[:cut], shape) is None, cut


def test_blocks_read_the_new_keys() -> None:
    [job] = parse_blocks(job_blocks([etl(payload=TRICKY)]))
    assert (job.value(b"state"), job.value(b"after"), job.value(b"waiting")) == (b"5", b"2", b"1")
    assert job.value(b"payload") == TRICKY
    [queue] = parse_blocks(queue_blocks([QueueView("a", 1, 2, True, 3)]))
    assert queue.lines == ((b"ready-len", b"1"), (b"scheduled-len", b"2"),
                           (b"waiting-len", b"3"), (b"paused", b"1"))


@given(st.lists(st.tuples(st.uuids(version=4), st.booleans(), st.binary(max_size=64)),
                max_size=6))
def test_inputs_read_back_whatever_the_results(entries: list[tuple[uuid.UUID, bool, bytes]]) -> None:
    reply = inputs_reply([InputView(*entry) for entry in entries])
    assert reply_end(reply + b"+OK\r\n", Shape.DATA) == len(reply)
    read = data_reply_entries(reply)
    assert [(uuid.UUID(words[0].decode()), words[1] == b"1", data) for words, data in read] == entries


@pytest.mark.parametrize("reply", [b"", b"+OK 1\r\n", b"+OK 1\r\nx 1 4\r\nab\r\n",
                                   b"+OK 1\r\nx 1 2\r\nabcd\r\n", b"+OK 1\r\nx q\r\n"])
def test_a_data_reply_cut_short_or_without_a_size_is_malformed(reply: bytes) -> None:
    with pytest.raises(MalformedReply):
        data_reply_entries(reply)
