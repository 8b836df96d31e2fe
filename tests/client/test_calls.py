"""The client's pure half (eventq/client/calls.py): what each call sends is exactly the
request the server's parser reads back, and each reply becomes its typed value or error."""

from __future__ import annotations

import datetime as dt
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventq.client import calls
from eventq.client.errors import (
    ClientError,
    DuplicateJob,
    DuplicateResult,
    NotFound,
    ServerError,
    TimedOut,
    error_of,
)
from eventq.client.models import Job, JobEdges, JobInfo, NewJob, QueueInfo, Result
from eventq.protocol import Parser, replies
from eventq.protocol import requests as rq
from eventq.protocol.reply_reader import reply_end

NOW_MS = 1_800_000_000_000
ID = uuid.UUID("6ba7b810-9dad-41d1-80b4-00c04fd430c4")
UP1 = uuid.UUID("6ba7b810-9dad-41d1-80b4-00c04fd430c5")
UP2 = uuid.UUID("6ba7b810-9dad-41d1-80b4-00c04fd430c6")


def parsed(data: bytes):
    parser = Parser(lambda: NOW_MS)
    parser.feed(data)
    [request] = [parser.next_event()]
    assert parser.next_event() is None
    return request


def test_each_call_sends_the_request_the_server_reads():
    when = dt.datetime(2030, 1, 2, 3, 4, 5, 600_000, tzinfo=dt.UTC)
    cases = [
        (calls.add("q", "p", id=ID, ttr_ms=5, ttl_ms=6, priority=-1, max_attempts=2,
                   max_fails=3, backoff_ms=7),
         rq.Add(ID, "q", 5, 6, b"p", -1, 2, 3, 7)),
        (calls.schedule("q", b"p", when, id=ID),
         rq.Schedule(ID, "q", 60_000, 86_400_000, int(when.timestamp() * 1000), b"p")),
        (calls.run("q", b"p", id=ID, wait_timeout_ms=9), rq.Run(ID, "q", 60_000, 9, b"p")),
        (calls.result(ID, 5), rq.Result(ID, 5)),
        (calls.lease(["a", "b"], 7), rq.Lease(("a", "b"), 7)),
        (calls.complete(ID, "r"), rq.Complete(ID, b"r")),
        (calls.fail(str(ID), b"r"), rq.Fail(ID, b"r")),
        (calls.delete(ID), rq.Delete(ID)),
        (calls.touch(ID, 1_000), rq.Touch(ID, 1_000)),
        (calls.touch(ID), rq.Touch(ID)),
        (calls.pause("q"), rq.Pause("q")),
        (calls.resume("q"), rq.Resume("q")),
        (calls.inspect_job(ID), rq.InspectJob(ID)),
        (calls.inspect_jobs("q", 1, 2, scheduled=True), rq.InspectScheduledJobs("q", 1, 2)),
        (calls.inspect_queue("q"), rq.InspectQueue("q")),
        (calls.inspect_queues(3, 4), rq.InspectQueues(3, 4)),
        (calls.inspect_server(), rq.InspectServer()),
        (calls.digest(), rq.InspectDigest()),
        # eventq: -after and inputs (docs/workflows.md, "Dependencies", "Inputs")
        (calls.add("q", b"", id=ID, after=[UP1, str(UP2)]),
         rq.Add(ID, "q", 60_000, 86_400_000, b"", after=(UP1, UP2))),
        (calls.schedule("q", b"", NOW_MS, id=ID, backoff_ms=1, after=(UP2,)),
         rq.Schedule(ID, "q", 60_000, 86_400_000, NOW_MS, b"", backoff_ms=1, after=(UP2,))),
        (calls.add_job(NewJob("q", b"", id=ID, after=(UP1,))),
         rq.Add(ID, "q", 60_000, 86_400_000, b"", after=(UP1,))),
        (calls.inputs(str(ID)), rq.Inputs(ID)),
        (calls.inspect_jobs("q", 0, 3, waiting=True), rq.InspectWaitingJobs("q", 0, 3)),
        (calls.edges(ID, 7), rq.Edges(ID, 7)),  # internal: the dashboard's job page
        (calls.recur("r", "q", "p", 1000, tags=["a", "b"], backoff_ms=3),
         rq.Recur("r", "q", 60_000, 86_400_000, 1000, b"p", backoff_ms=3, tags=("a", "b"))),
        (calls.unrecur("r"), rq.Unrecur("r")),
        (calls.recurrences(2, 5), rq.InspectRecurring(2, 5)),
        # eventq: tags (docs/workflows.md, "Tags")
        (calls.add("q", b"", id=ID, tags=["nightly", "etl"]),
         rq.Add(ID, "q", 60_000, 86_400_000, b"", tags=("nightly", "etl"))),
        (calls.add("q", b"", id=ID, tags="one"), rq.Add(ID, "q", 60_000, 86_400_000, b"",
                                                       tags=("one",))),
        (calls.schedule("q", b"", NOW_MS, id=ID, after=(UP2,), tags=("a",)),
         rq.Schedule(ID, "q", 60_000, 86_400_000, NOW_MS, b"", after=(UP2,), tags=("a",))),
        (calls.add_job(NewJob("q", b"", id=ID, tags=("t",))),
         rq.Add(ID, "q", 60_000, 86_400_000, b"", tags=("t",))),
        (calls.inspect_tagged("nightly", 2, 5), rq.InspectTagged("nightly", 2, 5)),
    ]
    assert len({type(expected) for _, expected in cases}) == 24  # every request kind
    for call, expected in cases:
        assert parsed(call.data) == expected


