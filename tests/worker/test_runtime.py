"""The worker's parts that need no server: results of handlers and programs, the
tally and status line, and the command line's refusals."""

from __future__ import annotations

import argparse
import asyncio
import sys
import uuid

import pytest

from eventq.client.models import Job
from eventq.limits import MAX_PAYLOAD_BYTES
from eventq.worker.cli import UsageError, build_worker, register
from eventq.worker.program import Finished, JobFailed, Program, result_of
from eventq.worker.runtime import Worker, as_result, failure_of
from eventq.worker.status import Tally

JOB = Job(uuid.uuid4(), "q", 2_000, b"payload")


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


@pytest.mark.parametrize(("finished", "outcome"), [
    (Finished(0, b"out", 3, b""), b"out"),
    (Finished(2, b"", 0, b"bad input\n"), JobFailed(b"exit status 2: bad input\n")),
    (Finished(-9, b"", 0, b""), JobFailed(b"killed by signal 9: ")),
    (Finished(None, b"", 0, b"stuck", 1.5),
     JobFailed("killed: still running after its time limit of 1.5s; stderr: stuck")),
    (Finished(0, b"x" * 10, MAX_PAYLOAD_BYTES + 1, b""), JobFailed(
        f"its output was {MAX_PAYLOAD_BYTES + 1:,} bytes, over the result limit of "
        f"{MAX_PAYLOAD_BYTES:,} bytes: write large output elsewhere and print where")),
])
def test_how_a_program_ended_decides_the_result(finished, outcome):
    if isinstance(outcome, JobFailed):
        with pytest.raises(JobFailed) as caught:
            result_of(finished)
        assert caught.value.result == outcome.result
    else:
        assert result_of(finished) == outcome


def run(program: Program, job: Job = JOB):
    return asyncio.run(program(job))


def test_a_program_reads_the_payload_and_sees_the_job():
    echo = Program((sys.executable, "-c", "import os, sys; print(sys.stdin.read(), "
                    "os.environ['EVENTQ_QUEUE'], os.environ['EVENTQ_JOB_ID'])"))
    assert run(echo) == f"payload q {JOB.id}\n".encode()


def test_a_program_is_killed_at_its_limit_with_its_children():
    stuck = Program(("sh", "-c", "sleep 30 & sleep 30"), limit_s=0.3)
    with pytest.raises(JobFailed, match="killed: still running after its time limit of 0.3s"):
        run(stuck)


def test_a_program_that_ignores_its_stdin_and_floods_stdout():
    flood = Program((sys.executable, "-c",
                     f"import sys; sys.stdout.write('x' * {MAX_PAYLOAD_BYTES * 3})"))
    big = Job(uuid.uuid4(), "q", 5_000, b"y" * MAX_PAYLOAD_BYTES)
    with pytest.raises(JobFailed, match="3,145,728 bytes, over the result limit"):
        run(flood, big)


def test_the_tally_counts_and_draws_one_line():
    tally = Tally()
    for at, outcome in enumerate(["completed", "completed", "failed", "lost"]):
        tally.finished(outcome, 100.0 + at)
    tally.running = 2
    assert tally.line(104.0, 94.0) == "2 done, 1 failed, 2 running, 0.4 jobs/s, 1 lost"
    assert tally.rate(200.0, 0.0) == 0.0  # nothing in the last 10 s
    assert tally.line(200.0, 0.0, stopping=True).endswith("(stopping: waiting for running jobs)")


def parse_worker_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return parser.parse_args(["worker", *argv])


@pytest.mark.parametrize(("argv", "message"), [
    ((), "give --queue NAME and the program"),
    (("--queue", "q"), "give --queue NAME and the program"),
    (("--server", "nohost", "--queue", "q", "--", "true"), "--server must be HOST:PORT"),
    (("--app", "nocolon"), "must be MODULE:ATTRIBUTE"),
    (("--app", "no_such_module_here:w"), "cannot load"),
    (("--app", "eventq.worker:Worker", "--queue", "q"), "either --app or --queue"),
    (("--app", "eventq.limits:MAX_LINE_BYTES"), "is not a Worker but 'int'"),
])
def test_the_command_line_says_what_is_wrong(argv, message):
    with pytest.raises(UsageError, match=message):
        build_worker(parse_worker_args(*argv))


def test_the_command_line_builds_a_program_worker():
    worker = build_worker(parse_worker_args("--server", "10.0.0.1:7000", "--queue", "a",
                                            "--queue", "b", "--concurrency", "3",
                                            "--timeout-ms", "2500", "--", "cat", "-x"))
    assert (worker.host, worker.port, worker.concurrency) == ("10.0.0.1", 7000, 3)
    assert set(worker.handlers) == {"a", "b"}
    assert worker.handlers["a"].fn == Program(("cat", "-x"), 2.5)


def test_a_program_that_cannot_start_fails_its_job_in_one_line(tmp_path):
    """Issue 27: gone (or no longer executable) after the worker started, it was a
    20-line Python traceback as every job's result."""
    with pytest.raises(JobFailed) as caught:
        run(Program((str(tmp_path / "gone"), "-x")))
    assert caught.value.result == (
        f"cannot start {tmp_path / 'gone'}: No such file or directory".encode())
    assert failure_of(caught.value) == caught.value.result


def test_leases_that_keep_failing_are_said_once_then_reminded(caplog):
    """Issue 27: eight slots failing every 0.1 s were eight identical lines each time;
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
