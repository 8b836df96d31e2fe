"""Exact reply bytes (docs/protocol.md, "Commands", and the examples of workq's protocol
document)."""

from __future__ import annotations

import uuid

import pytest

from eventq import errors
from eventq.protocol import (
    BulkView,
    JobView,
    QueueView,
    bulk_blocks,
    digest_reply,
    error_reply,
    job_blocks,
    lease_reply,
    ok,
    parse_time_ms,
    queue_blocks,
    result_reply,
    server_reply,
)

ID = uuid.UUID("6BA7B810-9DAD-11D1-80B4-00C04FD430C4")  # replies are lowercase


def job(id_suffix: str, created: str, **changes: object) -> JobView:
    fields: dict[str, object] = dict(
        id=uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430" + id_suffix),
        name="ping", ttr_ms=1000, ttl_ms=60000, payload=b"ping", max_attempts=0,
        attempts=0, max_fails=0, fails=0, priority=0, state=0,
        created_ms=parse_time_ms(created), scheduled_ms=None,
    )
    fields.update(changes)
    return JobView(**fields)  # type: ignore[arg-type]


def test_ok() -> None:
    assert ok() == b"+OK\r\n"


def test_result_reply() -> None:
    assert result_reply(ID, True, b"pong") == (
        b"+OK 1\r\n6ba7b810-9dad-11d1-80b4-00c04fd430c4 1 4\r\npong\r\n"
    )
    # a job that failed by running out of attempts has an empty result
    assert result_reply(ID, False, b"") == b"+OK 1\r\n6ba7b810-9dad-11d1-80b4-00c04fd430c4 0 0\r\n\r\n"
    assert result_reply(ID, False, b"a\r\nb") == (
        b"+OK 1\r\n6ba7b810-9dad-11d1-80b4-00c04fd430c4 0 4\r\na\r\nb\r\n"
    )


def test_lease_reply() -> None:
    assert lease_reply(ID, "ping", 1000, b"ping") == (
        b"+OK 1\r\n6ba7b810-9dad-11d1-80b4-00c04fd430c4 ping 1000 4\r\nping\r\n"
    )
    assert lease_reply(ID, "a.b", 1, b"") == b"+OK 1\r\n6ba7b810-9dad-11d1-80b4-00c04fd430c4 a.b 1 0\r\n\r\n"


def test_inspect_job_example() -> None:
    reply = job_blocks([job("c4", "2016-08-22T01:50:51Z", ttl_ms=600000)])
    assert reply == (
        b"+OK 1\r\n"
        b"6ba7b810-9dad-11d1-80b4-00c04fd430c4 12\r\n"
        b"name ping\r\n"
        b"ttr 1000\r\n"
        b"ttl 600000\r\n"
        b"payload-size 4\r\n"
        b"payload ping\r\n"
        b"max-attempts 0\r\n"
        b"attempts 0\r\n"
        b"max-fails 0\r\n"
        b"fails 0\r\n"
        b"priority 0\r\n"
        b"state 0\r\n"
        b"created 2016-08-22T01:50:51Z\r\n"
    )


def _block(id_suffix: str, created: str, time: str | None = None) -> bytes:
    head = b"6ba7b810-9dad-11d1-80b4-00c04fd430%s %d\r\n" % (id_suffix.encode(), 13 if time else 12)
    keys = (
        b"name ping\r\nttr 1000\r\nttl 60000\r\npayload-size 4\r\npayload ping\r\n"
        b"max-attempts 0\r\nattempts 0\r\nmax-fails 0\r\nfails 0\r\npriority 0\r\nstate 0\r\n"
    )
    tail = b"created %s\r\n" % created.encode()
    if time:
        tail += b"time %s\r\n" % time.encode()
    return head + keys + tail


def test_inspect_jobs_example() -> None:
    reply = job_blocks([job("c4", "2016-08-22T01:50:51Z"), job("c6", "2016-08-22T02:00:17Z")])
    assert reply == (
        b"+OK 2\r\n" + _block("c4", "2016-08-22T01:50:51Z") + _block("c6", "2016-08-22T02:00:17Z")
    )