def test_every_operation_is_in_the_table_and_covered():
    names = {op.__name__ for op in calls.OPERATIONS}
    assert names == {"add", "schedule", "run", "result", "inputs", "lease", "complete", "fail",
                     "delete",
                     "touch", "pause", "resume", "inspect_job", "inspect_jobs",
                     "inspect_tagged", "inspect_queue", "inspect_queues", "inspect_server",
                     "digest",
                     "recur", "unrecur", "recurrences",
                     # eventq: docs/workflows.md, "Failure groups and retry"
                     "retry", "retry_group", "inspect_failed", "inspect_failed_jobs"}


def test_recurrences_read_their_blocks():
    from eventq.protocol import replies

    views = [replies.RecurrenceView("a", "q", 1, 2, 1000, b"x\r\n", 3, 4, -5, 0, 1000, 6, ("t",)),
             replies.RecurrenceView("b", "q", 1, 2, 1000, b"", 0, 0, 0, 0, 0)]
    [a, b] = calls.recurrences().parse(replies.recurrence_blocks(views))
    assert (a.name, a.queue, a.payload, a.backoff_ms, a.tags, a.next) == (
        "a", "q", b"x\r\n", 6, ("t",), "1970-01-01T00:00:01Z")
    assert (b.backoff_ms, b.tags, b.priority) == (0, (), 0)


def test_bad_names_and_sizes_are_refused_before_sending():
    for build in (lambda: calls.add("a b", b""), lambda: calls.lease(["ok", "no!"]),
                  lambda: calls.pause("")):
        with pytest.raises(ClientError, match="Invalid Name"):
            build()
    with pytest.raises(ClientError, match="Invalid payload size"):
        calls.add("q", b"x" * (1024 * 1024 + 1))
    with pytest.raises(ClientError, match="Invalid result size"):
        calls.fail(ID, b"x" * (1024 * 1024 + 1))
    with pytest.raises(ValueError, match="timezone-aware"):
        calls.schedule("q", b"", dt.datetime(2030, 1, 1))
    for tags in (["a b"], ["a,b"], ["a", "a"], [""], ["t" * 65], [f"t{n}" for n in range(17)]):
        with pytest.raises(ClientError, match="Invalid Tags"):
            calls.add("q", b"", tags=tags)
        with pytest.raises(ClientError, match="Invalid Tags"):
            calls.schedule("q", b"", NOW_MS, tags=tags)
    for tag in ("a b", "a,b", "", "t" * 65):
        with pytest.raises(ClientError, match="Invalid Tags"):
            calls.inspect_tagged(tag)


