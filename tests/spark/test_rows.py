"""The row functions Spark runs (eventq.spark.rows, ids) and the histogram buckets
(eventq.core.histogram), without Spark."""

from __future__ import annotations

import random
import uuid

import numpy as np
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
    decode_command,
    encode_command,
    histogram,
    state_digest,
)
from eventq.core.batch import encode_batch, position, split_record
from eventq.core.codec import encode_recurrence
from eventq.core.commands import Fire, Recur, Unrecur, command_key
from eventq.core.machine import apply
from eventq.core.partitioner import job_key, partition_for_key
from eventq.core.recurrence import (
    FIRED_ALREADY,
    NO_SUCH_RECURRENCE,
    SLOT_NOT_DUE,
    recurrence_table_key,
    slot_job_id,
)
from eventq.core.recurrence import apply as apply_recurrence
from eventq.limits import MAX_AFTER_IDS, MAX_PAYLOAD_BYTES
from eventq.protocol.values import parse_time_ms
from eventq.spark import rows
from eventq.spark.ids import DEFAULT_NAMESPACE, canonical_key, derive_job_id, namespace_uuid

pytestmark = [pytest.mark.spark]

NOW_MS = 1_800_000_000_000


def spec(**changes) -> rows.EnqueueSpec:
    base = dict(
        id_mode=rows.ID_FROM_COLUMN, namespace=DEFAULT_NAMESPACE.bytes, partitions=8,
        now_ms=NOW_MS, name="q", ttr_ms=1000, ttl_ms=60_000,
    )
    return rows.EnqueueSpec(**{**base, **changes})


def row(s: rows.EnqueueSpec, **cells):
    fields = ("raw_id", "key", "name", "payload", "ttr", "ttl", "priority",
              "max_attempts", "max_fails", "time", "after", "after_names", "tags")
    return rows.encode_row(s, *(cells.get(f) for f in fields))


def reject_of(s: rows.EnqueueSpec, **cells) -> tuple[str, str]:
    with pytest.raises(rows.Reject) as caught:
        row(s, **cells)
    return caught.value.field, caught.value.reason


# --------------------------------------------------------------------------- ids


def test_derived_ids_are_deterministic_version4_and_separate_queues_and_keys():
    first = derive_job_id(DEFAULT_NAMESPACE, "q", ["42", None])
    assert first == derive_job_id(DEFAULT_NAMESPACE, "q", ["42", None])
    assert first.version == 4 and first.variant == uuid.RFC_4122
    others = {
        derive_job_id(DEFAULT_NAMESPACE, "other", ["42", None]),
        derive_job_id(DEFAULT_NAMESPACE, "q", ["42", ""]),
        derive_job_id(DEFAULT_NAMESPACE, "q", ["42"]),
        derive_job_id(namespace_uuid("tenant-a"), "q", ["42", None]),
    }
    assert first not in others and len(others) == 4
    assert canonical_key("q", ["a,b", "c"]) != canonical_key("q", ["a", "b,c"])
    for i in range(1000):
        job_id = derive_job_id(DEFAULT_NAMESPACE, "q", [str(i)])
        assert job_id.version == 4 and job_id.variant == uuid.RFC_4122
    with pytest.raises(TypeError):
        canonical_key("q", [42])  # values are Spark's text of the cell
    assert namespace_uuid(str(DEFAULT_NAMESPACE)) == DEFAULT_NAMESPACE


# ----------------------------------------------------------------------- encoding


def test_a_valid_row_is_the_gateways_add_record_in_its_murmur2_partition():
    job_id = uuid.uuid4()
    s = spec(priority_from_column=True, max_attempts_from_column=True)
    key, value, partition, text = row(
        s, raw_id=str(job_id).upper(), payload=b"data", priority="-7", max_attempts="3"
    )
    assert key == job_key(job_id) == str(job_id).encode()
    assert text == str(job_id)
    assert value == encode_command(Add(job_id, "q", 1000, 60_000, b"data", -7, 3, 0))
    assert decode_command(value).node is None and decode_command(value).request_id is None
    assert partition == partition_for_key(key, 8)


