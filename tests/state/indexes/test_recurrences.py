"""The recurrences of the owned partitions and their timer
(eventq/state/indexes/recurrences.py; docs/workflows.md, "Recurring jobs")."""

from __future__ import annotations

from eventq.core.recurrence import Definition, Recurrence
from eventq.state.indexes import HEAP_SLACK, JobIndex
from eventq.state.indexes.deadlines import HEAP_SLACK_ITEMS
from eventq.state.indexes.recurrences import Recurrences
from support.jobs import NOW

EVERY_MS = 60_000
SLOT = NOW // EVERY_MS + 1  # the first slot after NOW


def record(name: str, job_name: str, first_slot: int = SLOT,
           fired_ms: int | None = None) -> Recurrence:
    definition = Definition(name, job_name, 1000, 60_000, EVERY_MS, b"", 0, 0, 0, 0, (), NOW)
    return Recurrence(definition, first_slot, fired_ms, 1)


def test_a_recurrence_is_due_at_its_next_slot_once_until_rearmed_or_fired():
    index = JobIndex()
    index.put_recurrence(0, record("r", "q"))
    due_at = SLOT * EVERY_MS
    assert index.recurrence_next_ms("r") == due_at and index.next_deadline_ms() == due_at
    assert index.due_recurrences(due_at - 1) == []
    assert index.due_recurrences(due_at) == [("r", EVERY_MS, SLOT)]
    assert index.due_recurrences(due_at) == []  # given once: the timer re-arms it
    index.rearm_recurrence("r", due_at + 500)
    assert index.due_recurrences(due_at + 500) == [("r", EVERY_MS, SLOT)]
    # Its fire is applied: the next slot, and the old check finds nothing due.
    index.rearm_recurrence("r", due_at + 900)
    index.put_recurrence(0, record("r", "q", fired_ms=due_at))
    assert index.recurrence_next_ms("r") == due_at + EVERY_MS
    assert index.due_recurrences(due_at + 900) == []
    assert index.due_recurrences(due_at + EVERY_MS) == [("r", EVERY_MS, SLOT + 1)]


def test_recurrences_are_listed_by_name_and_go_with_their_partition():
    index = JobIndex()
    index.put_recurrence(0, record("b", "team.q"))
    index.put_recurrence(1, record("a", "other.q"))
    index.put_recurrence(1, record("c", "team.x"))
    assert index.recurrence_names() == ["a", "b", "c"]
    assert index.recurrence_names(prefix="team.") == ["b", "c"]  # by queue, not by name
    index.drop_partition(1)
    assert index.recurrence_names() == ["b"] and index.recurrence_next_ms("a") is None
    index.remove_recurrence("b")
    index.rearm_recurrence("b", NOW)  # not one of this process: nothing to check
    assert index.recurrence_names() == [] and index.due_recurrences(SLOT * EVERY_MS) == []


def test_checks_of_a_recurrence_put_again_and_again_stay_bounded():
    recurrences = Recurrences()
    for _ in range(5_000):
        recurrences.put(0, record("r", "q"))
    assert len(recurrences._checks) <= HEAP_SLACK * 1 + HEAP_SLACK_ITEMS + 1
    assert recurrences.due(SLOT * EVERY_MS) == [("r", EVERY_MS, SLOT)]
