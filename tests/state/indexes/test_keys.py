"""The packed keys (eventq/state/indexes/keys.py): one integer per place, ordered as the
tuple of its fields, with the job's id in its low bits (docs/architecture.md, "Memory
and restores")."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from eventq.limits import MAX_PRIORITY, MAX_TIME_MS, MIN_PRIORITY, MIN_TIME_MS
from eventq.state.indexes.keys import (
    DEADLINE_SHIFT,
    KIND_BITS,
    NEVER_MS,
    ORDER_BITS,
    ORDER_MASK,
    TTL,
    TTR,
    clamp,
    deadline_item,
    failed_key,
    id_of,
    order_key,
    scheduled_key,
    tagged_key,
    time_of,
)

times = st.integers(MIN_TIME_MS, MAX_TIME_MS)
ids = st.integers(0, 2**128 - 1)
places = st.tuples(st.integers(MIN_PRIORITY, MAX_PRIORITY), st.none() | times, times, ids)


@settings(max_examples=300)
@given(st.lists(places, min_size=2, max_size=12))
def test_an_order_key_sorts_as_the_lease_order(jobs):
    """eventq.core.job.lease_order_key: priority descending, unscheduled first,
    scheduled time, created time, id bytes (big-endian, so as the id's integer)."""
    def lease_order(place):
        priority, scheduled, created, id_int = place
        return (-priority, scheduled is not None, scheduled or 0, created,
                uuid.UUID(int=id_int).bytes)

    by_key = sorted(jobs, key=lambda place: order_key(*place))
    assert [lease_order(place) for place in by_key] == sorted(map(lease_order, jobs))
    assert all(id_of(order_key(*place)) == uuid.UUID(int=place[3]) for place in jobs)


@settings(max_examples=300)
@given(st.lists(st.tuples(times, places), min_size=2, max_size=12))
def test_a_scheduled_key_sorts_by_time_then_lease_order_and_keeps_the_order_key(jobs):
    keys = {scheduled_key(when, order_key(*place)): (when, order_key(*place))
            for when, place in jobs}
    assert [keys[key] for key in sorted(keys)] == sorted(keys.values())
    assert all(key & ORDER_MASK == order and time_of(key, ORDER_BITS) == when
               for key, (when, order) in keys.items())


@settings(max_examples=300)
@given(st.lists(st.tuples(times, ids), min_size=2, max_size=12))
def test_tagged_and_failed_keys_sort_by_time_then_id(pairs):
    for key_of in (tagged_key, failed_key):
        assert sorted(pairs, key=lambda pair: key_of(*pair)) == sorted(pairs)
        assert all(id_of(key_of(*pair)).int == pair[1] for pair in pairs)


@settings(max_examples=300)
@given(st.lists(st.tuples(st.integers(MIN_TIME_MS, 2**64 - 1), st.sampled_from([TTL, TTR]),
                          ids), min_size=2, max_size=12))
def test_a_deadline_item_sorts_by_deadline_kind_and_id_and_saturates(items):
    """A saturated TTL (up to 2^64-1 ms) is held as NEVER_MS, after every real time."""
    held = [(clamp(when), kind, id_int) for when, kind, id_int in items]
    by_item = sorted(held, key=lambda item: deadline_item(*item))
    assert by_item == sorted(held, key=lambda item: (item[0], KIND_BITS[item[1]], item[2]))
    assert all(time_of(deadline_item(*item), DEADLINE_SHIFT) == item[0] <= NEVER_MS
               for item in held)