def test_a_row_with_a_time_is_a_schedule_and_null_time_an_add():
    job_id = uuid.uuid4()
    s = spec(time_kind=rows.TIME_AS_TEXT)
    at = NOW_MS + 5000
    _, value, _, _ = row(s, raw_id=str(job_id), payload=b"", time="2027-01-15T08:00:00.250Z")
    command = decode_command(value).command
    assert isinstance(command, Schedule)
    assert command.time_ms == parse_time_ms("2027-01-15T08:00:00.250Z")
    _, value, _, _ = row(s, raw_id=str(job_id), payload=b"", time=str(at))  # epoch ms text
    assert decode_command(value).command == Schedule(job_id, "q", 1000, 60_000, at, b"")
    _, value, _, _ = row(spec(time_kind=rows.TIME_AS_MS), raw_id=str(job_id), payload=b"",
                         time=str(at))
    assert decode_command(value).command.time_ms == at
    _, value, _, _ = row(s, raw_id=str(job_id), payload=b"x", time=None)
    assert isinstance(decode_command(value).command, Add)


def test_keys_derive_the_id_from_the_name_and_key_values():
    s = spec(id_mode=rows.ID_FROM_KEYS)
    key, _, _, text = row(s, key=["7", "x"], payload=b"")
    assert text == str(derive_job_id(DEFAULT_NAMESPACE, "q", ["7", "x"]))
    key2, *_ = row(s, key=["7", "x"], payload=b"other payload")
    assert key2 == key


@pytest.mark.parametrize(
    "changes, cells, field, reason",
    [
        ({}, {"raw_id": "not-a-uuid"}, "id", "Invalid ID"),
        ({}, {"raw_id": "6ba7b810-9dad-11d1-80b4-00c04fd430c4"}, "id", "Invalid ID"),  # v1
        ({}, {"raw_id": None}, "id", "missing (null)"),
        ({}, {"raw_id": b"\x00" * 15}, "id", "Invalid ID"),
        ({"name": None}, {"name": "bad name"}, "name", "Invalid Name"),
        ({"name": None}, {"name": "x" * 256}, "name", "Invalid Name"),
        ({"name": None}, {"name": None}, "name", "missing (null)"),
        ({"ttr_ms": None}, {"ttr": "0"}, "ttr", "Invalid TTR"),
        ({"ttr_ms": None}, {"ttr": "86400001"}, "ttr", "Invalid TTR"),
        ({"ttr_ms": None}, {"ttr": "5.0"}, "ttr", "Invalid TTR"),
        ({"ttr_ms": None}, {"ttr": None}, "ttr", "missing (null)"),
        ({"ttl_ms": None}, {"ttl": "0"}, "ttl", "Invalid TTL"),
        ({"ttl_ms": None}, {"ttl": str(2**64)}, "ttl", "Invalid TTL"),
        ({"priority_from_column": True}, {"priority": str(2**31)}, "priority", "Invalid Priority"),
        ({"max_attempts_from_column": True}, {"max_attempts": "256"}, "max-attempts", "Invalid Max Attempts"),
        ({"max_fails_from_column": True}, {"max_fails": "-1"}, "max-fails", "Invalid Max Fails"),
        ({"time_kind": rows.TIME_AS_TEXT}, {"time": "2030-02-30T00:00:00Z"}, "time", "Invalid Time"),
        ({"time_kind": rows.TIME_AS_TEXT}, {"time": str(NOW_MS - 60_001)}, "time", "already past"),
        ({}, {"payload": b"x" * (MAX_PAYLOAD_BYTES + 1)}, "payload", "more than 1048576"),
    ],
)
def test_rows_the_gateway_would_refuse_are_rejects_with_a_reason(changes, cells, field, reason):
    cells = {"raw_id": str(uuid.uuid4()), "payload": b"", **cells}
    got_field, got_reason = reject_of(spec(**changes), **cells)
    assert got_field == field and reason in got_reason


def upstreams_of(s: rows.EnqueueSpec, **cells) -> tuple[uuid.UUID, ...]:
    _, value, _, _ = row(s, **{"raw_id": str(uuid.uuid4()), "payload": b"", **cells})
    return decode_command(value).command.after


