"""Statistics from the log with local Spark, on a small workload of known timing.

Its own server (module fixture), so the command log holds only this workload.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from dataclasses import dataclass

import pytest

from eventq.client.raw import RawClient as Client
from eventq.core import histogram as core_histogram
from eventq.core import state_digest
from eventq.errors import NotFound
from eventq.kafka.logreader import latest_jobs
from eventq.spark import cli as spark_cli
from eventq.spark import compute_stats, format_stats, histogram

pytestmark = [pytest.mark.spark, pytest.mark.kafka]


def kafka_flags(server) -> list[str]:
    return ["--bootstrap", server.bootstrap,
            "--commands-topic", server.settings["commands-topic"],
            "--jobs-topic", server.settings["jobs-topic"]]


LEASED_FOR_MS = 3_600_000


@dataclass(frozen=True)
class Spans:
    """The longest each kind of interval of the workload can be, by this test's clock:
    the broker stamps each command within its request's round trip, so an interval is at
    most from the first request's send to the second's reply. Its sleeps make it at
    least as long as they are. So a histogram is checked by the buckets those bounds
    allow, however busy the machine (on an idle one that is the one bucket the sleeps
    name: waits 1s, runs 2s), and the speed of the requests is not asserted."""

    timed_wait_ms: int  # queue timed's adds to its leases
    timed_run_ms: int  # its leases to the complete and the fail
    quick_ms: int  # any interval of queue quick


def labels_between(low_ms: int, high_ms: int) -> set[str]:
    """The labels of the buckets from ``low_ms``'s to ``high_ms``'s."""
    labels, at_ms = set(), low_ms
    while at_ms <= high_ms:
        lower_s, width_s = core_histogram.bucket_of(at_ms)
        labels.add(core_histogram.label(lower_s, width_s))
        at_ms = (lower_s + width_s) * 1000
    return labels


def ms_since(began: float) -> int:
    """Milliseconds since ``began``, and one more: the broker stamps whole milliseconds."""
    return math.ceil((time.monotonic() - began) * 1000) + 1


@pytest.fixture(scope="module")
def spans(server) -> Spans:
    """Queue `timed`: 4 adds; 1.5 s later 3 leases (waits in bucket 1s); 2.5 s later one
    complete and one fail (runs in bucket 2s); one job left leased, one new.
    Queue `quick`: a job leased and completed at once; a job failed at once (max-fails 2,
    so retried), leased again 1.2 s after that fail (wait 1s, from the retry) and completed.
    """

    async def scenario() -> Spans:
        async with await Client.connect(port=server.port) as c:
            timed_began = time.monotonic()
            ids = [uuid.uuid4() for _ in range(4)]
            for job_id in ids:  # a TTR past the module's end: the job left leased stays
                # so while Spark and the server are compared (CI 2026-11-27: a 60 s TTR
                # ran out on a busy machine, and the server had it "new" again)
                await c.add(job_id, "timed", LEASED_FOR_MS, 2 * LEASED_FOR_MS, b"t")
            await asyncio.sleep(1.5)
            leases_began = time.monotonic()
            leased = [await c.lease("timed", 1000) for _ in range(3)]
            timed_wait_ms = ms_since(timed_began)
            await asyncio.sleep(2.5)
            await c.complete(leased[0].id, b"ok")
            await c.fail(leased[1].id, b"no")
            timed_run_ms = ms_since(leases_began)

            quick_began = time.monotonic()
            quick, retried = uuid.uuid4(), uuid.uuid4()
            await c.add(quick, "quick", 60_000, 600_000, b"q")
            await c.complete((await c.lease("quick", 1000)).id, b"ok")
            await c.add(retried, "quick", 60_000, 600_000, b"r", max_fails=2)
            await c.fail((await c.lease("quick", 1000)).id, b"try again")
            await asyncio.sleep(1.2)
            await c.complete((await c.lease("quick", 1000)).id, b"ok at last")
            quick_ms = ms_since(quick_began)
            with pytest.raises(NotFound):  # refused by the processor: in the log, not counted
                await c.complete(uuid.uuid4(), b"")
            return Spans(timed_wait_ms, timed_run_ms, quick_ms)

    measured = asyncio.run(scenario())
    # The state log follows the applied commands: wait until it holds the server's state.
    deadline = time.monotonic() + 60
    while True:
        jobs, _ = latest_jobs(server.bootstrap, server.settings["jobs-topic"])
        if state_digest(jobs.values()) == asyncio.run(digest(server)):
            return measured
        assert time.monotonic() < deadline, "the state log never caught up with the server"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def workload(server, spans):
    """The server, once ``spans``'s workload is in its logs."""
    return server


