"""The order of one batch's changelog records (streams/processor.py): every prefix of
it must be safe to restore from, so records beside the jobs (workflows) come first,
then live states, then the watermark, then the tombstones."""

from __future__ import annotations

from eventq.state.jobs_table import WATERMARK_KEY
from streams.batch_effects import BatchEffects


def test_live_states_then_the_watermark_then_tombstones():
    batch = BatchEffects()
    batch.records.update({b"a": b"A", b"gone1": None, b"b": b"B", b"gone2": None})
    assert batch.changelog(watermark=4_000_001) == [
        (b"a", b"A"), (b"b", b"B"), (WATERMARK_KEY, b"4000001"), (b"gone1", None),
        (b"gone2", None),
    ]


def test_no_removal_writes_no_watermark():
    batch = BatchEffects()
    batch.records.update({b"a": b"A"})
    assert batch.changelog(watermark=None) == [(b"a", b"A")]


def test_only_the_last_state_of_a_job_is_written():
    batch = BatchEffects()
    for state in (b"A1", b"A2", None, b"A3"):  # added, changed, deleted, added again
        batch.records[b"a"] = state
    assert batch.changelog(watermark=7) == [(b"a", b"A3")]


def test_records_beside_the_jobs_come_first_written_or_deleted():
    """Workflows: a side record goes with its job's state or tombstone, or with the
    watermark an expire of an absent job moves: it comes before all of them, so a prefix
    that holds what makes its command read again as applied holds it too."""
    batch = BatchEffects()
    batch.records.update({b"a": b"A", b"gone": None})
    batch.side.update({b"\x00eventq.input:x": b"I", b"\x00eventq.reg:y": None})
    assert batch.changelog(watermark=9) == [
        (b"\x00eventq.input:x", b"I"), (b"\x00eventq.reg:y", None), (b"a", b"A"),
        (WATERMARK_KEY, b"9"), (b"gone", None),
    ]


def test_a_removal_without_a_tombstone_still_writes_the_watermark():
    """An expire of an absent job that dropped registrations (or a job removed and added
    again in one record) moved the watermark: it is written, after the side records."""
    batch = BatchEffects()
    batch.side[b"\x00eventq.reg:y"] = None
    batch.removed = True
    assert batch.changelog(watermark=9) == [(b"\x00eventq.reg:y", None), (WATERMARK_KEY, b"9")]
