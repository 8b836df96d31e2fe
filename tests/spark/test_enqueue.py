"""Bulk enqueue and snapshot with local Spark against a real broker and `eventq serve`.

One server for the module (its own topics); the tests use their own queue names. The
10,000-row enqueue runs first, so the later tests also see a big state log. Its rows
are 20 of the bulk lane's slices of 500 commands (streams/faust/admission.py): enough
for what it checks of slices and the admission's progress. How fast a big enqueue goes
is bench/spark_bench.py's figure (1,000,000 rows by default).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid

import pytest

from eventq.client.raw import RawClient as Client
from eventq.core import decode_command, state_digest
from eventq.core.batch import read_record, split_record
from eventq.core.partitioner import partition_for_key
from eventq.errors import NotFound
from eventq.kafka.logreader import latest_jobs, read_topic
from eventq.kafka.topics import bulk_name_for
from eventq.limits import MAX_PAYLOAD_BYTES
from eventq.run.replay import derive_from_commands, derive_more
from eventq.spark import cli as spark_cli
from eventq.spark import dataframe_digest, enqueue
from eventq.spark.ids import DEFAULT_NAMESPACE, derive_job_id
from eventq.spark.state_rows import JOB_COLUMNS, job_of_row
from support.spark_helpers import queue_lengths, wait_until

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

ROWS = 10_000


def run(coro):
    return asyncio.run(coro)


def topics(server) -> tuple[str, str]:
    return server.settings["commands-topic"], server.settings["jobs-topic"]


def kafka_flags(server) -> list[str]:
    commands, jobs = topics(server)
    return ["--bootstrap", server.bootstrap, "--commands-topic", commands, "--jobs-topic", jobs,
            "--app-id", server.settings["app-id"]]  # --wait follows the server's admission


def new_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


async def _digest(port: int) -> str:
    async with await Client.connect(port=port) as c:
        return await c.digest()


def server_digest(server):
    return _digest(server.port)


def commands_written(server) -> int:
    """Commands in the command log (a batch record holds many)."""
    return sum(
        len(split_record(record.value))
        for record in read_topic(server.bootstrap, topics(server)[0])
    )


def expected_job(i: int) -> dict:
    """What row i of the generated input must become (see generated_orders)."""
    return {
        "payload": f"order-{i}-{hashlib.sha256(str(i).encode()).hexdigest()}".encode(),
        "priority": i % 11 - 5,
        "ttr_ms": 1000 + i % 1000,
        "ttl_ms": 3_600_000 + i,
        "max_attempts": i % 4,
        "max_fails": i % 3,
    }


def generated_orders(spark, path: str, rows: int) -> None:
    from pyspark.sql import functions as F

    i = F.col("id")
    spark.range(rows).select(
        i.alias("order_id"),
        F.concat(F.lit("order-"), i.cast("string"), F.lit("-"),
                 F.sha2(i.cast("string"), 256)).alias("body"),
        (i % 11 - 5).cast("int").alias("prio"),
        (1000 + i % 1000).alias("ttr"),
        (3_600_000 + i).alias("ttl"),
        (i % 4).cast("int").alias("attempts"),
        (i % 3).cast("int").alias("fails"),
    ).write.mode("overwrite").parquet(path)


ORDER_COLUMNS = dict(
    key_columns=["order_id"], payload_column="body", priority_column="prio",
    ttr_column="ttr", ttl_column="ttl", max_attempts_column="attempts",
    max_fails_column="fails",
)
ORDER_FLAGS = [
    "--key-columns", "order_id", "--payload-column", "body", "--priority-column", "prio",
    "--ttr-column", "ttr", "--ttl-column", "ttl", "--max-attempts-column", "attempts",
    "--max-fails-column", "fails",
]


@pytest.mark.timeout(900)
def test_enqueue_10k_rows_every_job_matches_its_row_and_a_rerun_adds_nothing(
    spark, server, tmp_path, capsys
):
    name = new_name("orders")
    commands_topic, jobs_topic = topics(server)
    data = str(tmp_path / "orders.parquet")
    began = time.monotonic()

    def phase(what: str) -> None:  # shown with a failure: where the time went
        print(f"{time.monotonic() - began:7.1f}s {what}", flush=True)

    generated_orders(spark, data, ROWS)
    phase("input written")

    bulk_topic = bulk_name_for(commands_topic)  # the bulk lane, as the CLI's default
    report = enqueue(
        spark.read.parquet(data), bootstrap=server.bootstrap, topic=bulk_topic,
        name=name, rejects=str(tmp_path / "rejects1"), **ORDER_COLUMNS,
    )
    assert (report.rows, report.sent, report.rejected) == (ROWS, ROWS, 0)
    assert report.partitions == server.partitions
    phase(report.summary())

    async def after_first_run() -> str:
        async with await Client.connect(port=server.port) as c:
            async def all_ready():
                return (await queue_lengths(c, name))["ready-len"] == ROWS
            await wait_until(all_ready, 300, f"{ROWS} ready jobs in {name}")
            for i in list(range(0, ROWS, ROWS // 20)) + [ROWS - 1]:  # a sample, by the gateway
                job_id = derive_job_id(DEFAULT_NAMESPACE, name, [str(i)])
                shown = await c.inspect_job(job_id)
                want = expected_job(i)
                assert shown["name"] == name.encode()
                assert shown["payload"] == want["payload"]
                assert int(shown["priority"]) == want["priority"]
                assert int(shown["ttr"]) == want["ttr_ms"]
                assert int(shown["ttl"]) == want["ttl_ms"]
                assert int(shown["max-attempts"]) == want["max_attempts"]
                assert int(shown["max-fails"]) == want["max_fails"]
                assert int(shown["state"]) == 0
            return await c.digest()

    digest_before = run(after_first_run())
    phase("all applied; sample checked through the gateway")

    # Every reader of the command log reads Spark's batch records: the replay from the
    # commands (eventq replay --from-commands) folds the state the server has ...
    derived = derive_from_commands(server.bootstrap, commands_topic)
    deadline = time.monotonic() + 60  # (timers may still expire earlier tests' jobs)
    while state_digest(derived.jobs.values()) != run(server_digest(server)):
        assert time.monotonic() < deadline, "replay --from-commands disagrees with the server"
        time.sleep(1)
        derive_more(server.bootstrap, commands_topic, derived)
    # ... and Spark's own fold of the log (eventq spark stats) sees every add.
    from pyspark.sql import functions as F

    from eventq.spark.stats import outcomes

    added = outcomes(spark, server.bootstrap, commands_topic).where(
        (F.col("queue") == name) & (F.col("event") == "added")
    ).count()
    assert added == ROWS
    phase("replay --from-commands and spark stats read the batch records")

    # every job, from the state log
    jobs, bad = latest_jobs(server.bootstrap, jobs_topic)
    assert bad.count == 0
    mine = {job.id: job for job in jobs.values() if job.name == name}
    assert len(mine) == ROWS
    for i in range(ROWS):
        job = mine[derive_job_id(DEFAULT_NAMESPACE, name, [str(i)])]
        want = expected_job(i)
        assert (job.payload, job.priority, job.ttr_ms, job.ttl_ms, job.max_attempts,
                job.max_fails, job.state.name, job.scheduled_ms, job.attempts) == (
            want["payload"], want["priority"], want["ttr_ms"], want["ttl_ms"],
            want["max_attempts"], want["max_fails"], "NEW", None, 0,
        ), i
        assert job.expires_ms == job.created_ms + want["ttl_ms"]
    phase("every job checked in the state log")

    # the same enqueue again, through the CLI with --wait: the same ids, refused as
    # duplicates, and the CLI returns only once the server has applied every row
    written = commands_written(server)
    capsys.readouterr()
    code = spark_cli.main([
        "spark", "enqueue", "--input", data, "--format", "parquet", "--name", name,
        *ORDER_FLAGS, "--rejects", str(tmp_path / "rejects2"), *kafka_flags(server), "--wait",
    ])
    captured = capsys.readouterr()
    out = captured.out
    assert code == 0, out + captured.err
    assert f"read {ROWS:,} rows, sent {ROWS:,} commands" in out and "rejected 0" in out
    assert f"applied: all {ROWS:,} rows are live" in out
    # The progress bar of the admission counts rows, not bulk records.
    assert f"{ROWS:,}/{ROWS:,} rows" in captured.err, captured.err
    phase("re-run sent and applied (--wait)")
    assert commands_written(server) == written + ROWS  # admitted into the command log

    async def after_second_run() -> tuple[int, str]:
        async with await Client.connect(port=server.port) as c:  # no waiting here
            return (await c.inspect_queue(name))["ready-len"], await c.digest()

    ready, digest_after = run(after_second_run())
    assert ready == ROWS
    assert digest_after == digest_before


def test_every_record_spark_wrote_is_in_the_partition_murmur2_gives_its_key(spark, server):
    from pyspark.sql import functions as F

    name = new_name("partitions")
    commands_topic, _ = topics(server)
    df = spark.range(5000).select(F.col("id").alias("k"), F.col("id").cast("string").alias("p"))
    report = enqueue(df, bootstrap=server.bootstrap, topic=commands_topic, name=name,
                     key_columns=["k"], payload_column="p", ttr_ms=1000, ttl_ms=600_000)
    assert report.sent == 5000
    partitions, mine, used, batches = server.partitions, 0, set(), 0
    for record in read_topic(server.bootstrap, commands_topic):  # and all earlier tests'
        source, items = read_record(record.value)
        # A batch record has no key, nor has a slice the bulk lane admitted (of the 10k
        # test, however few commands it holds); a single command keeps its job's.
        assert (record.key is None) == (source is not None or len(items) > 1), record
        batches += len(items) > 1
        for data in items:
            decoded = decode_command(data)
            key = str(decoded.command.job_id).encode()
            assert record.partition == partition_for_key(key, partitions), record
            assert record.key in (None, key)
            if getattr(decoded.command, "name", None) == name:
                assert decoded.node is None and decoded.request_id is None  # no correlation
                mine += 1
                used.add(record.partition)
    assert mine == 5000 and used == set(range(partitions))
    assert batches >= partitions  # the pipeline's jobs travel in batch records


def test_rejected_rows_are_reported_with_reasons_and_never_sent(spark, server, tmp_path):
    name = new_name("rejects")
    good = [uuid.uuid4() for _ in range(2)]
    refused = {  # job id -> (row, expected reject field)
        uuid.uuid4(): ((name[:-1] + " !", "p", 1000, 60_000, 0), "name"),
        uuid.uuid4(): ((name, "x" * (MAX_PAYLOAD_BYTES + 1), 1000, 60_000, 0), "payload"),
        uuid.uuid4(): ((name, "p", 0, 60_000, 0), "ttr"),
        uuid.uuid4(): ((name, "p", 1000, 0, 0), "ttl"),
        uuid.uuid4(): ((name, "p", 1000, 60_000, 2**31), "priority"),
    }
    rows = [(str(g), name, f"good-{i}", 1000, 600_000, 1) for i, g in enumerate(good)]
    rows += [(str(job_id), *cells) for job_id, (cells, _) in refused.items()]
    rows += [
        ("not-a-uuid", name, "p", 1000, 60_000, 0),
        ("6ba7b810-9dad-11d1-80b4-00c04fd430c4", name, "p", 1000, 60_000, 0),  # version 1
    ]
    df = spark.createDataFrame(
        rows, "job string, queue string, body string, ttr long, ttl long, prio long"
    )
    before = commands_written(server)
    report = enqueue(
        df, bootstrap=server.bootstrap, topic=topics(server)[0], name_column="queue",
        id_column="job", payload_column="body", ttr_column="ttr", ttl_column="ttl",
        priority_column="prio", rejects=str(tmp_path / "rejects"), rejects_format="json",
    )
    assert (report.rows, report.sent, report.rejected) == (len(rows), 2, len(rows) - 2)
    assert report.rejected_by_field == {"name": 1, "payload": 1, "ttr": 1, "ttl": 1,
                                        "priority": 1, "id": 2}
    assert "rejected rows by field" in report.summary()
    assert commands_written(server) == before + 2  # nothing of the rejects

    rejects = {r["job"]: r for r in spark.read.json(str(tmp_path / "rejects")).collect()}
    assert len(rejects) == len(rows) - 2
    for job_id, (cells, field) in refused.items():
        r = rejects[str(job_id)]
        assert r["reject_field"] == field and r["reject_reason"]
        assert r["job_id"] == str(job_id)
        assert (r["queue"], r["ttr"], r["ttl"]) == (cells[0], cells[2], cells[3])
    assert "Invalid ID" in rejects["not-a-uuid"]["reject_reason"]
    assert "Invalid TTR, got '0'" == rejects[str(next(
        j for j, (_, f) in refused.items() if f == "ttr"))]["reject_reason"]

    # The jobs in the topic, whatever records hold them (two good rows of one partition
    # share a batch record, which has no key: reading keys was a 1-in-4 flake).
    sent = {decode_command(data).command.job_id
            for r in read_topic(server.bootstrap, topics(server)[0])
            for data in split_record(r.value)}
    assert set(good) <= sent
    assert not sent & set(refused)


def test_spark_enqueued_jobs_are_leased_and_completed_through_the_gateway(spark, server):
    from datetime import datetime, timedelta, timezone

    name = new_name("work")
    ids = [uuid.uuid4() for _ in range(5)]
    past = datetime.now(timezone.utc) - timedelta(seconds=5)
    rows = [(str(job_id), f"task-{i}", i, None) for i, job_id in enumerate(ids[:4])]
    rows.append((str(ids[4]), "scheduled", 10, past))  # a schedule already due
    df = spark.createDataFrame(rows, "id string, body string, prio int, at timestamp")
    report = enqueue(
        df, bootstrap=server.bootstrap, topic=topics(server)[0], name=name, id_column="id",
        payload_column="body", priority_column="prio", time_column="at",
        ttr_ms=30_000, ttl_ms=600_000,
    )
    assert report.sent == 5

    async def scenario():
        async with await Client.connect(port=server.port) as c:
            async def all_ready():  # in the log is not yet applied: wait, then lease in order
                return (await queue_lengths(c, name))["ready-len"] == 5

            await wait_until(all_ready, 60, "the 5 jobs to be applied")
            leased = [await c.lease(name, 1000) for _ in range(5)]
            # priority first: the scheduled job (10), then 3, 2, 1, 0
            assert [j.payload for j in leased] == [
                b"scheduled", b"task-3", b"task-2", b"task-1", b"task-0"]
            assert all(j.ttr_ms == 30_000 and j.name == name for j in leased)
            for job in leased:
                await c.complete(job.id, b"done " + job.payload)
            for job in leased:
                result = await c.result(job.id, 0)
                assert result.success and result.result == b"done " + job.payload
            assert (await c.inspect_queue(name))["ready-len"] == 0

    run(scenario())


@pytest.mark.timeout(600)
def test_snapshot_digest_equals_the_servers_after_a_mixed_workload(
    spark, server, tmp_path, capsys
):
    name = new_name("mixed")
    _, jobs_topic = topics(server)

    async def workload() -> list[uuid.UUID]:
        async with await Client.connect(port=server.port) as c:
            ids = [uuid.uuid4() for _ in range(20)]
            for i, job_id in enumerate(ids):
                await c.add(job_id, name, 300_000, 600_000, b"job %d" % i, priority=i % 3,
                            max_fails=2 if i == 5 else None)
            # lease order: priority 2 (jobs 2, 5, 8, 11, 14, 17), then 1 (jobs 1, 4)
            leased = {(await c.lease(name, 1000)).payload: None for _ in range(8)}
            assert set(leased) == {b"job %d" % i for i in (2, 5, 8, 11, 14, 17, 1, 4)}
            await c.complete(ids[2], b"ok 2")
            await c.complete(ids[8], b"ok 8")
            await c.fail(ids[11], b"failed for good")  # max-fails 0: FAILED
            await c.fail(ids[5], b"retry")  # max-fails 2: PENDING again
            await c.delete(ids[2])  # a completed job
            await c.delete(ids[14])  # a leased job
            await c.delete(ids[19])  # a new job
            await c.schedule(uuid.uuid4(), name, 1000, 600_000, datetime_utc(60), b"later")
            short = [uuid.uuid4() for _ in range(4)]
            for job_id in short:  # they expire
                await c.add(job_id, name + "-short", 5000, 1500, b"short-lived")
            first = await c.lease(name + "-short", 1000)
            await c.complete(first.id, b"done before expiry")

            async def all_expired():
                for job_id in short:
                    try:
                        await c.inspect_job(job_id)
                        return False
                    except NotFound:
                        pass
                return True

            await wait_until(all_expired, 60, "the short-TTL jobs to expire")
            return short

    expired = run(workload())

    async def server_digest() -> str:
        async with await Client.connect(port=server.port) as c:
            return await c.digest()

    # The state log is written as the processor applies; let it catch up with the server.
    deadline = time.monotonic() + 60
    while True:
        digest = run(server_digest())
        logged, bad = latest_jobs(server.bootstrap, jobs_topic)
        if state_digest(logged.values()) == digest or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert bad.count == 0
    assert state_digest(logged.values()) == digest
    assert not any(job_id in logged for job_id in expired)

    output = str(tmp_path / "snapshot")
    capsys.readouterr()
    code = spark_cli.main(["spark", "snapshot", "--output", output, *kafka_flags(server)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"digest {digest}" in out, out
    assert f"{len(logged):,} jobs" in out

    snapshot = spark.read.parquet(output)
    assert dataframe_digest(snapshot) == digest
    assert snapshot.columns == list(JOB_COLUMNS)
    mine = {r["id"]: job_of_row(r.asDict()) for r in snapshot.where(
        snapshot.name.startswith(name)).collect()}
    assert mine == {str(j.id): j for j in logged.values() if j.name.startswith(name)}
    states = {job.state.name for job in mine.values()}
    assert {"NEW", "LEASED", "COMPLETED", "FAILED", "PENDING"} <= states


def datetime_utc(seconds_from_now: float) -> str:
    from datetime import datetime, timedelta, timezone

    moment = datetime.now(timezone.utc) + timedelta(seconds=seconds_from_now)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def test_cli_enqueues_a_csv_file_with_adds_schedules_and_rejects(spark, server, tmp_path, capsys):
    name = new_name("csv")
    now, later, bad = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    csv = tmp_path / "jobs.csv"
    csv.write_text(
        "id,body,ttr,when\n"
        f"{now},right away,1000,\n"
        f"{later},\"in an hour, please\",1000,{datetime_utc(3600)}\n"
        f"{bad},never,soon,\n"
    )
    code = spark_cli.main([
        "spark", "enqueue", "--input", str(csv), "--format", "csv", "--name", name,
        "--id-column", "id", "--payload-column", "body", "--ttr-column", "ttr",
        "--ttl-ms", "86400000", "--time-column", "when", "--rejects", str(tmp_path / "rej"),
        "--rejects-format", "json", *kafka_flags(server),
    ])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "read 3 rows, sent 2 commands" in out and "rejected 1 in" in out
    assert "rejected rows by field: 1 ttr" in out
    [reject] = spark.read.json(str(tmp_path / "rej")).collect()
    assert (reject["id"], reject["reject_reason"]) == (str(bad), "Invalid TTR, got 'soon'")

    async def check():
        async with await Client.connect(port=server.port) as c:
            async def both_applied():
                return (await queue_lengths(c, name)) == {"ready-len": 1, "scheduled-len": 1}
            await wait_until(both_applied, 30, "one ready and one scheduled job")
            assert (await c.inspect_job(now))["payload"] == b"right away"
            assert (await c.inspect_job(later))["payload"] == b"in an hour, please"

    run(check())


def test_cli_says_what_to_do_when_the_topic_is_missing(spark, server, tmp_path, capsys):
    code = spark_cli.main([
        "spark", "snapshot", "--output", str(tmp_path / "out"),
        "--bootstrap", server.bootstrap, "--jobs-topic", "no-such-topic",
    ])
    assert code == 1
    err = capsys.readouterr().err
    assert "topic no-such-topic does not exist" in err and "eventq topics create" in err


@pytest.mark.timeout(600)
def test_max_size_payload_row_then_max_size_result_through_snapshot(spark, server, tmp_path):
    """A row with a 1 MiB payload is enqueued, leased, completed with a 1 MiB result,
    and the snapshot holds both (its state record is over 2 MiB: docs/architecture.md,
    "Limits")."""
    from eventq.spark import snapshot

    name = new_name("big")
    job_id = uuid.uuid4()
    body = "\u00e9" * (MAX_PAYLOAD_BYTES // 2)  # 1 MiB once UTF-8 encoded
    df = spark.createDataFrame([(str(job_id), body)], "id string, body string")
    report = enqueue(
        df, bootstrap=server.bootstrap, topic=topics(server)[0], name=name,
        id_column="id", payload_column="body", ttr_ms=60_000, ttl_ms=600_000,
    )
    assert (report.sent, report.rejected) == (1, 0)
    result = b"\xff" * MAX_PAYLOAD_BYTES

    async def scenario() -> str:
        async with await Client.connect(port=server.port) as c:
            async def ready():
                return (await queue_lengths(c, name))["ready-len"] == 1

            await wait_until(ready, 60, "the 1 MiB job to be applied")
            leased = await c.lease(name, 1000)
            assert leased.id == job_id and leased.payload == body.encode()
            await c.complete(job_id, result)
            return await c.digest()

    digest = run(scenario())
    deadline = time.monotonic() + 60
    while True:
        report = snapshot(spark, bootstrap=server.bootstrap, topic=topics(server)[1],
                          output=str(tmp_path / "snap"))
        if report.digest == digest or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert report.digest == digest
    row = spark.read.parquet(str(tmp_path / "snap")).where(f"id = '{job_id}'").collect()[0]
    assert bytes(row["payload"]) == body.encode() and bytes(row["result"]) == result
