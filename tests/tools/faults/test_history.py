"""The history model: outcome classification, the JSON-lines file, the recorder, and
the load's pure parts (schedule times, bulk records, the ids a read-back asks about)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import random
import uuid

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventq.core import decode_command
from eventq.core.batch import split_record
from eventq.core.partitioner import partition_for_key
from eventq.errors import ClientError, MayTakeEffect, NotFound, NotWritten, ServerError, Timeout
from tools.faults.history import (
    FAIL,
    INFO,
    KINDS,
    OK,
    Args,
    BulkJob,
    Clock,
    HistoryWriter,
    Op,
    ReadBack,
    Recorded,
    Recorder,
    Reply,
    classify,
    error_line,
    op_from_json,
    op_to_json,
    read_back_from_json,
    read_back_to_json,
    read_history,
    write_history,
)
from tools.faults.load import bulk_record, created_job_ids, schedule_time

WRITE_KINDS = ("add", "schedule", "run", "bulk", "lease", "touch", "complete", "fail",
               "delete")

# eventq's own -SERVER-ERROR texts (streams/engine.py, gateway/peers.py). Whatever they
# say, the code is what is judged: every one leaves a write indeterminate, even those
# that say nothing happened (NotWritten shares MayTakeEffect's code).
NOT_WRITTEN = ("-SERVER-ERROR the add was not written: Kafka did not take it within 5s; "
               "nothing happened, retrying is safe")
STARTING = "-SERVER-ERROR eventq is starting: the Kafka producer is not ready yet; retry"
RECOVERING = "-SERVER-ERROR eventq is still recovering its state from Kafka; try again shortly"
KAFKA_FAILED = ("-SERVER-ERROR Kafka failed the add (KafkaError); it was most likely not "
                "written, but check with `inspect job x` before retrying")
IN_LOG = ("-SERVER-ERROR the complete is in the log but was not applied within 5s (a "
          "backlog): it will still take effect; check with `inspect job x` before retrying")
NO_ACK = ("-SERVER-ERROR the delete was sent but Kafka did not acknowledge it within 5s: it "
          "may still take effect; check with `inspect job x` before retrying")
PEER_GONE = ("-SERVER-ERROR the eventq process at 127.0.0.1:9923 that serves this did not "
             "answer (OSError: refused); retry (its partitions move to another process if it "
             "is gone)")
NOT_HELD = ("-SERVER-ERROR this eventq process may no longer own its partitions (it was "
            "paused or cut off from Kafka); nothing happened: retry, at another process if "
            "this one does not answer soon")
PARTITION_LOST = ("-SERVER-ERROR this eventq process may have lost the job's partition to "
                  "another process (it was paused or cut off from Kafka) before it applied "
                  "the command: it is in the log and will still take effect; check with "
                  "inspect job before retrying")
NOT_APPLIED = "-SERVER-ERROR command was not applied (already applied)"
MOVING = ("-SERVER-ERROR partition 3 of this job is not served by this process right now "
          "(it is moving between eventq processes); retry")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("answer, expected", [
    ("+OK", OK),
    ("+OK 1", OK),
    (b"+OK 1\r\n", OK),
    ("-CLIENT-ERROR Duplicate job", FAIL),
    ("-CLIENT-ERROR Duplicate result", FAIL),
    ("-NOT-FOUND", FAIL),
    ("-TIMEOUT", FAIL),
    (ConnectionResetError("reset by peer"), INFO),
    (asyncio.IncompleteReadError(b"", 5), INFO),
    (TimeoutError(), INFO),
])
def test_outcomes_that_do_not_depend_on_the_kind(kind, answer, expected):
    assert classify(kind, answer) == expected


@pytest.mark.parametrize("line", [KAFKA_FAILED, IN_LOG, NO_ACK, PEER_GONE, MOVING,
                                  PARTITION_LOST, NOT_APPLIED, NOT_WRITTEN, STARTING,
                                  RECOVERING, NOT_HELD,
                                  "-SERVER-ERROR", "-SERVER-ERROR internal error: KeyError",
                                  "-SOMETHING-ELSE"])
def test_other_server_errors_leave_a_write_indeterminate_and_a_read_failed(line):
    for kind in WRITE_KINDS:
        assert classify(kind, line) == INFO, kind
    for kind in ("result", "inspect"):
        assert classify(kind, line) == FAIL, kind


def test_most_likely_not_written_is_not_read_as_not_written():
    assert "not written" in KAFKA_FAILED
    assert classify("add", KAFKA_FAILED) == INFO


@pytest.mark.parametrize("error, expected", [
    (NotFound(), FAIL),
    (Timeout(), FAIL),
    (ClientError("Duplicate job"), FAIL),
    (NotWritten("the add was not written: Kafka did not take it within 5s; nothing "
                "happened, retrying is safe"), INFO),
    (MayTakeEffect("the add was sent but Kafka did not acknowledge it within 5s: it may "
                   "still take effect"), INFO),
    (ServerError("unexpected reply b'+WHAT'"), INFO),
])
def test_protocol_errors_are_judged_by_their_reply_line(error, expected):
    assert classify("add", error) == expected


def test_error_line_is_the_reply_line_or_what_happened_on_the_client():
    assert error_line(NotFound()) == "-NOT-FOUND"
    assert error_line(ClientError("Duplicate job")) == "-CLIENT-ERROR Duplicate job"
    assert error_line(TimeoutError()) == "client timeout"
    assert error_line(ConnectionResetError("gone")) == "ConnectionResetError: gone"


@given(st.text(max_size=80).filter(lambda t: "\r" not in t and "\n" not in t))
def test_the_text_of_an_error_never_changes_its_outcome(text):
    """Only the code is judged: a reworded text cannot turn an indeterminate write into
    a definite one, nor a definite failure into anything else."""
    for code, write, read in (("SERVER-ERROR", INFO, FAIL), ("CLIENT-ERROR", FAIL, FAIL),
                              ("NOT-FOUND", FAIL, FAIL), ("TIMEOUT", FAIL, FAIL),
                              ("WHATEVER", INFO, FAIL)):
        line = f"-{code} {text}".rstrip()
        assert classify("complete", line) == write, line
        assert classify("inspect", line) == read, line


def test_a_run_outcome_speaks_of_its_reply():
    assert classify("run", "+OK 1") == OK
    assert classify("run", "-TIMEOUT") == FAIL
    assert classify("run", IN_LOG) == INFO


def test_op_rejects_unknown_kinds_and_outcomes():
    with pytest.raises(ValueError):
        Op(0, 0, 0, "frobnicate", None, Args(), 0.0, 1.0, OK)
    with pytest.raises(ValueError):
        Op(0, 0, 0, "add", "j", Args(), 0.0, 1.0, "maybe")
    with pytest.raises(ValueError):
        ReadBack("j", "perhaps")


def test_latest_effect_is_the_return_only_for_acknowledged_ops():
    ok = Op(0, 0, 0, "fail", "j", Args(), 1.0, 2.0, OK)
    info = Op(1, 0, 0, "fail", "j", Args(), 1.0, 2.0, INFO)
    assert ok.latest_effect_s == 2.0
    assert info.latest_effect_s == float("inf")


# --- JSON lines -----------------------------------------------------------------------

names = st.text("abcdefghijklmnopqrstuvwxyz0123456789_.-", min_size=1, max_size=12)
job_ids = st.uuids(version=4).map(str)
small = st.none() | st.integers(0, 10**9)
times = st.floats(0, 1e6, allow_nan=False, allow_infinity=False)
pairs = st.lists(st.tuples(names, st.binary(max_size=20)), max_size=5).map(tuple)

bulk_jobs = st.builds(BulkJob, job_ids, names, st.integers(1, 10**6), st.integers(1, 10**9),
                      st.binary(max_size=30), st.integers(0, 255), st.integers(0, 10**6))
args = st.builds(
    Args, queues=st.lists(names, max_size=3).map(tuple), ttr_ms=small, ttl_ms=small,
    time=st.none() | st.just("2026-01-01T00:00:00Z"), payload=st.none() | st.binary(max_size=40),
    max_fails=small, backoff_ms=small, priority=small, wait_ms=small,
    result=st.none() | st.binary(max_size=40),
    jobs=st.lists(bulk_jobs, max_size=3).map(tuple), partition=small,
)
replies = st.builds(
    Reply, job_id=st.none() | job_ids, name=st.none() | names, ttr_ms=small,
    payload=st.none() | st.binary(max_size=40), success=st.none() | st.booleans(),
    data=st.none() | st.binary(max_size=40), fields=st.none() | pairs,
    error=st.none() | st.text(max_size=40),
)
ops = st.builds(
    Op, index=st.integers(0, 10**6), client=st.integers(0, 50), process=st.integers(0, 3),
    kind=st.sampled_from(KINDS), job_id=st.none() | job_ids, args=args, invoke_s=times,
    return_s=st.none() | times, outcome=st.sampled_from((OK, FAIL, INFO)), reply=replies,
)
read_backs = st.builds(
    ReadBack, job_id=job_ids, status=st.sampled_from(("found", "not-found", "unknown")),
    at_s=st.none() | times, fields=pairs, result_ok=st.none() | st.booleans(),
    result=st.none() | st.binary(max_size=40),
)


@given(ops)
def test_an_op_survives_json(op):
    line = json.dumps(op_to_json(op))
    assert op_from_json(json.loads(line)) == op


@given(read_backs)
def test_a_read_back_survives_json(read):
    assert read_back_from_json(json.loads(json.dumps(read_back_to_json(read)))) == read


@settings(max_examples=50)
@given(st.lists(ops, max_size=20, unique_by=lambda op: op.index),
       st.lists(read_backs, max_size=5, unique_by=lambda r: r.job_id),
       st.dictionaries(names, st.integers() | st.text(max_size=10), max_size=4))
def test_a_history_file_survives_writing_and_reading(tmp_path_factory, history, reads, meta):
    path = tmp_path_factory.mktemp("history") / "run.jsonl"
    write_history(path, history, reads, meta)
    assert read_history(path) == Recorded(
        tuple(sorted(history, key=lambda op: op.index)), {r.job_id: r for r in reads}, meta)


def test_bytes_are_base64_in_the_file(tmp_path):
    op = Op(0, 1, 2, "add", "j", Args(payload=b"\x00\xffhi\r\n"), 0.5, 0.75, OK)
    write_history(tmp_path / "h.jsonl", [op])
    line = json.loads((tmp_path / "h.jsonl").read_text())
    assert line["args"] == {"payload": "AP9oaQ0K"}
    assert line["reply"] == {}


def test_a_torn_last_line_is_forgiven_but_not_a_torn_middle(tmp_path):
    op = Op(0, 0, 0, "add", "j", Args(), 0.5, 0.75, OK)
    path = tmp_path / "h.jsonl"
    write_history(path, [op, Op(1, 0, 0, "delete", "j", Args(), 1.0, None, INFO)])
    text = path.read_text()
    path.write_text(text[:-10])
    assert read_history(path).ops == (op,)
    path.write_text(text[:-10] + "\n" + text)
    with pytest.raises(ValueError):
        read_history(path)


def test_meta_lines_update_each_other(tmp_path):
    path = tmp_path / "h.jsonl"
    with HistoryWriter(path) as writer:
        writer.write_meta({"seed": 7, "live_digest": None})
        writer.write_meta({"live_digest": "abc"})
    assert read_history(path).meta == {"seed": 7, "live_digest": "abc"}


def test_the_recorder_numbers_ops_in_invoke_order_and_writes_each_as_it_ends(tmp_path):
    path = tmp_path / "h.jsonl"
    with HistoryWriter(path) as writer:
        recorder = Recorder(Clock(), writer)
        first, second = recorder.begin(), recorder.begin()
        assert (first[0], second[0]) == (0, 1) and first[1] <= second[1]
        late = recorder.record(Op(1, 0, 0, "add", "b", Args(), second[1], None, INFO))
        early = recorder.record(Op(0, 0, 0, "add", "a", Args(), first[1], 9.0, OK))
        assert [line["index"] for line in map(json.loads, path.read_text().splitlines())] == [1, 0]
    assert recorder.ops == [early, late]
    assert read_history(path).ops == (early, late)


# --- the load's pure parts ------------------------------------------------------------


@given(st.datetimes(min_value=dt.datetime(2020, 1, 1), max_value=dt.datetime(2090, 1, 1)),
       st.integers(0, 1000))
def test_schedule_times_are_whole_seconds_never_past_at_most_3s_ahead(now, seed):
    now = now.replace(tzinfo=dt.timezone.utc)
    text = schedule_time(random.Random(seed), now)
    at = dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.timezone.utc)
    assert now <= at < now + dt.timedelta(seconds=3)


def test_a_bulk_record_is_one_batch_of_add_commands_in_one_partition():
    partitions = 8
    jobs = []
    rng = random.Random(1)
    while len(jobs) < 20:
        job_id = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        if partition_for_key(job_id.encode(), partitions) == 5:
            jobs.append(BulkJob(job_id, "fq1", 1500, 3_600_000, f"p{len(jobs)}".encode(),
                                3, 200))
    record = bulk_record(jobs)
    assert isinstance(msgpack.unpackb(record), list)
    commands = [decode_command(data).command for data in split_record(record)]
    assert [str(c.job_id) for c in commands] == [j.job_id for j in jobs]
    assert {(c.name, c.ttr_ms, c.ttl_ms, c.max_fails, c.backoff_ms) for c in commands} == {
        ("fq1", 1500, 3_600_000, 3, 200)}
    assert [c.payload for c in commands] == [j.payload for j in jobs]


def test_the_read_back_asks_about_every_created_job_once_in_op_order():
    bulk = Op(1, 0, 0, "bulk", None, Args(jobs=(
        BulkJob("b1", "q", 1, 1, b""), BulkJob("b2", "q", 1, 1, b""))), 1.0, 2.0, OK)
    history = [
        Op(2, 0, 0, "run", "r", Args(), 2.0, 3.0, FAIL),
        bulk,
        Op(0, 0, 0, "add", "a", Args(), 0.0, 1.0, INFO),
        Op(3, 0, 0, "lease", "a", Args(), 3.0, 4.0, OK, Reply(job_id="a")),
        Op(4, 0, 0, "schedule", "a", Args(), 4.0, 5.0, FAIL),
    ]
    assert created_job_ids(history) == ["a", "b1", "b2", "r"]
