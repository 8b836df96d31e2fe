"""The state log's row functions (eventq.spark.state_rows), without Spark: job rows,
the digest's partial sums, the DAG's edges and the recurrences' rows."""

from __future__ import annotations

import random
import uuid

import numpy as np
import pyarrow as pa
import pytest

from eventq.core import Add, Complete, StartAttempt, state_digest
from eventq.core.codec import encode_recurrence
from eventq.core.commands import Fire, Recur
from eventq.core.machine import apply
from eventq.core.recurrence import apply as apply_recurrence
from eventq.core.recurrence import recurrence_table_key
from eventq.spark import state_rows
from eventq.spark.arrow import arrow_schema

pytestmark = [pytest.mark.spark]

NOW_MS = 1_800_000_000_000


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
    assert [state_rows.job_of_row(state_rows.job_row(job)) for job in jobs] == jobs
    schema = arrow_schema(state_rows.JOB_DDL)
    batches = [
        pa.RecordBatch.from_pylist([state_rows.job_row(j) for j in jobs[i : i + 7]], schema=schema)
        for i in range(0, len(jobs), 7)
    ]
    parts = [p for out in state_rows.hash_jobs(iter(batches)) for p in out.to_pylist()]
    assert len(parts) == len(batches)
    random.shuffle(parts)
    assert state_rows.combine_digest([(p["sum"], p["count"]) for p in parts]) == state_digest(jobs)
    assert state_rows.combine_digest([]) == state_digest([])