def test_upstream_ids_in_any_spelling_are_the_adds_after_in_their_order():
    ups = [uuid.uuid4() for _ in range(3)]
    spellings = [str(ups[0]).upper(), "{%s}" % ups[1], f"urn:uuid:{ups[2].hex}"]
    s = spec(after_kind=rows.AFTER_IDS)
    assert upstreams_of(s, after=spellings) == tuple(ups)  # an array (from Arrow: numpy)
    assert upstreams_of(s, after=np.array(spellings, dtype=object)) == tuple(ups)
    assert upstreams_of(s, after=",".join(spellings)) == tuple(ups)  # the protocol's text
    # None: null, or an empty array (a root of the DAG); the add has no after at all
    for none in (None, [], np.array([], dtype=object)):
        _, value, _, _ = row(s, raw_id=str(ups[0]), payload=b"", after=none)
        assert value == encode_command(Add(ups[0], "q", 1000, 60_000, b""))
    job_id = uuid.uuid4()
    _, value, _, _ = row(spec(after_kind=rows.AFTER_IDS, time_kind=rows.TIME_AS_MS),
                         raw_id=str(job_id), payload=b"", time=str(NOW_MS), after=spellings)
    assert decode_command(value).command == Schedule(job_id, "q", 1000, 60_000, NOW_MS, b"",
                                                     after=tuple(ups))


def test_upstream_keys_derive_ids_as_the_rows_own_keys_do():
    s = spec(id_mode=rows.ID_FROM_KEYS, after_kind=rows.AFTER_KEYS, key_count=1)

    def key_id(value: str, name: str = "q") -> uuid.UUID:
        return derive_job_id(DEFAULT_NAMESPACE, name, [value])

    _, _, _, own = row(s, key=["7"], payload=b"")
    assert own == str(key_id("7"))
    assert upstreams_of(s, key=["9"], after=[["7"], ["8"]]) == (key_id("7"), key_id("8"))
    assert upstreams_of(s, key=["9"], after="7,8") == (key_id("7"), key_id("8"))  # CSV text
    assert upstreams_of(s, key=["9"], after=[["7"]], after_names=["other"]) == (
        key_id("7", "other"),)  # an upstream in another queue
    assert upstreams_of(s, key=["9"], after=[["7"]], after_names=[None]) == (key_id("7"),)
    two = spec(id_mode=rows.ID_FROM_KEYS, after_kind=rows.AFTER_KEYS, key_count=2)
    assert upstreams_of(two, key=["a", None], after=[["b", None]]) == (
        derive_job_id(DEFAULT_NAMESPACE, "q", ["b", None]),)


def test_too_many_upstreams_are_refused_and_exactly_the_limit_is_not():
    s = spec(after_kind=rows.AFTER_IDS)
    hundred = [str(uuid.uuid4()) for _ in range(MAX_AFTER_IDS)]
    assert len(upstreams_of(s, after=hundred)) == MAX_AFTER_IDS
    field, reason = reject_of(s, raw_id=str(uuid.uuid4()), payload=b"",
                              after=hundred + [str(uuid.uuid4())])
    assert (field, reason.split(", got")[0]) == ("after", "Invalid After (101 upstreams, at most 100)")


A, B = str(uuid.uuid4()), str(uuid.uuid4())
SELF = "0b1d6b5e-7f9a-4c55-9f3b-1b2c3d4e5f60"


