"""The worker's runtime (eventq/worker/runtime.py): what a handler's return value or
error becomes, how leases that keep failing are said, and the status line."""

from __future__ import annotations

import asyncio

import pytest

from eventq.worker.program import JobFailed
from eventq.worker.runtime import Worker, as_result, failure_of


def test_handler_return_values_become_results():
    assert as_result(None) == b""
    assert as_result(b"x") == b"x" and as_result(bytearray(b"y")) == b"y"
    assert as_result("é") == "é".encode()
    assert as_result({"n": 1}) == b'{"n": 1}'


def test_a_handler_error_becomes_a_result_naming_it():
    try:
        raise KeyError("missing")
    except KeyError as error:
        text = failure_of(error).decode()
    assert text.startswith("KeyError: 'missing'\n") and "Traceback" in text
    assert failure_of(JobFailed("exactly this")) == b"exactly this"


def test_leases_that_keep_failing_are_said_once_then_reminded(caplog):
    """Eight slots failing every 0.1 s used to be eight identical lines each time;
    a connection that cannot be made is the client's to say."""
    from eventq.client.errors import ConnectionLost, Unavailable

    worker = Worker()
    with caplog.at_level("INFO", logger="eventq.worker"):
        for _ in range(8):
            worker._lease_failed(Unavailable("cannot connect"))
        assert caplog.messages == []
        for _ in range(8):
            worker._lease_failed(ConnectionLost("the server closed the connection"))
        worker._lease_worked()
    assert caplog.messages == [
        "lease failed (the server closed the connection); retrying with backoff",
        "leasing works again, after 0s"]


def test_the_status_line_is_off_unless_run_decides():
    from eventq.worker.runtime import STATUS_AUTO

    worker = Worker()
    assert worker.status_stream == STATUS_AUTO and worker._status_line_stream() is None


def test_a_worker_without_handlers_refuses_to_start():
    with pytest.raises(ValueError, match="no handlers"):
        asyncio.run(Worker().serve())
    worker = Worker()
    worker.add_handler("q", print)
    with pytest.raises(ValueError, match="already has a handler"):
        worker.add_handler("q", print)


def test_the_status_line_redraws_itself_in_place_on_a_terminal():
    import io

    screen = io.StringIO()
    worker = Worker(status=screen)
    worker.tally.finished("completed", 0.0)
    worker._draw_status()
    worker._draw_status(final=True)
    first, second = screen.getvalue().split("\r\x1b[K")[1:]
    assert first.startswith("1 done, 0 failed, 0 running, ") and second.endswith("jobs/s\n")