def test_the_state_log_columns_are_as_they_were():
    """Derived from the field table now (state_rows.JOB_FIELD_KINDS): the same columns, order
    and types as the snapshots written before."""
    assert state_rows.JOB_COLUMNS == (
        "id", "name", "ttr_ms", "ttl_ms", "payload", "priority", "max_attempts",
        "max_fails", "attempts", "fails", "state", "state_name", "created_ms",
        "scheduled_ms", "expires_ms", "lease_deadline_ms", "result", "result_ok",
        "version", "backoff_ms", "returns", "retry_ms",
        # workflows' (docs/workflows.md, "Dependencies"), after all the columns snapshots
        # had before; after and waiting are derived from upstreams, as state_name from
        # state
        "upstreams", "after", "waiting", "added_at", "released_ms", "finished_at",
        "finished_ms", "group",
        # failure groups and retry (docs/workflows.md, "Failure groups and retry"): the
        # group a FAILED job is in and its failure time, derived from group; then tags'
        # (docs/workflows.md, "Tags"); then a retry's fields; then a dependent's scope
        # (docs/security.md, "Queue-name prefixes")
        "failure_group", "failed_ms", "tags", "delayed_ms", "early", "scope")
    assert state_rows.JOB_DDL == (
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

    assert set(state_rows.JOB_FIELD_KINDS) == set(JOB_FIELD_NAMES)


def test_a_row_written_before_the_backoff_fields_reads_with_their_defaults():
    job = _jobs(1)[0]
    row = state_rows.job_row(job)
    for column in ("backoff_ms", "returns", "retry_ms"):
        del row[column]
    assert state_rows.job_of_row(row) == job


def test_a_dependents_row_round_trips_and_other_jobs_leave_its_columns_null():
    from eventq.core import Upstream, UpstreamOutcome

    up1, up2 = uuid.UUID(int=1), uuid.UUID(int=2)
    job = apply(None, Add(uuid.UUID(int=3), "q", 10, 1000, b"p", after=(up1, up2)), NOW_MS, 5)[1]
    for n, (up, outcome) in enumerate([(up1, UpstreamOutcome.COMPLETED),
                                       (up2, UpstreamOutcome.FAILED)]):
        job = apply(job, Upstream(job.id, 5, up, outcome, 9, NOW_MS, b"r"), NOW_MS + n, 6 + n)[1]
        assert state_rows.job_of_row(state_rows.job_row(job)) == job
    assert job.group == "upstream-failed"
    plain = _jobs(1)[0]
    row = state_rows.job_row(plain)
    assert all(row[c] is None for c in ("upstreams", "after", "waiting", "added_at",
                                        "released_ms", "group"))
    for column in ("upstreams", "added_at", "released_ms", "finished_at", "finished_ms", "group"):
        del row[column]  # a snapshot written before workflows
    assert state_rows.job_of_row(row) == plain


def test_a_tagged_jobs_row_round_trips_and_other_jobs_leave_tags_null():
    job = apply(None, Add(uuid.UUID(int=3), "q", 10, 1000, b"p", tags=("b", "a")), NOW_MS, 5)[1]
    row = state_rows.job_row(job)
    assert row["tags"] == ["b", "a"]  # -tags order
    assert state_rows.job_of_row(row) == job
    assert state_rows.job_of_row({**row, "tags": np.array(["b", "a"], dtype=object)}) == job  # Arrow
    plain = _jobs(1)[0]
    row = state_rows.job_row(plain)
    assert row["tags"] is None and state_rows.job_of_row(row) == plain
    del row["tags"]  # a snapshot written before tags
    assert state_rows.job_of_row(row) == plain


def test_a_dependents_row_shows_its_upstreams_and_how_many_it_still_waits_for():
    """The protocol's ``after``/``waiting`` (docs/workflows.md, "Dependencies"): the ids
    in -after order, and the upstreams not COMPLETED, 0 once released."""
    from eventq.core import Upstream, UpstreamOutcome

    ups = (uuid.UUID(int=12), uuid.UUID(int=11), uuid.UUID(int=13))
    job = apply(None, Add(uuid.UUID(int=3), "q", 10, 1000, b"p", after=ups), NOW_MS, 5)[1]
    seen = [(state_rows.job_row(job)["state_name"], state_rows.job_row(job)["waiting"])]
    for n, up in enumerate(ups):
        job = apply(job, Upstream(job.id, 5, up, UpstreamOutcome.COMPLETED, 9, NOW_MS, b"r"),
                    NOW_MS + n, 6 + n)[1]
        seen.append((state_rows.job_row(job)["state_name"], state_rows.job_row(job)["waiting"]))
    assert seen == [("waiting", 3), ("waiting", 2), ("waiting", 1), ("new", 0)]
    assert state_rows.job_row(job)["after"] == [str(up) for up in ups]  # -after order, not sorted
    assert state_rows.job_of_row(state_rows.job_row(job)) == job  # derived columns are not read back


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
    table = pa.Table.from_pylist([state_rows.job_row(j) for j in (job, plain)])
    out = pa.Table.from_batches(list(state_rows.explode_edges(table.to_batches())))
    assert out.schema == arrow_schema(state_rows.EDGE_DDL)
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
    fresh = state_rows.recurrence_row(recurrence_record())
    assert (fresh["name"], fresh["job_name"], fresh["every_ms"]) == ("nightly", "reports", EVERY_MS)
    assert (fresh["next_slot"], fresh["next_ms"]) == (FIRST, FIRST * EVERY_MS)
    assert (fresh["fired_ms"], fresh["fired_slot"], fresh["first_slot"]) == (None, None, FIRST)
    assert (fresh["created_ms"], fresh["version"]) == (NOW_MS + 5, 1)
    assert (fresh["payload"], fresh["payload_bytes"], fresh["tags"]) == (b"{}", 2, None)

    # Fired two slots late: the latest due slot fires, the next is the one after it.
    record = recurrence_record(fire_at=(FIRST + 2) * EVERY_MS + 7, priority=-3, max_attempts=2,
                               max_fails=1, backoff_ms=500, tags=("a", "b"),
                               ttl_ms=2**64 - 1)
    row = state_rows.recurrence_row(record)
    assert (row["fired_slot"], row["fired_ms"]) == (FIRST + 2, (FIRST + 2) * EVERY_MS)
    assert (row["next_slot"], row["next_ms"]) == (FIRST + 3, record.next_ms)
    assert row["next_ms"] == (FIRST + 3) * EVERY_MS
    assert (row["priority"], row["max_attempts"], row["max_fails"], row["backoff_ms"]) == (
        -3, 2, 1, 500)
    assert row["tags"] == ["a", "b"] and row["ttl_ms"] == 2**64 - 1 and row["version"] == 2
    assert tuple(row) == state_rows.RECURRENCE_COLUMNS


def test_decode_recurrences_gives_a_row_per_record_and_says_which_it_cannot_read():
    good, other = recurrence_record("nightly"), recurrence_record("hourly", every_ms=3_600_000)
    log = {
        "key": [recurrence_table_key("nightly"), recurrence_table_key("hourly"),
                recurrence_table_key("broken"), recurrence_table_key("elsewhere")],
        "value": [encode_recurrence(good), encode_recurrence(other), b"\x92\xc4",
                  encode_recurrence(good)],  # a record of another recurrence: no fold's
        "partition": [0, 1, 2, 3], "offset": [10, 11, 12, 13],
    }
    [batch] = state_rows.decode_recurrences(iter([pa.RecordBatch.from_pydict(log)]))
    assert batch.schema == arrow_schema(state_rows.DECODED_RECURRENCE_DDL)
    out = batch.to_pylist()
    assert [(r["name"], r["next_ms"]) for r in out[:2]] == [
        ("nightly", good.next_ms), ("hourly", other.next_ms)]
    assert out[0]["ttl_ms"] == 3_600_000 and out[1]["undecodable"] is None
    assert out[2]["name"] is None and out[2]["undecodable"].startswith("partition 2 offset 12: ")
    assert "under the key of 'elsewhere'" in out[3]["undecodable"]


