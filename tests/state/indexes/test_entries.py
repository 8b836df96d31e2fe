"""The packed entries (eventq/state/indexes/entries.py): one ``bytes`` a job
(docs/architecture.md, "Memory and restores")."""

from __future__ import annotations

from eventq.core import State
from eventq.state.indexes import JobIndex
from support.jobs import NOW, job


def test_an_entry_is_a_few_hundred_bytes():
    """The memory target (400 B of RSS per job, measured by bench/recovery_bench.py;
    docs/architecture.md, "Memory and restores") needs entries without an object per
    field."""
    import sys

    index = JobIndex()
    one = job(name="queue-0001", scheduled=NOW + 5)
    index.put(one, 0, NOW)
    packed = index._entries.packed(one.id.int)
    assert isinstance(packed, bytes) and sys.getsizeof(packed) <= 100


def test_a_tagged_jobs_entry_keeps_its_name_for_every_reader():
    """The entry holds the tags after the name: the state lists and counts by queue
    read the name alone."""
    index = JobIndex()
    tagged = job(name="q", state=State.FAILED, tags=("a", "b"))
    plain = job(name="q", state=State.FAILED, created=NOW + 1)
    other = job(name="q2", state=State.FAILED, tags=("q",))
    for j in (tagged, plain, other):
        index.put(j, 0, NOW)
    assert index.jobs_in_state("q", State.FAILED, 0, 10) == [tagged.id, plain.id]
    assert index.jobs_in_state("q2", State.FAILED, 0, 10) == [other.id]
    assert index.state_counts()["q"][State.FAILED] == 2
    assert index.entry(tagged.id).tags == ("a", "b") and index.entry(plain.id).tags == ()
