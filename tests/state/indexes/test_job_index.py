"""JobIndex, the indexes kept together (eventq/state/indexes/job_index.py): partitions
dropped and rebuilt, and the slim projection rebuilding the same index as puts keep
(docs/architecture.md, "Memory and restores")."""

from __future__ import annotations

import gc
import tracemalloc
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from eventq.core import Accepted, encode_state
from eventq.core.slim import project_state, slim_of
from eventq.state.indexes import JobIndex
from support.core_strategies import histories
from support.jobs import NOW, job


def test_dropping_a_partition_forgets_its_jobs():
    index = JobIndex()
    kept, dropped = job(), job()
    index.put(kept, 0, NOW)
    index.put(dropped, 1, NOW)
    index.drop_partition(1)
    assert index.job_ids() == {kept.id}
    assert index.ready_page("q", NOW, 0, 10) == [kept.id]


FAR = 2**63  # after every deadline


def snapshot(index: JobIndex, now_ms: int):
    """Everything the index answers, as plain data (``due`` pops: call it last)."""
    entries = {job_id: index.entry(job_id) for job_id in index.job_ids()}
    queues = {
        name: (index.ready_page(name, now_ms, 0, 10**6),
               index.scheduled_page(name, now_ms, 0, 10**6))
        for name in sorted(index.queues)
    }
    tagged = {tag: index.tagged_page(tag, 0, 10**6) for tag in sorted(index.tag_counts())}
    wake = index.next_deadline_ms()
    due = sorted((d.kind, d.job_id, d.attempt, d.version) for d in index.due(FAR))
    return entries, queues, tagged, wake, due


@settings(max_examples=200, deadline=None)
@given(histories(max_steps=40), st.integers(0, 20_000))
def test_index_rebuilt_from_projected_records_equals_the_one_kept_by_puts(steps, later_ms):
    """The server rebuilds its index from the slim projection of the table's records
    (eventq/core/slim.py); the processor keeps it by putting each decoded job. Both
    must give the same index: same entries, queues in the same lease order, the same
    live deadlines (puts push a deadline only when it changes)."""
    kept = JobIndex()
    last: dict[uuid.UUID, bytes] = {}
    for _command, at, _offset, outcome, after in steps:
        if not isinstance(outcome, Accepted):
            continue
        if after is None:
            kept.remove(outcome.event.job_id)
            last.pop(outcome.event.job_id, None)
        else:
            kept.put(after, 0, at)
            last[after.id] = encode_state(outcome.event, after)
    now_ms = steps[-1][1] + later_ms  # a restart comes after the last command
    rebuilt = JobIndex()
    rebuilt.rebuild(0, [project_state(record) for record in last.values()], now_ms)
    assert snapshot(rebuilt, now_ms) == snapshot(kept, now_ms)


def test_rebuild_replaces_a_partition_and_keeps_the_others():
    index = JobIndex()
    kept, replaced, new = job(name="a"), job(name="b"), job(name="b", created=NOW + 1)
    index.put(kept, 0, NOW)
    index.put(replaced, 1, NOW)
    assert index.rebuild(1, [slim_of(new)], NOW) == 1
    assert index.job_ids() == {kept.id, new.id} and index.partitions() == {0, 1}
    assert index.ready_page("b", NOW, 0, 10) == [new.id]


# Bytes per job that tracemalloc sees the index take (docs/architecture.md, "Memory and
# restores": 264 without tags, 329 with one, measured at 100,000 jobs): a Python object
# of its own per job (56 bytes at least, a tuple of two) goes past these.
MAX_INDEX_BYTES_PER_JOB = {(): 300, ("t",): 360}


def test_a_job_costs_the_index_a_few_hundred_bytes():
    """No per-job object in any index: a job is one bytes entry and one integer in its
    queue and in the deadline heap (and one in each of its tags' lists)."""
    jobs = 10_000
    for tags, most in MAX_INDEX_BYTES_PER_JOB.items():
        made = [job(name=f"queue-{n % 100:04d}", created=NOW + n // 100, tags=tags)
                for n in range(jobs)]
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            index = JobIndex()
            for one in made:
                index.put(one, 0, NOW)
            gc.collect()
            per_job = (tracemalloc.get_traced_memory()[0] - before) / jobs
        finally:
            tracemalloc.stop()
        assert len(index) == jobs and per_job <= most, (tags, per_job)
