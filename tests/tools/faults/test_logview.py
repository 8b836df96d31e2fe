"""The log view: command-log records read into pure per-job records, folded with the
real core (which commands were accepted, with which event)."""

from __future__ import annotations

import uuid

import pytest

from eventq.core.batch import SliceSource, encode_batch, encode_slice, position
from eventq.core.codec import encode_command
from eventq.core.commands import Add, Complete, Pause, StartAttempt
from eventq.kafka.logreader import Record
from tests.support.faultlog import T0_MS, JobLogBuilder
from tools.faults.logview import (
    ACCEPTED,
    IGNORED,
    REJECTED,
    LogCommand,
    commands_of_records,
    fold_job,
    log_view,
)

JOB = uuid.UUID("6f1c2a4e-8b1d-4c3e-9f00-0123456789ab")


def record(offset, value, partition=0, at_ms=T0_MS):
    return Record("eventq.commands", partition, offset, at_ms, None, value)


def test_records_become_job_commands_with_their_positions_and_stamps():
    add = Add(JOB, "q", 1000, 60_000, b"p")
    start = StartAttempt(JOB, 1)
    records = [record(0, encode_command(add)),
               record(1, encode_batch([encode_command(start), encode_command(Complete(JOB, b"r"))]),
                      at_ms=T0_MS + 5),
               record(2, None), record(3, b"\xc1 not a record")]
    commands = commands_of_records(records)
    assert [(c.position, c.at_ms, c.command) for c in commands] == [
        (position(0), T0_MS, add), (position(1, 0), T0_MS + 5, start),
        (position(1, 1), T0_MS + 5, Complete(JOB, b"r"))]
    assert {c.job_id for c in commands} == {str(JOB)}


def test_queue_commands_name_no_job_and_are_left_out():
    assert commands_of_records([record(0, encode_command(Pause("q")))]) == []


def test_a_bulk_slice_admitted_twice_counts_once():
    add = encode_command(Add(JOB, "q", 1000, 60_000, b"p"))
    source = SliceSource(0, position(0), position(1))
    first = record(5, encode_slice(source, [add]))
    again = record(6, encode_slice(source, [add]))
    elsewhere = record(7, encode_slice(SliceSource(1, position(0), position(1)), [add]))
    assert [c.position for c in commands_of_records([first, again, elsewhere])] == [position(5)]


def test_the_fold_says_what_the_core_decided():
    log = JobLogBuilder()
    log.add(0, ttr_ms=1000)
    log.start(10, 1)
    log.start(20, 2)  # the job is LEASED: refused
    log.timeout(500, 1)  # before the deadline: not yet due
    log.timeout(1010, 1)
    log.complete(1020)
    log.complete(1030)  # a duplicate result
    folded = log.fold()
    assert [(e.kind, e.outcome, e.event) for e in folded.entries] == [
        ("ADD", ACCEPTED, "ADDED"), ("START_ATTEMPT", ACCEPTED, "ATTEMPT_STARTED"),
        ("START_ATTEMPT", IGNORED, None), ("TIMEOUT_ATTEMPT", IGNORED, None),
        ("TIMEOUT_ATTEMPT", ACCEPTED, "ATTEMPT_TIMED_OUT"),
        ("COMPLETE", ACCEPTED, "COMPLETED"), ("COMPLETE", REJECTED, None)]
    assert folded.entries[4].requeued is True
    assert folded.created is folded.entries[0] and folded.scheduled_ms is None
    assert folded.entries[-1].job_after.state.name == "COMPLETED"


def test_the_view_groups_by_job_and_keeps_only_the_run_s_jobs():
    one, two = JobLogBuilder(), JobLogBuilder()
    one.add(0)
    two.add(0)
    view = log_view([*one.commands, *two.commands], [one.job_id.upper()])
    assert list(view.jobs) == [one.job_id]
    assert view.job(two.job_id).entries == ()


def test_the_view_says_which_jobs_it_was_read_for():
    one, two, silent = JobLogBuilder(), JobLogBuilder(), JobLogBuilder()
    one.add(0)
    two.add(0)
    view = log_view([*one.commands, *two.commands], [one.job_id, silent.job_id])
    assert view.covers(one.job_id) and view.covers(silent.job_id)  # silent: no command
    assert not view.covers(two.job_id)  # not asked: its commands were left out
    everything = log_view([*one.commands, *two.commands])
    assert everything.covers(two.job_id) and everything.covers(silent.job_id)


def test_a_command_of_another_job_is_not_folded_into_this_one():
    one, two = JobLogBuilder(), JobLogBuilder()
    two.add(0)
    with pytest.raises(ValueError):
        fold_job(one.job_id, two.commands)
    with pytest.raises(ValueError):
        LogCommand(one.job_id, 0, -1, 0, Complete(one.uuid, b""))


def test_explain_shows_what_the_core_decided_for_each_command():
    from tools.faults.explain import decided_lines

    log = JobLogBuilder()
    log.add(0, ttr_ms=1000)
    log.start(10, 1)
    log.start(20, 1)
    log.delete(30)
    lines = decided_lines(log.fold())
    assert [line.split(": ", 1)[1] for line in lines] == [
        "ADDED -> NEW attempts=0 fails=0", "ATTEMPT_STARTED -> LEASED attempts=1 fails=0",
        "ignored -> LEASED attempts=1 fails=0", "DELETED -> gone"]
    assert "START_ATTEMPT attempt=1" in lines[1]
