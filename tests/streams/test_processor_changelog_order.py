"""The order of one batch's changelog records (streams/processor.py): every prefix of
it must be safe to restore from, so live states come first, then the watermark, then
the tombstones."""

from __future__ import annotations

from eventq.jobs_table import WATERMARK_KEY
from streams.processor import _Batch


def test_live_states_then_the_watermark_then_tombstones():
    batch = _Batch()
    batch.records.update({b"a": b"A", b"gone1": None, b"b": b"B", b"gone2": None})
    assert batch.changelog(watermark=4_000_001) == [
        (b"a", b"A"), (b"b", b"B"), (WATERMARK_KEY, b"4000001"), (b"gone1", None),
        (b"gone2", None),
    ]


def test_no_removal_writes_no_watermark():
    batch = _Batch()
    batch.records.update({b"a": b"A"})
    assert batch.changelog(watermark=None) == [(b"a", b"A")]


def test_only_the_last_state_of_a_job_is_written():
    batch = _Batch()
    for state in (b"A1", b"A2", None, b"A3"):  # added, changed, deleted, added again
        batch.records[b"a"] = state
    assert batch.changelog(watermark=7) == [(b"a", b"A3")]