@pytest.mark.parametrize(
    "kind, cells, reason",
    [
        (rows.AFTER_IDS, {"after": [A, "not-a-uuid"]}, "upstream 2 is not a version-4 UUID"),
        (rows.AFTER_IDS, {"after": ["6ba7b810-9dad-11d1-80b4-00c04fd430c4"]},  # version 1
         "upstream 1 is not a version-4 UUID"),
        (rows.AFTER_IDS, {"after": f"{A},,{B}"}, "upstream 2 is empty"),
        (rows.AFTER_IDS, {"after": f"{A},"}, "upstream 2 is empty"),
        (rows.AFTER_IDS, {"after": ""}, "upstream 1 is empty"),
        (rows.AFTER_IDS, {"after": [A, None]}, "upstream 2 is empty"),
        (rows.AFTER_IDS, {"after": [A, ""]}, "upstream 2 is empty"),
        (rows.AFTER_IDS, {"after": [f"{A},{B}"]}, "upstream 1 is not a version-4 UUID"),
        (rows.AFTER_IDS, {"after": [A, "{%s}" % A.upper()]}, "upstream 2 repeats upstream 1"),
        (rows.AFTER_IDS, {"after": [A, SELF.upper()]}, "upstream 2 is the job itself"),
        (rows.AFTER_KEYS, {"after": [["1"], ["0"]]}, "upstream 2 is the job itself"),
        (rows.AFTER_KEYS, {"after": [["1"], ["1"]]}, "upstream 2 repeats upstream 1"),
        (rows.AFTER_KEYS, {"after": [["1"], None]}, "upstream 2 is empty"),
        (rows.AFTER_KEYS, {"after": "1,"}, "upstream 2 is empty"),
        (rows.AFTER_KEYS, {"after": [["1", "2"]]}, "upstream 1 has 2 key values, not 1"),
        (rows.AFTER_KEYS, {"after": [["1"]], "after_names": ["bad name"]},
         "upstream 1's queue: Invalid Name"),
    ],
)
def test_malformed_upstream_lists_are_rejects_saying_which_rule_they_break(kind, cells, reason):
    """docs/workflows.md, "Values and checks": 1-100 ids, no empty element, each a
    version-4 UUID, all distinct as values, none the job's own: ``Invalid After``."""
    if kind == rows.AFTER_KEYS:
        s = spec(id_mode=rows.ID_FROM_KEYS, after_kind=kind, key_count=1)
        cells = {"key": ["0"], **cells}
    else:
        s = spec(after_kind=kind)
        cells = {"raw_id": SELF, **cells}
    with pytest.raises(rows.Reject) as caught:
        row(s, payload=b"", **cells)
    assert caught.value.field == "after"
    assert caught.value.reason.startswith(f"Invalid After ({reason}), got ")
    assert caught.value.job_id is not None  # the reject names the row's job


def test_an_upstream_list_the_protocol_refuses_is_refused_here_too():
    """The verdict is the protocol's own parser's (values.parse_after): any text it
    refuses is a reject, whatever the explanation finds."""
    from eventq.errors import ClientError
    from eventq.protocol.values import parse_after

    s = spec(after_kind=rows.AFTER_IDS)
    for text in (A, f"{A},{B}", f" {A}", f"{A};{B}", "urn:uuid:" + A, A[:-1], A + "0"):
        try:
            parse_after(text)
        except ClientError:
            assert reject_of(s, raw_id=SELF, payload=b"", after=text)[0] == "after"
        else:
            assert upstreams_of(s, after=text)


def test_a_payload_of_exactly_1_mib_is_accepted():
    key, value, _, _ = row(spec(), raw_id=str(uuid.uuid4()), payload=b"x" * MAX_PAYLOAD_BYTES)
    assert len(decode_command(value).command.payload) == MAX_PAYLOAD_BYTES


def test_encode_rows_returns_one_struct_row_per_input_row():
    import pandas as pd

    good, bad = uuid.uuid4(), "nope"
    series = [pd.Series([str(good), bad])] + [pd.Series([None, None])] * 2 + [
        pd.Series([b"a", b"b"])] + [pd.Series([None, None])] * 9
    frame = rows.encode_rows(spec(), *series)
    assert list(frame.columns) == list(rows.ENCODED_FIELDS)
    assert frame["job_id"].tolist() == [str(good), None]
    assert frame["reject_field"].tolist() == [None, "id"]
    assert frame["partition"].tolist()[0] == partition_for_key(str(good).encode(), 8)
    assert pd.isna(frame["partition"].tolist()[1]) and frame["key"].tolist()[1] is None


# ------------------------------------------------------------------------ digests


