"""The worker's runtime (eventq/worker/runtime.py): what a handler's return value or
error becomes, how leases that keep failing are said, the status line, and a job's
inputs fetched for the handlers that ask (retried as a report is, the job dropped when
it is gone)."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from eventq.client.errors import ClientError, NotFound, Unavailable
from eventq.client.models import Job, Result
from eventq.worker.job import InputsNotDeclared
from eventq.worker.program import JobFailed, Program
from eventq.worker.runtime import Handler, Unreported, Worker, as_result, failure_of


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


# --- inputs --------------------------------------------------------------------------

JOB = Job(uuid.uuid4(), "report", 30_000, b"")
INPUTS = [Result(uuid.uuid4(), True, b"one"), Result(uuid.uuid4(), True, b"two")]


class ScriptedServer:
    """The one client call the inputs fetch makes, answered from a script: each answer
    is returned, or raised when it is an error."""

    def __init__(self, *answers) -> None:
        self.answers = list(answers)
        self.asked: list[uuid.UUID] = []

    async def inputs(self, job_id: uuid.UUID):
        self.asked.append(job_id)
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


def worker_with(server: ScriptedServer, monkeypatch) -> Worker:
    monkeypatch.setattr("eventq.worker.runtime.RETRY_S", (0.0,) * 5)  # no waits here
    worker = Worker()
    worker._client = server
    return worker


def test_a_handler_that_asked_gets_the_inputs_and_one_that_did_not_is_told(monkeypatch):
    async def inputs_of(job):
        return job.inputs

    server = ScriptedServer(INPUTS)
    worker = worker_with(server, monkeypatch)
    assert asyncio.run(worker._work(Handler(inputs_of, inputs=True), JOB)) == tuple(INPUTS)
    assert server.asked == [JOB.id]
    with pytest.raises(InputsNotDeclared, match="inputs=True"):
        asyncio.run(worker._work(Handler(inputs_of), JOB))
    assert server.asked == [JOB.id]  # no request for a handler that did not ask


def test_inputs_the_server_could_not_give_are_asked_again(monkeypatch, caplog):
    server = ScriptedServer(Unavailable("cannot connect"), Unavailable("cannot connect"), [])
    worker = worker_with(server, monkeypatch)
    with caplog.at_level("WARNING", logger="eventq.worker"):
        assert asyncio.run(worker._inputs_of(JOB)) == ()
    assert len(server.asked) == 3
    assert caplog.messages == [f"job {JOB.id}: fetching its inputs failed (cannot connect); "
                               f"retrying"] * 2


def test_inputs_never_given_leave_the_job_to_its_ttr(monkeypatch, caplog):
    server = ScriptedServer(*[Unavailable("cannot connect")] * 6)
    worker = worker_with(server, monkeypatch)
    with pytest.raises(Unreported), caplog.at_level("WARNING", logger="eventq.worker"):
        asyncio.run(worker._inputs_of(JOB))
    assert len(server.asked) == 6  # once, then once per RETRY_S
    assert caplog.messages[-1] == (f"job {JOB.id}: its inputs could not be fetched; its TTR "
                                   f"will time it out")


def test_a_job_gone_before_its_inputs_is_dropped_and_a_refusal_fails_it(monkeypatch):
    worker = worker_with(ScriptedServer(NotFound(""), ClientError("Unknown command")),
                         monkeypatch)
    with pytest.raises(Unreported):
        asyncio.run(worker._inputs_of(JOB))
    with pytest.raises(JobFailed, match="its inputs could not be read: Unknown command"):
        asyncio.run(worker._inputs_of(JOB))  # a workq server: no retry helps


def test_handlers_and_programs_declare_inputs_per_queue():
    worker = Worker()
    summary = worker.handler("summary", inputs=True)(len)
    worker.add_handler("count", len)
    worker.add_program("report", ["cat"], inputs=True)
    worker.add_program("plain", ["cat"], timeout_ms=1_500)
    assert worker.handlers["summary"] == Handler(summary, None, True)
    assert worker.handlers["count"] == Handler(len, None, False)
    assert worker.handlers["report"] == Handler(Program(("cat",), None, True), None, True)
    assert worker.handlers["plain"] == Handler(Program(("cat",), 1.5), None, False)


def test_a_failure_with_a_group_is_reported_with_it(monkeypatch):
    """eventq: docs/workflows.md, "Failure groups and retry". A JobFailed's group goes
    with the fail; a failure without one is sent as workq's fail, with no flag."""
    sent = []

    class Reporter:
        async def fail(self, job_id, result, **flags):
            sent.append((job_id, result, flags))

    worker = worker_with(Reporter(), monkeypatch)
    assert asyncio.run(worker._report(JOB, False, b"r", "g")) == "failed"
    assert asyncio.run(worker._report(JOB, False, b"r")) == "failed"
    assert sent == [(JOB.id, b"r", {"group": "g"}), (JOB.id, b"r", {})]
