"""The importer's comparison of a job already live with the one a re-run would import
(eventq/migrate/importer.py): what decides ``already_present_different``."""

from __future__ import annotations

import dataclasses
import uuid

from eventq.core import Add, Fail, Import, Retry, StartAttempt, encode_state
from eventq.core.machine import apply
from eventq.migrate.importer import _same_job

T0 = 1_700_000_000_000
JID = uuid.UUID(int=1 << 64 | 1)


def live(*commands):
    """The job and its last event after ``commands``, applied one a millisecond."""
    job = None
    for offset, command in enumerate(commands, start=1):
        outcome, job = apply(job, command, T0 + offset, offset)
    return encode_state(outcome.event, job), job


def test_the_same_snapshot_is_the_same_job():
    record, job = live(Add(JID, "q", 1000, 60_000, b"p"))
    assert _same_job(record, Import.from_job(job))


def test_a_changed_job_is_not_the_same():
    record, job = live(Add(JID, "q", 1000, 60_000, b"p"))
    assert not _same_job(record, Import.from_job(dataclasses.replace(job, priority=5)))


def test_a_job_eventq_made_part_of_a_workflow_is_different_not_an_error():
    """An import run again over a job that has since joined a workflow (upstreams, a
    failure group, a retry's fields: nothing a workq job has) reports it as present
    and different. Building its snapshot raises, and the import ended in a traceback."""
    _, imported = live(Add(JID, "q", 1000, 60_000, b"p"))
    snapshot = Import.from_job(imported)
    grouped = (Add(JID, "q", 1000, 60_000, b"p"), StartAttempt(JID, 1),
               Fail(JID, b"no", group="billing"))
    for commands in (
        (Add(JID, "q", 1000, 60_000, b"p", after=(uuid.UUID(int=2 << 64 | 2),)),),
        grouped,
        (*grouped, Retry(JID, delay_ms=5_000)),  # a retry's time (delayed_ms)
    ):
        record, job = live(*commands)
        assert job is not None and job.version == len(commands)
        assert not _same_job(record, snapshot)