def test_inspect_scheduled_jobs_example() -> None:
    jobs = [
        job("c9", "2016-08-22T02:16:30Z", scheduled_ms=parse_time_ms("2016-09-01T18:00:00Z")),
        job("c8", "2016-08-22T02:16:58Z", scheduled_ms=parse_time_ms("2016-09-01T19:00:00Z")),
    ]
    assert job_blocks(jobs) == (
        b"+OK 2\r\n"
        + _block("c9", "2016-08-22T02:16:30Z", "2016-09-01T18:00:00Z")
        + _block("c8", "2016-08-22T02:16:58Z", "2016-09-01T19:00:00Z")
    )


def test_job_block_writes_every_value_and_the_raw_payload() -> None:
    view = job(
        "c4", "2016-08-22T01:50:51.999Z", name="a-b", ttr_ms=86400000, ttl_ms=0,
        payload=b"x\r\ny", max_attempts=255, attempts=3, max_fails=2, fails=1,
        priority=-2147483648, state=4, scheduled_ms=0,
    )
    assert job_blocks([view]) == (
        b"+OK 1\r\n"
        b"6ba7b810-9dad-11d1-80b4-00c04fd430c4 13\r\n"
        b"name a-b\r\n"
        b"ttr 86400000\r\n"
        b"ttl 0\r\n"
        b"payload-size 4\r\n"
        b"payload x\r\ny\r\n"
        b"max-attempts 255\r\n"
        b"attempts 3\r\n"
        b"max-fails 2\r\n"
        b"fails 1\r\n"
        b"priority -2147483648\r\n"
        b"state 4\r\n"
        b"created 2016-08-22T01:50:51Z\r\n"
        b"time 1970-01-01T00:00:00Z\r\n"
    )


def test_no_jobs() -> None:
    assert job_blocks([]) == b"+OK 0\r\n"


def test_inspect_queues_example() -> None:
    assert queue_blocks([QueueView("ping1", 3, 0), QueueView("ping2", 9, 0)]) == (
        b"+OK 2\r\n"
        b"ping1 2\r\nready-len 3\r\nscheduled-len 0\r\n"
        b"ping2 2\r\nready-len 9\r\nscheduled-len 0\r\n"
    )
    assert queue_blocks([]) == b"+OK 0\r\n"


def test_inspect_queue() -> None:
    assert queue_blocks([QueueView("ping", 3, 1)]) == (
        b"+OK 1\r\nping 2\r\nready-len 3\r\nscheduled-len 1\r\n"
    )


def test_inspect_server_has_three_keys() -> None:
    started = parse_time_ms("2016-01-02T15:04:05Z")
    assert server_reply(32, 0, started) == (
        b"+OK 1\r\n"
        b"server 3\r\n"
        b"active-clients 32\r\n"
        b"evicted-jobs 0\r\n"
        b"started 2016-01-02T15:04:05Z\r\n"
    )


def test_inspect_bulk_has_a_block_per_partition() -> None:
    assert bulk_blocks([BulkView(0, 1200, 3), BulkView(7, 0, 0)]) == (
        b"+OK 2\r\n"
        b"0 2\r\nadmitted 1200\r\nbacklog 3\r\n"
        b"7 2\r\nadmitted 0\r\nbacklog 0\r\n"
    )
    assert bulk_blocks([]) == b"+OK 0\r\n"


def test_digest_reply() -> None:
    assert digest_reply("00ff" * 8) == b"+OK 1\r\ndigest " + b"00ff" * 8 + b"\r\n"


@pytest.mark.parametrize(
    ("error", "reply"),
    [
        (errors.ClientError(errors.UNKNOWN_COMMAND), b"-CLIENT-ERROR Unknown command\r\n"),
        (errors.FramingError(errors.LINE_TOO_LONG), b"-CLIENT-ERROR Line too long\r\n"),
        (errors.ClientError(errors.INVALID_WAIT_TIMEOUT), b"-CLIENT-ERROR Invalid wait timeout\r\n"),
        (errors.ClientError(errors.DUPLICATE_JOB), b"-CLIENT-ERROR Duplicate job\r\n"),
        (errors.ClientError(errors.DUPLICATE_RESULT), b"-CLIENT-ERROR Duplicate result\r\n"),
        (errors.NotFound(), b"-NOT-FOUND\r\n"),
        (errors.Timeout(), b"-TIMEOUT\r\n"),
        (errors.ServerError("log unavailable"), b"-SERVER-ERROR log unavailable\r\n"),
    ],
)
def test_error_reply(error: errors.EventqError, reply: bytes) -> None:
    assert error_reply(error) == reply
