"""An error reply read back is the error the server raised: one table of codes
(eventq.errors.ERROR_CLASSES) serves every reader of replies, the raw client's and the
client's (which names some of them with classes of its own)."""

from __future__ import annotations

import asyncio

import pytest

from eventq.client.errors import DuplicateJob, Forbidden, TimedOut, Unauthorized, error_of
from eventq.client.raw import RawClient
from eventq.errors import (
    DUPLICATE_JOB,
    ERROR_CLASSES,
    FORBIDDEN,
    UNAUTHORIZED,
    ClientError,
    ErrorReply,
    EventqError,
    NotFound,
    ServerError,
    Timeout,
)

SENT = [
    ClientError("Invalid TTR"), ClientError(DUPLICATE_JOB), NotFound(), Timeout(),
    ServerError("Kafka is down"),
]  # fmt: skip


def test_every_code_is_its_class():
    assert {code: cls.code for code, cls in ERROR_CLASSES.items()} == {
        code: code for code in ("CLIENT-ERROR", "NOT-FOUND", "TIMEOUT", "SERVER-ERROR")
    }


@pytest.mark.parametrize("error", SENT, ids=repr)
def test_a_reply_read_back_is_the_error_sent(error):
    assert ErrorReply.of(error.reply[:-2]).error() == error


def test_a_code_eventq_never_sends_is_a_server_error():
    reply = ErrorReply.of(b"-WHATEVER went wrong")
    assert (reply.code, reply.text, reply.error()) == (
        "WHATEVER", "went wrong", ServerError("went wrong"))


def raw_status(line: bytes) -> EventqError:
    """What the raw client raises for a status reply ``line``."""

    async def read() -> EventqError:
        reader = asyncio.StreamReader()
        reader.feed_data(line + b"\r\n")
        with pytest.raises(EventqError) as raised:
            await RawClient(reader, None)._status()  # reads only: no writer
        return raised.value

    return asyncio.run(read())


@pytest.mark.parametrize("error", SENT, ids=repr)
def test_the_raw_client_raises_the_error_sent(error):
    assert raw_status(error.reply[:-2]) == error


@pytest.mark.parametrize(("line", "expected"), [
    (b"-CLIENT-ERROR " + DUPLICATE_JOB.encode(), DuplicateJob(DUPLICATE_JOB)),
    (b"-CLIENT-ERROR " + UNAUTHORIZED.encode(), Unauthorized(UNAUTHORIZED)),
    (b"-CLIENT-ERROR " + FORBIDDEN.encode(), Forbidden(FORBIDDEN)),
    (b"-TIMEOUT", TimedOut("")),
    (b"-SERVER-ERROR", ServerError("SERVER-ERROR")),
    (b"-WHATEVER", ServerError("WHATEVER")),
])  # fmt: skip
def test_the_client_names_some_errors_with_its_own_classes(line, expected):
    """The client's classes are the server's (``except NotFound`` works on both
    sides), some of them subclassed by name."""
    error = error_of(line)
    assert error == expected
    assert isinstance(error, ErrorReply.of(line).error_class)