async def digest(server) -> str:
    async with await Client.connect(port=server.port) as c:
        return await c.digest()


def by_queue(rows, queue):
    return [r for r in rows if r["queue"] == queue]


def test_counts_by_state_and_histograms_of_a_known_workload(spark, workload, spans):
    stats = compute_stats(
        spark, bootstrap=workload.bootstrap,
        commands_topic=workload.settings["commands-topic"],
        jobs_topic=workload.settings["jobs-topic"],
    )
    assert {(r["state"], r["count"]) for r in by_queue(stats.states, "timed")} == {
        ("new", 1), ("leased", 1), ("completed", 1), ("failed", 1)}
    assert {(r["state"], r["count"]) for r in by_queue(stats.states, "quick")} == {
        ("completed", 2)}

    accepted = {(r["queue"], r["event"]): r["count"] for r in stats.events
                if r["outcome"] == "accepted"}
    assert accepted == {
        ("timed", "added"): 4, ("timed", "attempt-started"): 3, ("timed", "completed"): 1,
        ("timed", "failed"): 1,
        ("quick", "added"): 2, ("quick", "attempt-started"): 3, ("quick", "completed"): 2,
        ("quick", "fail-retried"): 1,
    }
    assert [(r["command"], r["outcome"]) for r in by_queue(stats.events, None)] == [
        ("complete", "rejected")]

    def buckets(queue, metric):
        return {r["label"]: r["count"] for r in stats.histogram
                if r["queue"] == queue and r["metric"] == metric}

    def assert_within(counts: dict[str, int], total: int, low_ms: int, high_ms: int) -> None:
        assert sum(counts.values()) == total, counts
        assert set(counts) <= labels_between(low_ms, high_ms), (counts, low_ms, high_ms)

    # Each measured from where it should be: a wait from the add (or the retry), a run
    # from the lease; so the sleeps between them are in it (spans: where else it may fall).
    assert_within(buckets("timed", "wait"), 3, 1500, spans.timed_wait_ms)
    assert_within(buckets("timed", "run"), 2, 2500, spans.timed_run_ms)
    quick_waits = buckets("quick", "wait")
    assert_within(quick_waits, 3, 0, spans.quick_ms)
    from_the_retry = labels_between(1200, spans.quick_ms)
    assert sum(n for label, n in quick_waits.items() if label in from_the_retry) >= 1
    assert_within(buckets("quick", "run"), 3, 0, spans.quick_ms)
    assert all(r["width_s"] == 1 for r in stats.histogram)

    summary = {(r["queue"], r["metric"]): r for r in stats.summary}
    timed_wait = summary["timed", "wait"]
    assert timed_wait["count"] == 3 and 1500 <= timed_wait["p50_ms"] <= spans.timed_wait_ms
    assert 2500 <= summary["timed", "run"]["max_ms"] <= spans.timed_run_ms

    table = format_stats(stats)
    assert "queue timed" in table and "queue quick" in table
    assert "new 1  pending 0  leased 1  completed 1  failed 1" in table
    assert "1s  " in table and "#" in table


def test_the_servers_live_statistics_equal_spark_stats(spark, workload):
    """What the processor counted as it applied the log (/api/stats, the source of the
    dashboard and /metrics: docs/architecture.md, "Metrics and the dashboard") is what
    Spark finds folding the log again."""
    import json
    import urllib.request

    stats = compute_stats(
        spark, bootstrap=workload.bootstrap,
        commands_topic=workload.settings["commands-topic"],
        jobs_topic=workload.settings["jobs-topic"],
    )
    with urllib.request.urlopen(workload.http_url() + "api/stats", timeout=30) as response:
        live = json.load(response)

    def rows(items, keys):
        return sorted(tuple(r[k] for k in keys) for r in items if r["queue"] is not None)

    histogram_keys = ("queue", "metric", "lower_s", "width_s", "label", "count")
    assert rows(live["histogram"], histogram_keys) == rows(stats.histogram, histogram_keys)
    assert rows(live["histogram"], histogram_keys)  # (not two empty lists)
    state_keys = ("queue", "state", "count")
    assert rows(live["states"], state_keys) == rows(stats.states, state_keys)


