"""Live jobs per tag (eventq/state/indexes/tags.py; docs/workflows.md, "Tags")."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from eventq.core import Job, State
from eventq.core.slim import slim_of
from eventq.state.indexes import JobIndex
from support.jobs import NOW, job


def test_tagged_jobs_are_listed_by_created_time_then_id_in_any_state():
    index = JobIndex()
    low, high = uuid.UUID(int=1 << 64, version=4), uuid.UUID(int=2 << 64, version=4)
    jobs = [
        job(job_id=high, created=NOW + 5, tags=("a", "b")),
        job(job_id=low, created=NOW + 5, state=State.COMPLETED, tags=("a",)),
        job(created=NOW + 1, state=State.LEASED, attempts=1, lease_deadline=NOW + 9, tags=("b", "a")),
        job(created=NOW, scheduled=NOW + 100, tags=("a",)),
        job(created=NOW - 1),  # no tags: in no list
    ]
    for n, j in enumerate(jobs):
        index.put(j, n % 3, NOW)
    expected = [jobs[3].id, jobs[2].id, low, high]
    assert index.tagged_page("a", 0, 100) == expected
    assert index.tagged_page("a", 1, 2) == expected[1:3]
    assert index.tagged_page("a", 4, 10) == [] and index.tagged_page("zz", 0, 10) == []
    assert index.tagged_page("b", 0, 100) == [jobs[2].id, high]
    assert index.tag_counts() == {"a": 4, "b": 2}
    assert index.entry(jobs[2].id).tags == ("b", "a") and index.entry(jobs[4].id).tags == ()
    assert index.entry(jobs[2].id).name == "q"
    keys = [key for key, _ in index.tagged_page_keys("a", 0, 100)]
    assert keys == sorted(keys)


def test_a_tagged_job_stays_listed_through_its_changes_and_goes_with_it():
    index = JobIndex()
    tagged = job(tags=("t",))
    index.put(tagged, 0, NOW)
    for version, state in ((2, State.LEASED), (3, State.PENDING), (4, State.COMPLETED)):
        changed = job(job_id=tagged.id, version=version, state=state, tags=("t",),
                      attempts=1, lease_deadline=NOW + 5 if state is State.LEASED else None)
        index.put(changed, 0, NOW)
        assert index.tagged_page("t", 0, 10) == [tagged.id]
    index.remove(tagged.id)
    assert index.tagged_page("t", 0, 10) == [] and index.tag_counts() == {}
    index.remove(tagged.id)  # twice: nothing


def test_the_same_id_added_again_is_listed_at_its_new_created_time():
    index = JobIndex()
    first = job(created=NOW, tags=("t",))
    other = job(created=NOW + 1, tags=("t",))
    index.put(first, 0, NOW)
    index.put(other, 0, NOW)
    index.remove(first.id)
    again = job(job_id=first.id, created=NOW + 2, tags=("t", "u"))
    index.put(again, 0, NOW)
    assert index.tagged_page("t", 0, 10) == [other.id, first.id]
    assert index.tagged_page("u", 0, 10) == [first.id]


def test_dropping_or_rebuilding_a_partition_forgets_its_tagged_jobs():
    index = JobIndex()
    kept, dropped = job(tags=("t",), created=NOW), job(tags=("t", "x"), created=NOW + 1)
    index.put(kept, 0, NOW)
    index.put(dropped, 1, NOW)
    index.drop_partition(1)
    assert index.tagged_page("t", 0, 10) == [kept.id] and index.tag_counts() == {"t": 1}
    new = job(tags=("x",), created=NOW + 2)
    assert index.rebuild(1, [slim_of(dropped), slim_of(new)], NOW) == 2
    assert index.tagged_page("t", 0, 10) == [kept.id, dropped.id]
    assert index.tagged_page("x", 0, 10) == [dropped.id, new.id]
    assert index.rebuild(1, [slim_of(new)], NOW) == 1
    assert index.tagged_page("t", 0, 10) == [kept.id] and index.tagged_page("x", 0, 10) == [new.id]
    assert index.rebuild(0, [slim_of(kept)], NOW) == 1  # a job rebuilt over itself
    assert index.tagged_page("t", 0, 10) == [kept.id]


def test_jobs_without_tags_cost_the_tag_index_nothing():
    index = JobIndex()
    for n in range(50):
        index.put(job(created=NOW + n), 0, NOW)
    assert len(index._tagged) == 0  # not one list


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 7), st.integers(0, 3), st.sampled_from(
    [(), ("a",), ("b",), ("a", "b"), ("b", "a", "c")]), st.sampled_from(["put", "remove",
                                                                          "drop"])), max_size=60))
def test_tagged_pages_match_a_sorted_reference(operations):
    index = JobIndex()
    ids = [uuid.UUID(int=n << 64 | 7, version=4) for n in range(8)]
    reference: dict[uuid.UUID, tuple[Job, int]] = {}
    for slot, created, tags, op in operations:
        job_id = ids[slot]
        if op == "put":
            current = reference.get(job_id)
            if current is None:  # a new job: its own created time and tags
                j = job(job_id=job_id, created=NOW + created, tags=tags)
            else:  # the same job changed: created time and tags stay
                j = job(job_id=job_id, created=current[0].created_ms, tags=current[0].tags,
                        version=current[0].version + 1)
            partition = slot % 2
            index.put(j, partition, NOW)
            reference[job_id] = (j, partition)
        elif op == "remove":
            index.remove(job_id)
            reference.pop(job_id, None)
        else:
            index.drop_partition(slot % 2)
            reference = {k: v for k, v in reference.items() if v[1] != slot % 2}
    for tag in ("a", "b", "c"):
        expected = sorted((j.created_ms, j.id.int, j.id) for j, _ in reference.values()
                          if tag in j.tags)
        assert index.tagged_page(tag, 0, 100) == [job_id for *_, job_id in expected]
    assert set(index.tag_counts()) == {t for j, _ in reference.values() for t in j.tags}
