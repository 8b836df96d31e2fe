"""How the bulk lane cuts its records into slices (streams/faust/admission.py;
docs/architecture.md, "Lanes"): a slice holds at most the slice size in commands and
bytes, may end inside a bulk record, and the slices of a lane, in order, hold every
command exactly once over contiguous ranges; reading resumes inside the record the last
applied slice ended in."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from eventq.core.batch import encode_batch, position
from streams.faust.admission import (
    BULK_SLICE_BYTES,
    BULK_SLICE_COMMANDS,
    BULK_SLICE_COMMANDS_SHARED,
    BulkAdmitter,
    _Lane,
    _Read,
)

PARTITION = 3


def admitter() -> BulkAdmitter:
    return BulkAdmitter(bootstrap="", bulk_topic="b", commands_topic="c", group_id="g",
                        producer=lambda: None, processor=None)


def lane_of(records: list[list[bytes] | None], resume: int = 0, first_offset: int = 0) -> _Lane:
    lane = _Lane(resume)
    for offset, commands in enumerate(records, first_offset):
        value = None if commands is None else encode_batch(commands)
        read = _Read.of(offset, value, resume)
        lane.records.append(read)
        lane.size += read.size
    return lane


def all_slices(lane: _Lane, shared: bool) -> list:
    cut = admitter()
    slices = []
    while lane.records:
        slices.append(cut._take_slice(PARTITION, lane, shared))
    return slices


def names(count: int, record: int) -> list[bytes]:
    return [b"r%d-c%d" % (record, i) for i in range(count)]


def test_records_larger_than_a_slice_are_split_and_smaller_ones_joined():
    n = BULK_SLICE_COMMANDS_SHARED
    half, quarter = n // 2, n // 4
    assert n % 2 == 0
    records = [names(n + half, 0), names(n + half, 1), names(quarter, 2), names(quarter, 3)]
    slices = all_slices(lane_of(records), shared=True)
    ranges = [(s.first, s.end) for s, _, _ in slices]
    assert ranges == [
        (position(0), position(0, n)),
        (position(0, n), position(1, n - half)),  # the rest of record 0, part of record 1
        (position(1, n - half), position(2)),  # the rest of record 1
        (position(2), position(4)),  # two small records whole
    ]
    assert [len(commands) for _, commands, _ in slices] == [n, n, 2 * half, 2 * quarter]
    assert [taken for _, _, taken in slices] == [0, 1, 1, 2]
    assert [c for _, commands, _ in slices for c in commands] == [c for r in records for c in r]


def test_without_workers_slices_are_larger():
    slices = all_slices(lane_of([names(500, 0), names(500, 1)]), shared=False)
    assert [len(commands) for _, commands, _ in slices] == [BULK_SLICE_COMMANDS] * 2


def test_records_holding_no_command_are_covered_too():
    slices = all_slices(lane_of([None, names(3, 1), None]), shared=True)
    assert [(s.first, s.end, commands) for s, commands, _ in slices] == [
        (position(0), position(3), names(3, 1))]


def test_a_slice_stops_at_its_bytes_but_holds_one_command_at_least():
    big = [b"x" * (BULK_SLICE_BYTES // 2 + 1)] * 3
    slices = all_slices(lane_of([big]), shared=False)
    assert [len(commands) for _, commands, _ in slices] == [1, 1, 1]
    assert [(s.first, s.end) for s, _, _ in slices] == [
        (position(0), position(0, 1)), (position(0, 1), position(0, 2)),
        (position(0, 2), position(1))]


def test_reading_resumes_inside_the_record_the_last_slice_ended_in():
    records = [names(500, 7), names(10, 8)]
    lane = lane_of(records, resume=position(7, 450), first_offset=7)
    slices = all_slices(lane, shared=True)
    assert [(s.first, s.end) for s, _, _ in slices] == [(position(7, 450), position(9))]
    assert slices[0][1] == records[0][450:] + records[1]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.integers(1, 700)), min_size=1, max_size=12),
    st.booleans(),
    st.integers(0, 699),
)
def test_slices_cover_every_command_once_in_order(sizes, shared, resume_index):
    records = [None if n is None else names(n, r) for r, n in enumerate(sizes)]
    first_count = len(records[0] or [])
    resume = position(0, min(resume_index, first_count))
    slices = all_slices(lane_of(records, resume=resume), shared)
    limit = BULK_SLICE_COMMANDS_SHARED if shared else BULK_SLICE_COMMANDS
    expected = (records[0] or [])[min(resume_index, first_count):] + [
        c for r in records[1:] for c in (r or [])]
    assert [c for _, commands, _ in slices for c in commands] == expected
    assert all(1 <= len(commands) <= limit or not commands for _, commands, _ in slices)
    assert slices[0][0].first == resume
    for (a, _, _), (b, _, _) in zip(slices, slices[1:]):
        assert a.end == b.first  # contiguous
    assert slices[-1][0].end == position(len(records))
    assert sum(taken for _, _, taken in slices) == len(records)