def _jobs(count: int):
    jobs, at = [], NOW_MS
    for i in range(count):
        job_id = uuid.uuid4()
        _, job = apply(None, Add(job_id, f"q{i % 3}", 1000, 0 if i % 4 else 10 ** 19,
                                 b"p%d" % i, i - 5), at + i, i)
        if i % 2:
            _, job = apply(job, StartAttempt(job_id, 1), at + i + 1, 10_000 + i)
        if i % 3 == 0 and job.state.name == "LEASED":
            _, job = apply(job, Complete(job_id, b"r"), at + i + 2, 20_000 + i)
        jobs.append(job)
    return jobs


def test_job_rows_round_trip_and_partial_digests_combine_to_the_cores():
    jobs = _jobs(60)
    assert [rows.job_of_row(rows.job_row(job)) for job in jobs] == jobs
    schema = rows._arrow_schema(rows.JOB_DDL)
    batches = [
        pa.RecordBatch.from_pylist([rows.job_row(j) for j in jobs[i : i + 7]], schema=schema)
        for i in range(0, len(jobs), 7)
    ]
    parts = [p for out in rows.hash_jobs(iter(batches)) for p in out.to_pylist()]
    assert len(parts) == len(batches)
    random.shuffle(parts)
    assert rows.combine_digest([(p["sum"], p["count"]) for p in parts]) == state_digest(jobs)
    assert rows.combine_digest([]) == state_digest([])


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


def test_the_state_log_columns_are_as_they_were():
    """Derived from the field table now (rows.JOB_FIELD_KINDS): the same columns, order
    and types as the snapshots written before."""
    assert rows.JOB_COLUMNS == (
        "id", "name", "ttr_ms", "ttl_ms", "payload", "priority", "max_attempts",
        "max_fails", "attempts", "fails", "state", "state_name", "created_ms",
        "scheduled_ms", "expires_ms", "lease_deadline_ms", "result", "result_ok",
        "version", "backoff_ms", "returns", "retry_ms",
        # workflows' (docs/workflows.md), after all the columns snapshots had before;
        # after and waiting are derived from upstreams, as state_name from state
        "upstreams", "after", "waiting", "added_at", "released_ms", "finished_at",
        "finished_ms", "group",
        # failure groups and retry (docs/workflows.md, 3): the group a FAILED job is in
        # and its failure time, derived from group; then tags' (docs/workflows.md, 4);
        # then a retry's fields; then a dependent's scope (docs/security.md)
        "failure_group", "failed_ms", "tags", "delayed_ms", "early", "scope")
    assert rows.JOB_DDL == (
        "id string, name string, ttr_ms bigint, ttl_ms decimal(20,0), payload binary, "
        "priority int, max_attempts int, max_fails int, attempts int, fails int, state int, "
        "state_name string, created_ms bigint, scheduled_ms bigint, expires_ms decimal(20,0), "
        "lease_deadline_ms decimal(20,0), result binary, result_ok boolean, version bigint, "
        "backoff_ms int, returns int, retry_ms bigint, upstreams binary, "
        "after array<string>, waiting int, added_at bigint, "
        "released_ms bigint, finished_at bigint, finished_ms bigint, group string, "
        "failure_group string, failed_ms bigint, tags array<string>, delayed_ms bigint, "
        "early boolean, scope string")


def test_every_job_field_has_a_column_type():
    from eventq.core.job import JOB_FIELD_NAMES

    assert set(rows.JOB_FIELD_KINDS) == set(JOB_FIELD_NAMES)


def test_a_row_written_before_the_backoff_fields_reads_with_their_defaults():
    job = _jobs(1)[0]
    row = rows.job_row(job)
    for column in ("backoff_ms", "returns", "retry_ms"):
        del row[column]
    assert rows.job_of_row(row) == job


def test_a_dependents_row_round_trips_and_other_jobs_leave_its_columns_null():
    from eventq.core import Upstream, UpstreamOutcome

    up1, up2 = uuid.UUID(int=1), uuid.UUID(int=2)
    job = apply(None, Add(uuid.UUID(int=3), "q", 10, 1000, b"p", after=(up1, up2)), NOW_MS, 5)[1]
    for n, (up, outcome) in enumerate([(up1, UpstreamOutcome.COMPLETED),
                                       (up2, UpstreamOutcome.FAILED)]):
        job = apply(job, Upstream(job.id, 5, up, outcome, 9, NOW_MS, b"r"), NOW_MS + n, 6 + n)[1]
        assert rows.job_of_row(rows.job_row(job)) == job
    assert job.group == "upstream-failed"
    plain = _jobs(1)[0]
    row = rows.job_row(plain)
    assert all(row[c] is None for c in ("upstreams", "after", "waiting", "added_at",
                                        "released_ms", "group"))
    for column in ("upstreams", "added_at", "released_ms", "finished_at", "finished_ms", "group"):
        del row[column]  # a snapshot written before workflows
    assert rows.job_of_row(row) == plain


