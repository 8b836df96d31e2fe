"""The command log's row functions (eventq.spark.rows: explode, fold, batch records)
and the histogram buckets (eventq.core.histogram), without Spark."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventq.core import (
    Add,
    Complete,
    Delete,
    Fail,
    Schedule,
    StartAttempt,
    TimeoutAttempt,
    encode_command,
    histogram,
)
from eventq.core.batch import encode_batch, position, split_record
from eventq.core.commands import Fire, Recur, Unrecur, command_key
from eventq.core.partitioner import job_key, partition_for_key
from eventq.core.recurrence import FIRED_ALREADY, NO_SUCH_RECURRENCE, SLOT_NOT_DUE, slot_job_id
from eventq.spark import rows

pytestmark = [pytest.mark.spark]

NOW_MS = 1_800_000_000_000
EVERY_MS = 60_000
FIRST = NOW_MS // EVERY_MS + 1  # the first slot of a recur at NOW_MS + 5


# ------------------------------------------------------------------------ the fold


def _records(commands, per_record: int = 1):
    """The command log of (command, at_ms) pairs as Spark's stats read it: records of
    ``per_record`` commands (batch records when more than one, eventq/core/batch.py),
    exploded into one row per command, ordered by (job_id, position) as Spark sorts
    them, in two Arrow batches."""
    log = {"key": [], "partition": [], "offset": [], "at_ms": [], "value": []}
    for offset, start in enumerate(range(0, len(commands), per_record)):
        group = commands[start:start + per_record]
        encoded = [encode_command(command) for command, _ in group]
        log["key"].append(command_key(group[0][0]) if len(group) == 1 else None)
        log["partition"].append(0)
        log["offset"].append(offset)
        log["at_ms"].append(group[0][1])  # (a batch shares its time; the tests pass one)
        log["value"].append(encoded[0] if len(group) == 1 else encode_batch(encoded))
    data = {k: [] for k in ("job_id", "partition", "position", "at_ms", "value")}
    for batch in rows.explode_commands(iter([pa.RecordBatch.from_pydict(log)])):
        for k, v in batch.to_pydict().items():
            data[k].extend(v)
    order = sorted(range(len(data["value"])), key=lambda i: (data["job_id"][i], data["position"][i]))
    data = {k: [v[i] for i in order] for k, v in data.items()}
    half = len(order) // 2
    return [pa.RecordBatch.from_pydict({k: v[:half] for k, v in data.items()}),
            pa.RecordBatch.from_pydict({k: v[half:] for k, v in data.items()})]


def test_explode_gives_each_command_of_a_batch_its_job_and_position():
    a, b = uuid.uuid4(), uuid.uuid4()
    commands = [(Add(a, "q", 1000, 600_000, b""), NOW_MS), (Add(b, "q", 1000, 600_000, b""), NOW_MS),
                (Delete(a), NOW_MS)]
    [first, second] = _records(commands, per_record=3)
    exploded = first.to_pylist() + second.to_pylist()
    assert sorted((r["job_id"], r["position"]) for r in exploded) == sorted(
        [(str(a), position(0, 0)), (str(b), position(0, 1)), (str(a), position(0, 2))]
    )


@given(st.lists(st.sampled_from(range(6)), min_size=1, max_size=30), st.integers(2, 7))
def test_batch_records_fold_as_their_commands_one_by_one(script, per_record):
    """The same commands at the same broker times give the same outcomes whether they
    travel one per record or in batch records."""
    ids = [uuid.uuid4(), uuid.uuid4()]
    make = [
        lambda j: Add(j, "q", 1000, 600_000, b"p", max_fails=2), lambda j: StartAttempt(j, 1),
        lambda j: Fail(j, b"x"), lambda j: Complete(j, b"ok"), lambda j: Delete(j),
        lambda j: StartAttempt(j, 2),
    ]
    commands = [(make[k](ids[i % 2]), NOW_MS + 1000 * (i // per_record))
                for i, k in enumerate(script)]
    def fold(n):
        out = [r for b in rows.fold_commands(iter(_records(commands, n))) for r in b.to_pylist()]
        # Sorted as a multiset: a missing value (None) sorts before any other, so two
        # rows alike up to a None and a number compare (CI found such a pair).
        return sorted(((r["job_id"], r["outcome"], r["event"], r["attempt"], r["wait_ms"],
                        r["run_ms"]) for r in out),
                      key=lambda row: [(value is not None, value or 0) if not isinstance(
                          value, str) else (True, value) for value in row])
    assert fold(per_record) == fold(1)


def test_explode_reports_a_broken_batch_as_one_undecodable_command():
    log = {"key": [None], "partition": [0], "offset": [7], "at_ms": [NOW_MS], "value": [b"\x92\xc4"]}
    [batch] = rows.explode_commands(iter([pa.RecordBatch.from_pydict(log)]))
    [row] = batch.to_pylist()
    assert row["job_id"] is None and row["position"] == position(7)
    [out] = [r for b in rows.fold_commands(iter([batch])) for r in b.to_pylist()]
    assert out["outcome"] == "undecodable" and "offset 7" in out["detail"]


def test_fold_times_waits_and_runs_of_accepted_attempts_only():
    a, b, c = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    t = NOW_MS
    commands = [
        (Add(a, "q", 1000, 600_000, b""), t),
        (Add(a, "q", 1000, 600_000, b""), t + 5),  # duplicate: rejected
        (StartAttempt(a, 1), t + 1500),  # wait 1.5 s
        (StartAttempt(a, 1), t + 1600),  # a refused claim: ignored
        (Complete(a, b"ok"), t + 4000),  # run 2.5 s
        (Add(b, "q", 1000, 600_000, b"", max_fails=2), t),
        (StartAttempt(b, 1), t + 10),
        (Fail(b, b"x"), t + 20),  # retried: run 10 ms, ready again at t+20
        (StartAttempt(b, 2), t + 70_020),  # wait 70 s (from the retry)
        (TimeoutAttempt(b, 2), t + 70_500),  # not yet due (TTR 1 s): ignored
        (TimeoutAttempt(b, 2), t + 71_020),  # timed out: no run sample
        (Schedule(c, "s", 1000, 600_000, t + 60_000, b""), t),
        (StartAttempt(c, 1), t + 61_000),  # wait from the scheduled time: 1 s
        (Delete(c), t + 62_000),
        (Complete(uuid.uuid4(), b""), t),  # unknown job: rejected, no queue
    ]
    out = [r for batch in rows.fold_commands(iter(_records(commands))) for r in batch.to_pylist()]
    assert len(out) == len(commands)
    by = {}
    for r in out:
        by.setdefault(r["job_id"], []).append(r)
    assert [(r["outcome"], r["event"], r["wait_ms"], r["run_ms"]) for r in by[str(a)]] == [
        ("accepted", "added", None, None),
        ("rejected", None, None, None),
        ("accepted", "attempt-started", 1500, None),
        ("ignored", None, None, None),
        ("accepted", "completed", None, 2500),
    ]
    assert [(r["event"], r["attempt"], r["wait_ms"], r["run_ms"]) for r in by[str(b)]] == [
        ("added", None, None, None),
        ("attempt-started", 1, 10, None),
        ("fail-retried", 1, None, 10),
        ("attempt-started", 2, 70_000, None),
        (None, None, None, None),
        ("attempt-timed-out", 2, None, None),
    ]
    assert [(r["queue"], r["event"], r["wait_ms"]) for r in by[str(c)]] == [
        ("s", "added", None), ("s", "attempt-started", 1000), ("s", "deleted", None),
    ]
    unknown = [r for r in out if r["queue"] is None]
    assert [(r["command"], r["outcome"], r["detail"]) for r in unknown] == [
        ("complete", "rejected", "NOT-FOUND")
    ]


# ---------------------------------------------------------------------- histogram


@pytest.mark.parametrize(
    "ms, lower, width, text",
    [
        (-5, 0, 1, "0s"), (0, 0, 1, "0s"), (999, 0, 1, "0s"), (1000, 1, 1, "1s"),
        (59_999, 59, 1, "59s"), (60_000, 60, 60, "1m"), (3_599_999, 3540, 60, "59m"),
        (3_600_000, 3600, 900, "1h00m"), (4_500_000, 4500, 900, "1h15m"),
        (86_399_999, 85_500, 900, "23h45m"), (86_400_000, 86_400, 3600, "24h"),
        (259_199_999, 255_600, 3600, "71h"), (259_200_000, 259_200, 86_400, "3d"),
        (10 * 86_400_000 + 5, 864_000, 86_400, "10d"),
    ],
)
def test_qless_histogram_buckets(ms, lower, width, text):
    assert histogram.bucket_of(ms) == (lower, width)
    assert histogram.label(lower, width) == text


def test_bucket_counts_per_resolution():
    lowers = {histogram.bucket_of(s * 1000) for s in range(0, 3 * 86_400 + 86_400 * 2, 1)}
    widths = {}
    for lower, width in lowers:
        widths[width] = widths.get(width, 0) + 1
    assert widths == {1: 60, 60: 59, 900: 92, 3600: 48, 86_400: 2}


# ------------------------------------------------------------------ batch records



def test_batch_records_group_each_partitions_commands_within_bounds():
    encoded = {"key": [], "value": [], "partition": []}
    for i in range(1000):
        job = uuid.uuid4()
        encoded["key"].append(job_key(job))
        encoded["value"].append(encode_command(Add(job, "q", 1000, 600_000, b"x" * (i % 50))))
        encoded["partition"].append(partition_for_key(job_key(job), 3))
    half = [pa.RecordBatch.from_pydict({k: v[:500] for k, v in encoded.items()}),
            pa.RecordBatch.from_pydict({k: v[500:] for k, v in encoded.items()})]
    out = [r for b in rows.batch_records(iter(half), max_commands=64, max_bytes=2048)
           for r in b.to_pylist()]
    seen = {p: [] for p in range(3)}
    for record in out:
        items = split_record(record["value"])
        assert len(items) <= 64 and (len(items) == 1 or len(record["value"]) <= 2048 + 8)
        assert (record["key"] is None) == (len(items) > 1)
        seen[record["partition"]].extend(items)
    for p in range(3):  # every command once, in its partition, in input order
        assert seen[p] == [v for v, q in zip(encoded["value"], encoded["partition"]) if q == p]
    assert len(out) < 100


def _recurrence_script(name="nightly"):
    t = NOW_MS
    return [
        (Recur(name, "reports", 30_000, 3_600_000, EVERY_MS, b"{}"), t + 5),
        (Fire(name, FIRST), t + 30_000),  # the broker's clock: not due yet
        (Fire(name, FIRST), FIRST * EVERY_MS + 10),  # fires FIRST
        (Fire(name, FIRST), FIRST * EVERY_MS + 20),  # repeated
        (Fire(name, FIRST + 1), (FIRST + 2) * EVERY_MS + 30),  # fires the latest: FIRST + 2
        (Unrecur(name), (FIRST + 2) * EVERY_MS + 40),
        (Fire(name, FIRST + 3), (FIRST + 3) * EVERY_MS),  # gone
        (Unrecur(name), (FIRST + 3) * EVERY_MS + 1),  # none left
    ]


def test_the_fold_decides_a_recurrences_commands_and_counts_the_slots_fired():
    """recur, unrecur and fire, folded as the processor applies them: only an accepted
    fire fires a slot (the latest due by the broker's clock), an early, repeated or
    orphaned one none; job commands around them fold as before."""
    job = uuid.uuid4()
    commands = [(Add(job, "reports", 1000, 600_000, b""), NOW_MS), *_recurrence_script(),
                (Complete(job, b""), NOW_MS + 1)]
    out = [r for b in rows.fold_commands(iter(_records(commands))) for r in b.to_pylist()]
    assert len(out) == len(commands)
    ours = [r for r in out if r["recurrence"] is not None]
    assert {r["job_id"] for r in ours} == {"recur:nightly"}
    due = FIRST * EVERY_MS
    assert [(r["command"], r["outcome"], r["detail"], r["slot"], r["due_ms"], r["next_ms"],
             r["queue"]) for r in ours] == [
        ("recur", "accepted", None, None, None, due, "reports"),
        ("fire", "ignored", SLOT_NOT_DUE, None, None, due, "reports"),
        ("fire", "accepted", None, FIRST, due, due + EVERY_MS, "reports"),
        ("fire", "ignored", FIRED_ALREADY, None, None, due + EVERY_MS, "reports"),
        ("fire", "accepted", None, FIRST + 2, due + 2 * EVERY_MS, due + 3 * EVERY_MS, "reports"),
        ("unrecur", "accepted", None, None, None, None, "reports"),  # gone, its queue known
        ("fire", "ignored", NO_SUCH_RECURRENCE, None, None, None, "reports"),
        ("unrecur", "rejected", "NOT-FOUND", None, None, None, "reports"),
    ]
    jobs = [r for r in out if r["recurrence"] is None]
    assert [(r["job_id"], r["event"]) for r in jobs] == [(str(job), "added"), (str(job), "completed")]
    # The slots fired are the ids of the jobs the processor adds for them.
    fired = [r["slot"] for r in ours if r["slot"] is not None]
    assert [slot_job_id("nightly", EVERY_MS, slot) for slot in fired] == [
        slot_job_id("nightly", EVERY_MS, FIRST), slot_job_id("nightly", EVERY_MS, FIRST + 2)]


@given(st.integers(2, 9))
def test_a_recurrences_commands_in_batch_records_fold_as_one_by_one(per_record):
    """A batch item names its recurrence by its key, ``recur:<name>``, as a record of
    its own is keyed: the same outcomes whichever way the commands travel."""
    script = sorted(_recurrence_script("a") + _recurrence_script("b"), key=lambda pair: pair[1])
    # A batch record has one broker time: its first command's (as _records gives it).
    commands = [(command, script[i - i % per_record][1]) for i, (command, _) in enumerate(script)]

    def fold(n):
        out = [r for b in rows.fold_commands(iter(_records(commands, n))) for r in b.to_pylist()]
        return sorted((r["job_id"], r["at_ms"], r["command"], r["outcome"], r["slot"] or 0,
                       r["next_ms"] or 0) for r in out)

    assert fold(per_record) == fold(1)
    assert {job_id for job_id, *_ in fold(per_record)} == {"recur:a", "recur:b"}


def test_a_recurrence_command_under_another_key_is_undecodable():
    log = {"key": [b"recur:other"], "partition": [3], "offset": [9], "at_ms": [NOW_MS],
           "value": [encode_command(Unrecur("nightly"))]}
    [batch] = rows.explode_commands(iter([pa.RecordBatch.from_pydict(log)]))
    [out] = [r for b in rows.fold_commands(iter([batch])) for r in b.to_pylist()]
    assert out["outcome"] == "undecodable" and out["recurrence"] is None
    assert "a command of recurrence 'nightly' under key 'recur:other'" in out["detail"]
