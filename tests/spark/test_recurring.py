"""Failure groups and recurring jobs (docs/workflows.md, "Failure groups and retry" and
"Recurring jobs") through Spark, against a real broker and `eventq serve`: FAILED jobs
with groups (named by a fail, built in, one retried away) are counted per group as
``inspect failed`` counts them; recurrences defined with ``recur`` are the snapshot's
recurrence rows, with the next due time ``inspect recurring`` shows and the digest
untouched; stats count the slots each fired by the command log (the jobs the server added
for them, one by one) and say when the next is due, or that it is gone.

One server for the module (its command log holds only this workload).
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from eventq.client import Client
from eventq.client.errors import NotFound
from eventq.client.raw import RawClient
from eventq.core.codec import decode_recurrence
from eventq.core.recurrence import RECURRENCE_TABLE_PREFIX, recurrence_name_of, slot_job_id
from eventq.kafka.logreader import latest_state, read_topic
from eventq.limits import MAX_EVERY_MS
from eventq.protocol.values import format_time
from eventq.spark import cli as spark_cli
from eventq.spark import compute_stats, format_stats, read_jobs
from eventq.spark.stats import outcomes
from support.spark_helpers import wait_applied, wait_until

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

DAY_MS = 86_400_000


def new_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def kafka_flags(server) -> list[str]:
    return ["--bootstrap", server.bootstrap,
            "--commands-topic", server.settings["commands-topic"],
            "--jobs-topic", server.settings["jobs-topic"], "--app-id", server.settings["app-id"]]


def wait_for(predicate, timeout_s: float, what: str):
    async def check():
        return predicate()

    return asyncio.run(wait_until(check, timeout_s, what))


def ready(client: Client, queue: str) -> int:
    try:
        return client.inspect_queue(queue).ready
    except NotFound:  # nothing added to it yet
        return 0


def all_applied(server) -> None:
    async def applied() -> None:
        async with await RawClient.connect(port=server.port) as c:
            await wait_applied(c, server.partitions)

    asyncio.run(applied())


def logged_recurrences(server) -> dict[str, object]:
    """The state log's newest record of every recurrence (tombstones remove)."""
    newest: dict[bytes, bytes | None] = {}
    for record in read_topic(server.bootstrap, server.settings["jobs-topic"]):
        if record.key is not None and record.key.startswith(RECURRENCE_TABLE_PREFIX):
            newest[record.key] = record.value
    return {recurrence_name_of(key): decode_recurrence(value)
            for key, value in newest.items() if value is not None}


@pytest.fixture(scope="module")
def workload(server):
    """Queue ``work``: two jobs failed into group net-timeout, one failed without a
    group (``failed``), one out of attempts by its TTR (``attempts-exhausted``), one
    completed; in queue ``retried``, one failed into group flaky and retried (not FAILED
    any more).
    Recurrences: ``tick`` every second into ``ticks`` until two slots fired, then
    redefined every 365 days (so it fires no more while the tests read); ``daily``
    every day into ``reports`` (fires no slot here); ``gone`` every second into
    ``gones`` until a slot fired, then unrecurred."""
    names = {k: new_name(k) for k in ("work", "retried", "tick", "ticks", "daily", "reports",
                                      "gone", "gones")}
    with Client(port=server.port) as client:
        work = names["work"]
        client.recur(names["tick"], names["ticks"], b"tick", every_ms=1000)
        client.recur(names["gone"], names["gones"], b"gone", every_ms=1000)
        client.recur(names["daily"], names["reports"], b'{"report": 1}', every_ms=DAY_MS,
                     ttr_ms=120_000, ttl_ms=7 * DAY_MS, priority=5, max_attempts=3,
                     max_fails=2, backoff_ms=1000, tags=("nightly", "finance"))

        for queue, group in ((work, "net-timeout"), (work, "net-timeout"), (work, None),
                             (names["retried"], "flaky")):
            job_id = client.add(queue, b"x", ttr_ms=60_000)
            assert client.lease(queue, wait_timeout_ms=20_000).id == job_id
            client.fail(job_id, b"no", group=group)
        client.retry(job_id)  # the flaky one: ready again
        exhausted = client.add(work, b"x", ttr_ms=1000, max_attempts=1)
        assert client.lease(work, wait_timeout_ms=20_000).id == exhausted
        done = client.add(work, b"x", ttr_ms=60_000)
        assert client.lease(work, wait_timeout_ms=20_000).id == done
        client.complete(done, b"ok")
        wait_for(lambda: client.inspect_job(exhausted).state == "failed", 30,
                 "the job out of attempts to fail")

        wait_for(lambda: ready(client, names["gones"]) >= 1, 30, "gone's first slot")
        client.unrecur(names["gone"])
        wait_for(lambda: ready(client, names["ticks"]) >= 2, 30, "tick's second slot")
        client.recur(names["tick"], names["ticks"], b"tick", every_ms=MAX_EVERY_MS)
    all_applied(server)  # every fire's add, too
    # The state log follows (its changelog is committed about once a second).
    deadline = time.monotonic() + 60
    with Client(port=server.port) as client:
        while True:
            logged = logged_recurrences(server)
            if (latest_state(server.bootstrap, server.settings["jobs-topic"]).digest()
                    == client.digest() and names["gone"] not in logged
                    and getattr(logged.get(names["tick"]), "every_ms", None) == MAX_EVERY_MS):
                break
            assert time.monotonic() < deadline, "the state log never caught up with the server"
            time.sleep(0.5)
    return server, names