def parse(call: calls.Call, reply: bytes):
    """The typed value of ``reply``, after checking it is framed as one whole reply
    (fed whole and with trailing bytes of a next reply)."""
    assert reply_end(reply, call.shape) == len(reply)
    assert reply_end(reply + b"+OK\r\n", call.shape) == len(reply)
    assert reply_end(reply[:-1], call.shape) is None
    return call.parse(reply)


def test_replies_become_typed_values():
    add = calls.add("q", b"p")
    assert isinstance(parse(add, b"+OK\r\n"), uuid.UUID)
    assert parse(calls.lease("q"), replies.lease_reply(ID, "q", 5, b"a\r\nb")) == Job(
        ID, "q", 5, b"a\r\nb")
    assert parse(calls.result(ID), replies.result_reply(ID, False, b"")) == Result(ID, False, b"")
    view = replies.JobView(ID, "q", 1, 2, b"pay\r\nload", 3, 1, 4, 0, -5, 4, NOW_MS, NOW_MS + 1000)
    info = parse(calls.inspect_job(ID), replies.job_blocks([view]))
    assert info == JobInfo(ID, "q", 1, 2, b"pay\r\nload", 3, 1, 4, 0, -5, "leased",
                           "2027-01-15T08:00:00Z", "2027-01-15T08:00:01Z")
    queues = replies.queue_blocks([replies.QueueView("a", 1, 2),
                                   replies.QueueView("b", 0, 0, paused=True)])
    assert parse(calls.inspect_queues(), queues) == [QueueInfo("a", 1, 2),
                                                     QueueInfo("b", 0, 0, True)]
    assert parse(calls.digest(), replies.digest_reply("ab" * 32)) == "ab" * 32


def test_workflow_replies_become_typed_values():
    """eventq (docs/workflows.md, "Dependencies" and "Inputs"): a WAITING job, a queue
    with waiting jobs, the inputs of a dependent."""
    view = replies.JobView(ID, "q", 1, 2, b"", 0, 0, 0, 0, 0, 5, NOW_MS, after=2, waiting=1)
    assert parse(calls.inspect_job(ID), replies.job_blocks([view])) == JobInfo(
        ID, "q", 1, 2, b"", 0, 0, 0, 0, 0, "waiting", "2027-01-15T08:00:00Z", None, 2, 1)
    queues = replies.queue_blocks([replies.QueueView("a", 1, 2, True, 3)])
    assert parse(calls.inspect_queues(), queues) == [QueueInfo("a", 1, 2, True, 3)]
    inputs = replies.inputs_reply([replies.InputView(UP2, True, b"a\r\nb"),
                                   replies.InputView(UP1, False, b"")])
    assert parse(calls.inputs(ID), inputs) == [Result(UP2, True, b"a\r\nb"),
                                               Result(UP1, False, b"")]
    assert parse(calls.inputs(ID), replies.inputs_reply([])) == []
    with pytest.raises(NotFound):
        parse(calls.inputs(ID), b"-NOT-FOUND\r\n")
    edges = replies.edges_reply([(UP1, "completed"), (UP2, "unfinished")], [ID])
    assert parse(calls.edges(ID), edges) == JobEdges(
        ((UP1, "completed"), (UP2, "unfinished")), (ID,))
    assert parse(calls.edges(ID), replies.edges_reply([], [])) == JobEdges((), ())
    with pytest.raises(ValueError, match="not both"):
        calls.inspect_jobs("q", scheduled=True, waiting=True)


