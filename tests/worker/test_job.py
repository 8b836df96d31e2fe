"""The job a handler gets (eventq/worker/job.py): its inputs when its handler asked for
them, a clear error when it did not, and the rest of the leased job unchanged."""

from __future__ import annotations

import pickle
import uuid

import pytest

from eventq.client.models import Job, Result
from eventq.worker import InputsNotDeclared, WorkerJob

LEASED = Job(uuid.uuid4(), "report", 30_000, b'{"week": 47}')
A, B = uuid.uuid4(), uuid.uuid4()
INPUTS = (Result(A, True, b"sales"), Result(B, True, b"returns"))


def test_a_handler_that_asked_reads_its_inputs_in_after_order():
    job = WorkerJob.of(LEASED, INPUTS)
    assert job.inputs == INPUTS
    assert [(entry.id, entry.ok, entry.data) for entry in job.inputs] == [
        (A, True, b"sales"), (B, True, b"returns")]


def test_a_job_without_upstreams_has_no_inputs():
    assert WorkerJob.of(LEASED, ()).inputs == ()


def test_reading_inputs_without_asking_says_to_declare_them():
    """Not an empty tuple: that would read as a job without upstreams."""
    job = WorkerJob.of(LEASED, None)
    with pytest.raises(InputsNotDeclared) as caught:
        job.inputs
    message = str(caught.value)
    assert "queue 'report'" in message
    assert "@worker.handler('report', inputs=True)" in message
    assert "add_program(..., inputs=True)" in message and "--inputs" in message


def test_it_is_still_the_leased_job():
    job = WorkerJob.of(LEASED, INPUTS)
    assert isinstance(job, Job)
    assert (job.id, job.name, job.ttr_ms, job.payload) == (
        LEASED.id, LEASED.name, LEASED.ttr_ms, LEASED.payload)
    assert job.text == '{"week": 47}' and job.json() == {"week": 47}


def test_it_pickles_whole_for_a_process_pool():
    for job in (WorkerJob.of(LEASED, INPUTS), WorkerJob.of(LEASED, None)):
        copy = pickle.loads(pickle.dumps(job))
        assert copy == job and copy.fetched_inputs == job.fetched_inputs