def test_stats_cli_prints_the_table_and_writes_the_tables(spark, workload, spans, tmp_path,
                                                         capsys):
    output = str(tmp_path / "stats")
    code = spark_cli.main(["spark", "stats", "--queue", "timed", "--output", output,
                           *kafka_flags(workload)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "queue timed" in out and "queue quick" not in out
    histogram_rows = spark.read.parquet(f"{output}/histogram").collect()
    for metric, total, low_ms, high_ms in (("wait", 3, 1500, spans.timed_wait_ms),
                                           ("run", 2, 2500, spans.timed_run_ms)):
        rows = [r for r in histogram_rows if r["metric"] == metric]
        assert sum(r["count"] for r in rows) == total, rows
        assert {r["label"] for r in rows} <= labels_between(low_ms, high_ms), rows
    assert {r["metric"] for r in histogram_rows} == {"wait", "run"}
    assert spark.read.parquet(f"{output}/states").count() == 4


def test_spark_histogram_buckets_equal_the_python_rule(spark):
    from pyspark.sql import functions as F

    samples = [0, 999, 1000, 59_999, 60_000, 61_000, 3_599_999, 3_600_000, 4_500_000,
               86_399_999, 86_400_000, 100_000_000, 259_199_999, 259_200_000,
               10**10, -3] + list(range(0, 400_000_000, 997_001))
    df = spark.createDataFrame([(ms,) for ms in samples], "ms long")
    lower, width, text = histogram.bucket_columns("ms")
    got = df.select("ms", lower.alias("lower"), width.alias("width"),
                    text.alias("label")).collect()
    for r in got:
        expected = core_histogram.bucket_of(r["ms"])
        assert (r["lower"], r["width"]) == expected, r
        assert r["label"] == core_histogram.label(*expected), r
    assert F is not None


def test_the_table_counts_waiting_jobs_and_depends_as_registrations():
    """A ``depend`` never changes its upstream (the fold counts it ignored): the table
    shows it as a registration, and one that came before its upstream was added is not
    a command "for a job the log never created"."""
    from eventq.spark.stats import Stats

    stats = Stats(
        states=[{"queue": "etl", "state": "waiting", "count": 3},
                {"queue": "etl", "state": "new", "count": 1}],
        events=[
            {"queue": "etl", "command": "add", "outcome": "accepted", "event": "added",
             "count": 4},
            {"queue": "etl", "command": "depend", "outcome": "ignored", "event": None,
             "count": 2},
            {"queue": "etl", "command": "upstream", "outcome": "accepted",
             "event": "released", "count": 1},
            {"queue": "etl", "command": "upstream", "outcome": "ignored", "event": None,
             "count": 1},
            {"queue": None, "command": "depend", "outcome": "ignored", "event": None,
             "count": 5},
            {"queue": None, "command": "complete", "outcome": "rejected", "event": None,
             "count": 1},
        ],
    )
    table = format_stats(stats)
    assert "new 1  pending 0  leased 0  completed 0  failed 0  waiting 3" in table
    assert "events     added 4  registered 2  released 1" in table
    assert "not applied upstream ignored 1" in table and "depend ignored" not in table
    assert "(1 commands for jobs the log never created" in table
    assert "(5 dependents registered with an upstream not added yet)" in table


def test_the_table_counts_live_jobs_per_tag_and_state():
    """docs/workflows.md, "Tags": a line per tag, its live jobs by state."""
    from eventq.spark.stats import Stats

    stats = Stats(tags=[{"tag": "nightly", "state": "completed", "count": 2},
                        {"tag": "nightly", "state": "new", "count": 1_000},
                        {"tag": "etl", "state": "waiting", "count": 3}])
    lines = format_stats(stats).splitlines()
    assert lines[:2] == ["tag etl  waiting 3", "tag nightly  new 1,000  completed 2"]
    assert "tag" not in format_stats(Stats())


DAY_MS = 86_400_000
MIDNIGHT = 1_799_971_200_000  # 2027-01-15T00:00:00Z


def test_recurrences_take_fires_from_the_command_log_and_next_from_the_state_log():
    """A live recurrence: its record's queue, every, last fired slot and next due time,
    its fired slots the log's; one only the log names (unrecurred): its last known queue
    and no next; one no fire reached yet: 0 fired. By name bytewise."""
    from eventq.spark.stats import recurrence_rows

    defined = [
        {"name": "nightly", "job_name": "reports", "every_ms": DAY_MS, "fired_ms": MIDNIGHT,
         "next_ms": MIDNIGHT + DAY_MS},
        {"name": "Fresh", "job_name": "etl", "every_ms": 60_000, "fired_ms": None,
         "next_ms": MIDNIGHT + 60_000},
    ]
    logged = [
        {"recurrence": "nightly", "commands": 9, "fired": 3, "last_fired_ms": MIDNIGHT,
         "queue": "reports"},
        {"recurrence": "gone", "commands": 4, "fired": 1, "last_fired_ms": MIDNIGHT - DAY_MS,
         "queue": "old"},
    ]
    assert recurrence_rows(defined, logged) == [
        {"recurrence": "Fresh", "queue": "etl", "every_ms": 60_000, "fired": 0,
         "last_fired_ms": None, "next_ms": MIDNIGHT + 60_000},
        {"recurrence": "gone", "queue": "old", "every_ms": None, "fired": 1,
         "last_fired_ms": MIDNIGHT - DAY_MS, "next_ms": None},
        {"recurrence": "nightly", "queue": "reports", "every_ms": DAY_MS, "fired": 3,
         "last_fired_ms": MIDNIGHT, "next_ms": MIDNIGHT + DAY_MS},
    ]
    # Of one queue: those adding to it now, and those that did by the log (the commands
    # of one that moved to another queue, while it added to this one), still live.
    assert [r["recurrence"] for r in recurrence_rows(defined, [], "etl")] == ["Fresh"]
    moved = [{"recurrence": "nightly", "commands": 2, "fired": 1, "last_fired_ms": MIDNIGHT,
              "queue": "old-reports"}]
    [row] = recurrence_rows(defined, moved, "old-reports")
    assert (row["recurrence"], row["queue"], row["fired"], row["next_ms"]) == (
        "nightly", "reports", 1, MIDNIGHT + DAY_MS)


def test_the_table_counts_failed_jobs_per_group_and_shows_each_recurrence():
    """docs/workflows.md, "Failure groups and retry" and "Recurring jobs": a line
    per failure group with its FAILED jobs, and per recurrence its slots fired and when
    the next is due (none once unrecurred)."""
    from eventq.spark.stats import Stats

    stats = Stats(
        groups=[{"group": "attempts-exhausted", "count": 2},
                {"group": "net-timeout", "count": 1_500}],
        recurrences=[
            {"recurrence": "gone", "queue": "old", "every_ms": None, "fired": 1,
             "last_fired_ms": MIDNIGHT - DAY_MS, "next_ms": None},
            {"recurrence": "nightly", "queue": "reports", "every_ms": DAY_MS, "fired": 3,
             "last_fired_ms": MIDNIGHT, "next_ms": MIDNIGHT + DAY_MS},
            {"recurrence": "soon", "queue": "etl", "every_ms": 60_000, "fired": 0,
             "last_fired_ms": None, "next_ms": MIDNIGHT + 60_000},
        ],
    )
    lines = format_stats(stats).splitlines()
    assert lines[:5] == [
        "group attempts-exhausted  failed 2",
        "group net-timeout  failed 1,500",
        "recurrence gone  queue old  fired 1 (last due 2027-01-14T00:00:00Z)  gone (unrecurred)",
        "recurrence nightly  queue reports every 1.0d  fired 3 (last due 2027-01-15T00:00:00Z)"
        "  next due 2027-01-16T00:00:00Z",
        "recurrence soon  queue etl every 1.0m  fired 0  next due 2027-01-15T00:01:00Z",
    ]
    assert "group" not in format_stats(Stats()) and "recurrence" not in format_stats(Stats())
