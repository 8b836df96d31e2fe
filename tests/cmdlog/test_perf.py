"""Sanity at volume: 100,000 records written, read back and replayed (no timing)."""

from __future__ import annotations

import uuid

from eventq.cmdlog import (
    SegmentWriter,
    WorkqState,
    WqComplete,
    WqStartAttempt,
    iter_commands,
    list_segments,
    replay_with_summary,
)
from support.cmdlog_strategies import NOW_NS, add

N_JOBS = 40_000  # 40k adds + 40k start-attempts + 20k completes = 100k records


def test_write_and_read_100k_records(tmp_path):
    ids = [uuid.UUID(int=i + 1) for i in range(N_JOBS)]
    with SegmentWriter(tmp_path, max_segment_bytes=2 * 1024 * 1024) as w:
        for i, id_ in enumerate(ids):
            w.append_command(add(id_, payload=b"x" * (i % 64)), NOW_NS + i)
        for id_ in ids:
            w.append_command(WqStartAttempt(id_), NOW_NS)
        for id_ in ids[::2]:
            w.append_command(WqComplete(id_, b"ok"), NOW_NS)
    assert w.records_written == 100_000
    assert len(list_segments(tmp_path)) > 1

    count = 0
    last = None
    for path, offset, _t, cmd in iter_commands(tmp_path):
        count += 1
        assert last is None or (path, offset) > last
        last = (path, offset)
    assert count == 100_000

    jobs, summary = replay_with_summary(iter_commands(tmp_path), NOW_NS)
    assert summary.records == 100_000
    assert dict(summary.by_type) == {"add": 40_000, "start-attempt": 40_000, "complete": 20_000}
    assert dict(summary.live_by_state) == {"COMPLETED": 20_000, "LEASED": 20_000}
    assert jobs[ids[0]].state == WorkqState.COMPLETED and jobs[ids[0]].result == b"ok"
    assert jobs[ids[1]].state == WorkqState.LEASED and jobs[ids[1]].attempts == 1
    assert jobs[ids[-1]].payload == b"x" * ((N_JOBS - 1) % 64)