def test_tags_replies_become_typed_values():
    """eventq (docs/workflows.md, "Tags"): a job's tags in its ``JobInfo``, in -tags order;
    ``inspect_tagged`` a list of them (none: [])."""
    tagged = replies.JobView(ID, "q", 1, 2, b"", 0, 0, 0, 0, 0, 5, NOW_MS, after=2, waiting=1,
                             tags=("nightly", "a.b-c_D"))
    plain = replies.JobView(UP1, "q", 1, 2, b"x", 0, 0, 0, 0, 0, 0, NOW_MS)
    info = JobInfo(ID, "q", 1, 2, b"", 0, 0, 0, 0, 0, "waiting", "2027-01-15T08:00:00Z", None,
                   2, 1, ("nightly", "a.b-c_D"))
    assert parse(calls.inspect_job(ID), replies.job_blocks([tagged])) == info
    assert parse(calls.inspect_tagged("nightly"), replies.job_blocks([tagged, plain])) == [
        info, JobInfo(UP1, "q", 1, 2, b"x", 0, 0, 0, 0, 0, "new", "2027-01-15T08:00:00Z")]
    assert parse(calls.inspect_tagged("x"), b"+OK 0\r\n") == []
    assert calls.inspect_tagged("x").retry_safe


@pytest.mark.parametrize(("line", "error"), [
    (b"-CLIENT-ERROR Duplicate job", DuplicateJob("Duplicate job")),
    (b"-CLIENT-ERROR Duplicate result", DuplicateResult("Duplicate result")),
    (b"-CLIENT-ERROR Invalid TTR", ClientError("Invalid TTR")),
    (b"-NOT-FOUND", NotFound("")),
    (b"-TIMEOUT", TimedOut("")),
    (b"-SERVER-ERROR Kafka is down", ServerError("Kafka is down")),
])
def test_error_replies_become_their_exception(line, error):
    assert error_of(line) == error
    with pytest.raises(type(error)):
        parse(calls.delete(ID), line + b"\r\n")


@given(st.binary(max_size=200))
def test_any_payload_survives_a_lease_reply(payload):
    assert parse(calls.lease("q"), replies.lease_reply(ID, "q", 1, payload)).payload == payload


def test_failure_groups_and_retry_calls_send_and_read_what_the_server_does():
    """eventq: docs/workflows.md, "Failure groups and retry"."""
    from eventq.client.models import FailedGroup

    cases = [
        (calls.fail(ID, b"r", group="deploy-7"), rq.Fail(ID, b"r", "deploy-7")),
        (calls.retry(ID), rq.Retry(ID)),
        (calls.retry(str(ID), delay_ms=5_000), rq.Retry(ID, 5_000)),
        (calls.retry_group("deploy-7", 10_000), rq.RetryGroup("deploy-7", 10_000)),
        (calls.inspect_failed(1, 2), rq.InspectFailed(1, 2)),
        (calls.inspect_failed_jobs("g", 3, 4), rq.InspectFailedJobs("g", 3, 4)),
    ]
    for call, expected in cases:
        assert parsed(call.data) == expected
    for build, error in ((lambda: calls.fail(ID, b"", group="a b"), "Invalid Group"),
                         (lambda: calls.retry_group("g", 0), "Invalid Count"),
                         (lambda: calls.retry(ID, delay_ms=86_400_001), "Invalid Delay")):
        with pytest.raises(ClientError, match=error):
            build()
    assert parse(calls.retry_group("g", 1), replies.retried_reply(7)) == 7
    assert parse(calls.inspect_failed(), replies.failed_reply([("a", 1), ("b", 2)])) == [
        FailedGroup("a", 1), FailedGroup("b", 2)]
    view = replies.JobView(ID, "q", 1, 2, b"", 3, 1, 4, 1, 0, 2, NOW_MS, group="g")
    assert parse(calls.inspect_failed_jobs("g"), replies.job_blocks([view]))[0].group == "g"