def test_a_tagged_jobs_row_round_trips_and_other_jobs_leave_tags_null():
    job = apply(None, Add(uuid.UUID(int=3), "q", 10, 1000, b"p", tags=("b", "a")), NOW_MS, 5)[1]
    row = rows.job_row(job)
    assert row["tags"] == ["b", "a"]  # -tags order
    assert rows.job_of_row(row) == job
    assert rows.job_of_row({**row, "tags": np.array(["b", "a"], dtype=object)}) == job  # Arrow
    plain = _jobs(1)[0]
    row = rows.job_row(plain)
    assert row["tags"] is None and rows.job_of_row(row) == plain
    del row["tags"]  # a snapshot written before tags
    assert rows.job_of_row(row) == plain


def tags_of(s: rows.EnqueueSpec, **cells) -> tuple[str, ...]:
    _, value, _, _ = row(s, raw_id=str(uuid.uuid4()), payload=b"", **cells)
    return decode_command(value).command.tags


def test_tags_from_a_column_or_a_constant_are_the_adds_tags_in_their_order():
    s = spec(tags_from_column=True)
    assert tags_of(s, tags="nightly,etl") == ("nightly", "etl")
    assert tags_of(s, tags=["b", "a.1", "Z-_"]) == ("b", "a.1", "Z-_")
    assert tags_of(s, tags=np.array(["x"], dtype=object)) == ("x",)  # Arrow's array cell
    assert tags_of(s, tags=None) == () and tags_of(s, tags=[]) == ()
    sixteen = [f"{n:02d}" + "t" * 62 for n in range(16)]
    assert tags_of(s, tags=sixteen) == tuple(sixteen)
    assert tags_of(s, tags=",".join(sixteen)) == tuple(sixteen)
    constant = spec(tags=("every", "row"))
    assert tags_of(constant, tags="ignored") == ("every", "row")
    assert tags_of(spec(), tags="not a column") == ()
    # a schedule carries them too
    _, value, _, _ = row(spec(time_kind=rows.TIME_AS_MS, tags_from_column=True),
                         raw_id=str(uuid.uuid4()), payload=b"", time=NOW_MS + 5, tags="s")
    assert decode_command(value).command == Schedule(
        decode_command(value).command.job_id, "q", 1000, 60_000, NOW_MS + 5, b"", tags=("s",))


@pytest.mark.parametrize(
    "cells, reason",
    [
        ({"tags": ""}, "tag 1 is empty"),
        ({"tags": "a,,b"}, "tag 2 is empty"),
        ({"tags": "a,"}, "tag 2 is empty"),
        ({"tags": ["a", None]}, "tag 2 is empty"),
        ({"tags": ["a", ""]}, "tag 2 is empty"),
        ({"tags": "a,b,a"}, "tag 3 repeats tag 1"),
        ({"tags": ["x", "x"]}, "tag 2 repeats tag 1"),
        ({"tags": ["a,b"]}, "tag 1 is not 1-64 bytes of [A-Za-z0-9_.-]"),
        ({"tags": "a b"}, "tag 1 is not 1-64 bytes of [A-Za-z0-9_.-]"),
        ({"tags": ["ok", "t" * 65]}, "tag 2 is not 1-64 bytes of [A-Za-z0-9_.-]"),
        ({"tags": ["é"]}, "tag 1 is not 1-64 bytes of [A-Za-z0-9_.-]"),
        ({"tags": [f"t{n}" for n in range(17)]}, "17 tags, at most 16"),
    ],
)
def test_malformed_tags_are_rejects_saying_which_rule_they_break(cells, reason):
    """docs/workflows.md, "Values and checks": 1-16 tags, no empty element, each 1-64
    bytes of [A-Za-z0-9_.-], all distinct: ``Invalid Tags``, with the row and why."""
    with pytest.raises(rows.Reject) as caught:
        row(spec(tags_from_column=True), raw_id=SELF, payload=b"", **cells)
    assert caught.value.field == "tags"
    assert caught.value.reason.startswith(f"Invalid Tags ({reason}), got ")
    assert caught.value.job_id == uuid.UUID(SELF)  # the reject names the row's job


