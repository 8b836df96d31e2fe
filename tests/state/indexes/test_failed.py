"""[eventq] FAILED jobs per failure group (eventq/state/indexes/failed.py;
docs/workflows.md, "Failure groups and retry")."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from eventq.core import Accepted, Job, encode_state
from eventq.core.slim import project_state
from eventq.state.indexes import JobIndex
from support.core_strategies import histories


@given(histories(max_steps=50), st.booleans())
@settings(max_examples=200, deadline=None)
def test_a_groups_count_always_equals_its_jobs(steps, rebuilt):
    """After every command of a history (fails with groups, retries, deletes, expiries),
    each group's count and page are the FAILED jobs in it, oldest failure first, whether
    the index was kept up to date or rebuilt from the records (as after a restart)."""
    from eventq.core import failure_group, failure_time_ms

    index = JobIndex()
    live: dict[uuid.UUID, tuple[Job, int]] = {}  # the job and its record's broker time
    for command, at, _offset, outcome, after in steps:
        if not isinstance(outcome, Accepted):
            continue
        if after is None:
            live.pop(command.job_id, None)
            index.remove(command.job_id)
        else:
            live[command.job_id] = (after, at)
            index.put(after, 0, at, at)
        if rebuilt:
            records = [project_state(encode_state(outcome_event, job))
                       for job, outcome_event in _records(steps, live)]
            index = JobIndex()
            index.rebuild(0, records, at)
        groups: dict[str, list[tuple[int, int]]] = {}
        for live_job, record_ms in live.values():
            group = failure_group(live_job)
            if group is not None:
                groups.setdefault(group, []).append((failure_time_ms(live_job, record_ms), live_job.id.int))
        assert index.failed_groups() == sorted(
            ((g, len(members)) for g, members in groups.items()), key=lambda gc: gc[0].encode())
        for group, members in groups.items():
            assert index.failed_len(group) == len(members)
            assert [j.int for j in index.failed_page(group, 0, 100)] == [i for _, i in sorted(members)]


def _records(steps, live):
    """The (job, event) of each live job's record: the last accepted event of its id."""
    last = {}
    for command, _at, _offset, outcome, after in steps:
        if isinstance(outcome, Accepted) and after is not None and command.job_id in live:
            if live[command.job_id][0] == after:
                last[command.job_id] = (after, outcome.event)
    return list(last.values())
