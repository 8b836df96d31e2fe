"""Registration deadlines of absent upstreams (eventq/state/indexes/registrations.py)."""

from __future__ import annotations

import uuid

from eventq.state.indexes import JobIndex
from support.jobs import NOW, job


def test_registration_deadlines_fall_due_once_for_upstreams_that_are_no_live_job():
    index = JobIndex()
    absent, live = uuid.uuid4(), job()
    index.put(live, 0, NOW)
    index.put_registration(absent, NOW + 10)
    index.put_registration(absent, NOW + 20)  # another dependent's, later
    index.put_registration(live.id, NOW + 10)  # a live upstream's go with its ending
    assert index.next_deadline_ms() == NOW + 10
    assert index.due_registrations(NOW + 9) == []
    assert index.due_registrations(NOW + 10) == [absent]
    assert index.due_registrations(NOW + 30) == [absent]
    assert index.due_registrations(NOW + 30) == []


def test_rebuild_adds_the_registration_deadlines_of_a_partition():
    index = JobIndex()
    upstream = uuid.uuid4()
    index.rebuild(0, [], NOW, registrations=[(upstream, NOW + 5)])
    assert index.next_deadline_ms() == NOW + 5
    assert index.due_registrations(NOW + 5) == [upstream]