def test_tags_are_checked_after_every_other_field():
    """The protocol's field order: -tags is last (a bad after is reported first)."""
    s = spec(tags_from_column=True, after_kind=rows.AFTER_IDS)
    assert reject_of(s, raw_id=SELF, payload=b"", after="x", tags="a,a")[0] == "after"
    assert reject_of(s, raw_id="x", payload=b"", tags="a,a")[0] == "id"


def test_a_tags_list_the_protocol_refuses_is_refused_here_too():
    from eventq.errors import ClientError
    from eventq.protocol.values import parse_tags

    s = spec(tags_from_column=True)
    for text in ("a", "a,b", " a", "a;b", "a:b", "-", ".", "a" * 64, "a" * 65, "a,A"):
        try:
            parse_tags(text)
        except ClientError:
            assert reject_of(s, raw_id=SELF, payload=b"", tags=text)[0] == "tags"
        else:
            assert tags_of(s, tags=text) == tuple(text.split(","))


def test_a_dependents_row_shows_its_upstreams_and_how_many_it_still_waits_for():
    """The protocol's ``after``/``waiting`` (docs/workflows.md, "Dependencies"): the ids
    in -after order, and the upstreams not COMPLETED, 0 once released."""
    from eventq.core import Upstream, UpstreamOutcome

    ups = (uuid.UUID(int=12), uuid.UUID(int=11), uuid.UUID(int=13))
    job = apply(None, Add(uuid.UUID(int=3), "q", 10, 1000, b"p", after=ups), NOW_MS, 5)[1]
    seen = [(rows.job_row(job)["state_name"], rows.job_row(job)["waiting"])]
    for n, up in enumerate(ups):
        job = apply(job, Upstream(job.id, 5, up, UpstreamOutcome.COMPLETED, 9, NOW_MS, b"r"),
                    NOW_MS + n, 6 + n)[1]
        seen.append((rows.job_row(job)["state_name"], rows.job_row(job)["waiting"]))
    assert seen == [("waiting", 3), ("waiting", 2), ("waiting", 1), ("new", 0)]
    assert rows.job_row(job)["after"] == [str(up) for up in ups]  # -after order, not sorted
    assert rows.job_of_row(rows.job_row(job)) == job  # derived columns are not read back


def test_edges_are_one_row_per_link_with_the_upstreams_latest_outcome():
    from eventq.core import Upstream, UpstreamOutcome

    done, failed, silent = uuid.UUID(int=21), uuid.UUID(int=22), uuid.UUID(int=23)
    job = apply(None, Add(uuid.UUID(int=3), "q", 10, 1000, b"p",
                          after=(silent, done, failed)), NOW_MS, 5)[1]
    job = apply(job, Upstream(job.id, 5, done, UpstreamOutcome.COMPLETED, 9, NOW_MS - 7, b"r"),
                NOW_MS, 6)[1]
    job = apply(job, Upstream(job.id, 5, failed, UpstreamOutcome.FAILED, 4, NOW_MS, b"x"),
                NOW_MS, 7)[1]
    plain = _jobs(1)[0]
    table = pa.Table.from_pylist([rows.job_row(j) for j in (job, plain)])
    out = pa.Table.from_batches(list(rows.explode_edges(table.to_batches())))
    assert out.schema == rows._arrow_schema(rows.EDGE_DDL)
    assert out.to_pylist() == [
        {"upstream": str(silent), "dependent": str(job.id), "name": "q", "position": 1,
         "outcome": "unfinished", "completed_ms": None, "dependent_state": "failed"},
        {"upstream": str(done), "dependent": str(job.id), "name": "q", "position": 2,
         "outcome": "completed", "completed_ms": NOW_MS - 7, "dependent_state": "failed"},
        {"upstream": str(failed), "dependent": str(job.id), "name": "q", "position": 3,
         "outcome": "failed", "completed_ms": None, "dependent_state": "failed"},
    ]