def test_snapshot_writes_a_row_per_live_recurrence_with_the_servers_next_due_time(
    spark, workload, tmp_path, capsys
):
    server, names = workload
    jobs, recurring = str(tmp_path / "jobs"), str(tmp_path / "recurrences")
    code = spark_cli.main(["spark", "snapshot", "--output", jobs, "--recurrences", recurring,
                           *kafka_flags(server)])
    out = capsys.readouterr().out
    assert code == 0, out
    with Client(port=server.port) as client:
        digest = client.digest()
        shown = {r.name: r for r in client.recurrences()}
    assert f"digest {digest}" in out  # recurrences are not in it
    assert f"2 recurrences to {recurring}" in out

    rows = {r["name"]: r.asDict() for r in spark.read.parquet(recurring).collect()}
    assert set(rows) == set(shown) == {names["tick"], names["daily"]}
    for name, row in rows.items():
        info = shown[name]
        assert (row["job_name"], row["every_ms"], row["payload"], row["ttr_ms"],
                row["ttl_ms"], row["priority"], row["max_attempts"], row["max_fails"],
                row["backoff_ms"], tuple(row["tags"] or ())) == (
            info.queue, info.every_ms, info.payload, info.ttr_ms, info.ttl_ms, info.priority,
            info.max_attempts, info.max_fails, info.backoff_ms, info.tags)
        assert format_time(row["next_ms"]) == info.next
        assert format_time(row["created_ms"]) == info.created
        assert row["payload_bytes"] == len(info.payload)
        assert row["next_ms"] == row["next_slot"] * row["every_ms"]

    daily = rows[names["daily"]]
    assert daily["fired_ms"] is None and daily["tags"] == ["nightly", "finance"]
    assert daily["next_ms"] == -(-daily["created_ms"] // DAY_MS) * DAY_MS  # the next midnight
    tick = rows[names["tick"]]
    # Redefined every 365 days: its last slot fired (of every second) stays recorded.
    assert tick["fired_ms"] is not None and tick["fired_ms"] % 1000 == 0
    assert tick["fired_slot"] is None and tick["every_ms"] == MAX_EVERY_MS
    assert tick["next_ms"] > tick["fired_ms"]
    ticks = {r["id"] for r in spark.read.parquet(jobs).where(f"name = '{names['ticks']}'")
             .collect()}
    assert str(slot_job_id(names["tick"], 1000, tick["fired_ms"] // 1000)) in ticks


def test_stats_count_failed_jobs_per_group_and_the_slots_each_recurrence_fired(
    spark, workload, tmp_path, capsys
):
    server, names = workload
    output = str(tmp_path / "stats")
    code = spark_cli.main(["spark", "stats", "--output", output, *kafka_flags(server)])
    out = capsys.readouterr().out
    assert code == 0, out

    groups = {r["group"]: r["count"] for r in spark.read.parquet(f"{output}/groups").collect()}
    with Client(port=server.port) as client:
        assert groups == {g.name: g.failed for g in client.inspect_failed()}
        ticks = ready(client, names["ticks"])
        gones = ready(client, names["gones"])
        shown = {r.name: r for r in client.recurrences()}
    assert groups == {"net-timeout": 2, "failed": 1, "attempts-exhausted": 1}
    assert "group net-timeout  failed 2" in out and "group attempts-exhausted  failed 1" in out

    recurrences = {r["recurrence"]: r.asDict()
                   for r in spark.read.parquet(f"{output}/recurrences").collect()}
    assert set(recurrences) == {names["tick"], names["daily"], names["gone"]}
    tick, daily, gone = (recurrences[names[k]] for k in ("tick", "daily", "gone"))
    # Each fire the log accepted added one job: the queue holds them all.
    assert (tick["fired"], gone["fired"], daily["fired"]) == (ticks, gones, 0)
    assert ticks >= 2 and gones >= 1
    assert (tick["queue"], gone["queue"], daily["queue"]) == (
        names["ticks"], names["gones"], names["reports"])
    assert format_time(tick["next_ms"]) == shown[names["tick"]].next
    assert format_time(daily["next_ms"]) == shown[names["daily"]].next
    assert gone["next_ms"] is None and gone["every_ms"] is None
    assert gone["last_fired_ms"] is not None and daily["last_fired_ms"] is None
    assert f"recurrence {names['gone']}  queue {names['gones']}  fired {gones} " in out
    assert "gone (unrecurred)" in out

    # The slots the fold says were fired are the jobs the server added, id for id.
    done = outcomes(spark, server.bootstrap, server.settings["commands-topic"])
    fired = done.where(f"recurrence = '{names['tick']}' AND slot IS NOT NULL").collect()
    expected = {str(slot_job_id(names["tick"], 1000, r["slot"])) for r in fired}
    jobs = read_jobs(spark, server.bootstrap, server.settings["jobs-topic"])
    added = {r["id"] for r in jobs.where(f"name = '{names['ticks']}'").collect()}
    assert added == expected and len(expected) == ticks
    assert max(r["due_ms"] for r in fired) == tick["last_fired_ms"]


def test_stats_of_one_queue_keep_its_groups_and_the_recurrences_adding_to_it(
    spark, workload
):
    server, names = workload
    stats = compute_stats(spark, bootstrap=server.bootstrap,
                          commands_topic=server.settings["commands-topic"],
                          jobs_topic=server.settings["jobs-topic"], queue=names["ticks"])
    assert stats.groups == []
    [tick] = stats.recurrences
    assert (tick["recurrence"], tick["queue"], tick["every_ms"]) == (
        names["tick"], names["ticks"], MAX_EVERY_MS)
    assert tick["fired"] >= 2
    assert f"recurrence {names['tick']}  queue {names['ticks']} every 365.0d  fired " in (
        format_stats(stats))