# -------------------------------------------------------------------- recurrences

EVERY_MS = 60_000
FIRST = NOW_MS // EVERY_MS + 1  # the first slot of a recur at NOW_MS + 5


def recurrence_record(name="nightly", fire_at=None, **fields):
    """A recurrence recurred at NOW_MS + 5 (position 1), fired at ``fire_at`` if given."""
    recur = Recur(name, fields.pop("job_name", "reports"), 30_000, fields.pop("ttl_ms", 3_600_000),
                  fields.pop("every_ms", EVERY_MS), fields.pop("payload", b"{}"), **fields)
    _, record = apply_recurrence(None, recur, NOW_MS + 5, 1)
    if fire_at is not None:
        _, record = apply_recurrence(record, Fire(name, fire_at // EVERY_MS), fire_at, 2)
    return record


def test_a_recurrences_row_is_its_record_with_the_cores_next_due_time():
    fresh = rows.recurrence_row(recurrence_record())
    assert (fresh["name"], fresh["job_name"], fresh["every_ms"]) == ("nightly", "reports", EVERY_MS)
    assert (fresh["next_slot"], fresh["next_ms"]) == (FIRST, FIRST * EVERY_MS)
    assert (fresh["fired_ms"], fresh["fired_slot"], fresh["first_slot"]) == (None, None, FIRST)
    assert (fresh["created_ms"], fresh["version"]) == (NOW_MS + 5, 1)
    assert (fresh["payload"], fresh["payload_bytes"], fresh["tags"]) == (b"{}", 2, None)

    # Fired two slots late: the latest due slot fires, the next is the one after it.
    record = recurrence_record(fire_at=(FIRST + 2) * EVERY_MS + 7, priority=-3, max_attempts=2,
                               max_fails=1, backoff_ms=500, tags=("a", "b"),
                               ttl_ms=2**64 - 1)
    row = rows.recurrence_row(record)
    assert (row["fired_slot"], row["fired_ms"]) == (FIRST + 2, (FIRST + 2) * EVERY_MS)
    assert (row["next_slot"], row["next_ms"]) == (FIRST + 3, record.next_ms)
    assert row["next_ms"] == (FIRST + 3) * EVERY_MS
    assert (row["priority"], row["max_attempts"], row["max_fails"], row["backoff_ms"]) == (
        -3, 2, 1, 500)
    assert row["tags"] == ["a", "b"] and row["ttl_ms"] == 2**64 - 1 and row["version"] == 2
    assert tuple(row) == rows.RECURRENCE_COLUMNS


def test_decode_recurrences_gives_a_row_per_record_and_says_which_it_cannot_read():
    good, other = recurrence_record("nightly"), recurrence_record("hourly", every_ms=3_600_000)
    log = {
        "key": [recurrence_table_key("nightly"), recurrence_table_key("hourly"),
                recurrence_table_key("broken"), recurrence_table_key("elsewhere")],
        "value": [encode_recurrence(good), encode_recurrence(other), b"\x92\xc4",
                  encode_recurrence(good)],  # a record of another recurrence: no fold's
        "partition": [0, 1, 2, 3], "offset": [10, 11, 12, 13],
    }
    [batch] = rows.decode_recurrences(iter([pa.RecordBatch.from_pydict(log)]))
    assert batch.schema == rows._arrow_schema(rows.DECODED_RECURRENCE_DDL)
    out = batch.to_pylist()
    assert [(r["name"], r["next_ms"]) for r in out[:2]] == [
        ("nightly", good.next_ms), ("hourly", other.next_ms)]
    assert out[0]["ttl_ms"] == 3_600_000 and out[1]["undecodable"] is None
    assert out[2]["name"] is None and out[2]["undecodable"].startswith("partition 2 offset 12: ")
    assert "under the key of 'elsewhere'" in out[3]["undecodable"]


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
