"""Workflows (docs/workflows.md, "Dependencies" and "Inputs") through Spark, against a
real broker and `eventq serve`: a DAG enqueued from one DataFrame (jobs and their edges)
runs in edge order and a re-run of the load adds nothing; malformed upstream lists are
rejects with their reason; the state log's readers (snapshot, its edges, stats) know
WAITING and the edges, while the records kept beside the jobs stay out of the job rows.

One server for the module; the tests use their own queue names.
"""

from __future__ import annotations

import asyncio
import re
import shlex
import time
import uuid
from pathlib import Path

import pytest

from eventq.client import Client
from eventq.client.raw import RawClient
from eventq.core import Depend, decode_command, state_digest
from eventq.core.batch import split_record
from eventq.core.workflow import INPUT_KEY_PREFIX, REGISTRATION_KEY_PREFIX
from eventq.kafka.logreader import latest_jobs, latest_state, read_topic
from eventq.kafka.topics import bulk_name_for
from eventq.spark import cli as spark_cli
from eventq.spark import compute_stats, dag_edges, enqueue, format_stats, snapshot
from eventq.spark.ids import DEFAULT_NAMESPACE, derive_job_id
from support.spark_helpers import wait_applied, wait_until

pytestmark = [pytest.mark.spark, pytest.mark.kafka]

TTL_MS = 3_600_000
# The diamond and its tail: step -> the steps it waits for (None: a root, as a null cell).
DAG = {1: [], 2: [1], 3: [1], 4: [2, 3], 5: [4], 6: None}


def new_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def commands_topic(server) -> str:
    return server.settings["commands-topic"]


def jobs_topic(server) -> str:
    return server.settings["jobs-topic"]


def kafka_flags(server) -> list[str]:
    return ["--bootstrap", server.bootstrap, "--commands-topic", commands_topic(server),
            "--jobs-topic", jobs_topic(server), "--app-id", server.settings["app-id"]]


def logged_commands(server):
    """Every command of the command log, decoded (a batch record or slice holds many)."""
    for record in read_topic(server.bootstrap, commands_topic(server)):
        for data in split_record(record.value):
            yield decode_command(data).command


def step_id(name: str, step: int) -> uuid.UUID:
    return derive_job_id(DEFAULT_NAMESPACE, name, [str(step)])


def dag_frame(spark):
    rows = [(step, f"step {step}", needs) for step, needs in DAG.items()]
    return spark.createDataFrame(rows, "step int, label string, needs array<int>")


def enqueue_dag(spark, server, name: str):
    """The DAG through the bulk lane, as `eventq spark enqueue` sends it."""
    return enqueue(
        dag_frame(spark), bootstrap=server.bootstrap,
        topic=bulk_name_for(commands_topic(server)), name=name, key_columns=["step"],
        after_keys_column="needs", payload_column="label", ttr_ms=60_000, ttl_ms=TTL_MS,
    )


def wait_admitted_and_applied(server, name: str, adds: int) -> None:
    """Until the command log holds ``adds`` adds of queue ``name`` (the bulk lane admits
    them a slice at a time) and the server has applied everything before them."""

    def admitted() -> bool:
        return sum(getattr(c, "name", None) == name for c in logged_commands(server)) >= adds

    deadline = time.monotonic() + 120
    while not admitted():
        assert time.monotonic() < deadline, f"{adds} adds of {name} never admitted"
        time.sleep(0.5)

    async def applied() -> None:
        async with await RawClient.connect(port=server.port) as c:
            await wait_applied(c, server.partitions)

    asyncio.run(applied())


def state_log_caught_up(server, client: Client, timeout_s: float = 60) -> None:
    """The state log is written as the processor applies (committed about once a second):
    wait until it holds the server's state."""
    deadline = time.monotonic() + timeout_s
    while True:
        # Jobs and the inputs beside them, as the server's digest covers both.
        if latest_state(server.bootstrap, jobs_topic(server)).digest() == client.digest():
            return
        assert time.monotonic() < deadline, "the state log never caught up with the server"
        time.sleep(0.5)


def test_a_dag_from_a_dataframe_runs_in_edge_order_and_a_rerun_adds_nothing(spark, server):
    name = new_name("dag")
    ids = {step: step_id(name, step) for step in DAG}
    steps = {job_id: step for step, job_id in ids.items()}
    report = enqueue_dag(spark, server, name)
    assert (report.rows, report.sent, report.rejected) == (len(DAG), len(DAG), 0)
    wait_admitted_and_applied(server, name, len(DAG))

    with Client(port=server.port) as client:
        queue = client.inspect_queue(name)
        assert (queue.ready, queue.waiting) == (2, 4)  # steps 1 and 6; 2, 3, 4, 5
        joined = client.inspect_job(ids[4])
        assert (joined.state, joined.after, joined.waiting) == ("waiting", 2, 2)
        digest = client.digest()
    depends = [c for c in logged_commands(server)
               if isinstance(c, Depend) and c.dependent in steps]
    assert sorted((steps[c.upstream], steps[c.dependent]) for c in depends) == [
        (1, 2), (1, 3), (2, 4), (3, 4), (4, 5)]  # one registration per edge

    # The same load again, while every dependent still waits: the same ids, refused as
    # duplicates, and a refused add registers with no upstream.
    again = enqueue_dag(spark, server, name)
    assert again.sent == len(DAG)
    wait_admitted_and_applied(server, name, 2 * len(DAG))
    with Client(port=server.port) as client:
        assert client.digest() == digest
    assert sum(isinstance(c, Depend) and c.dependent in steps
               for c in logged_commands(server)) == len(depends)

    with Client(port=server.port) as client:
        order = []
        while len(order) < len(DAG):
            job = client.lease(name, wait_timeout_ms=20_000)
            order.append(steps[job.id])
            client.complete(job.id, f"done {steps[job.id]}")
        for step, needs in DAG.items():
            assert all(order.index(up) < order.index(step) for up in needs or []), order
        assert [(r.id, r.ok, r.data) for r in client.inputs(ids[4])] == [
            (ids[2], True, b"done 2"), (ids[3], True, b"done 3")]
        assert all(client.inspect_job(job_id).attempts == 1 for job_id in ids.values())


def test_malformed_upstream_lists_in_a_csv_file_are_rejects_with_their_reason(
    spark, server, tmp_path, capsys
):
    """-after's rules (docs/workflows.md, "Values and checks") on the text a CSV cell
    holds: ids in any spelling with `,` between them, an empty cell for none."""
    name = new_name("csv-dag")
    root, dependent = uuid.uuid4(), uuid.uuid4()
    bad = {uuid.uuid4(): reason for reason in (
        "upstream 2 is not a version-4 UUID", "upstream 2 is empty",
        "upstream 2 is the job itself", "101 upstreams, at most 100",
        "upstream 2 repeats upstream 1")}
    bad_ids = list(bad)
    lists = [f"{root},nope", f"{root},,{dependent}", f"{root},{bad_ids[2]}",
             ",".join(str(uuid.uuid4()) for _ in range(101)),
             f"{root},{{{str(root).upper()}}}"]
    csv = tmp_path / "dag.csv"
    csv.write_text(
        "id,body,needs\n"
        f"{root},root,\n"
        f'{dependent},dependent,"{{{root}}},urn:uuid:{bad_ids[0].hex}"\n'
        + "".join(f'{job_id},bad,"{needs}"\n' for job_id, needs in zip(bad_ids, lists))
    )
    code = spark_cli.main([
        "spark", "enqueue", "--input", str(csv), "--format", "csv", "--name", name,
        "--id-column", "id", "--payload-column", "body", "--after-column", "needs",
        "--ttr-ms", "60000", "--ttl-ms", str(TTL_MS), "--rejects", str(tmp_path / "rej"),
        "--rejects-format", "json", *kafka_flags(server),
    ])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "read 7 rows, sent 2 commands" in out and "rejected 5 in" in out
    assert "rejected rows by field: 5 after" in out
    rejects = {r["id"]: r for r in spark.read.json(str(tmp_path / "rej")).collect()}
    assert set(rejects) == {str(job_id) for job_id in bad}
    for job_id, reason in bad.items():
        got = rejects[str(job_id)]
        assert got["reject_field"] == "after" and got["job_id"] == str(job_id)
        assert got["reject_reason"].startswith(f"Invalid After ({reason}), got "), got

    with Client(port=server.port) as client:
        def both_applied() -> bool:
            return client.inspect_queue(name).waiting == 1 if _known(client, name) else False

        wait_for(both_applied, 60, "the root and its dependent")
        waiting = client.inspect_job(dependent)
        assert (waiting.state, waiting.after, waiting.waiting) == ("waiting", 2, 2)
        assert client.inspect_job(root).after == 0


def _known(client: Client, name: str) -> bool:
    from eventq.client.errors import NotFound

    try:
        client.inspect_queue(name)
        return True
    except NotFound:
        return False


def wait_for(predicate, timeout_s: float, what: str):
    async def check():
        return predicate()

    return asyncio.run(wait_until(check, timeout_s, what))


def test_snapshot_stats_and_edges_know_waiting_and_the_side_records_stay_out(
    spark, server, tmp_path
):
    """Midway through the DAG (step 1 done: 2 and 3 released, 4 and 5 waiting) the
    changelog holds registrations and inputs beside the jobs (keys under 0x00); the
    snapshot has exactly the jobs, each dependent with its upstreams and how many it
    still waits for, its digest is the server's, the edges carry each upstream's latest
    outcome, and stats count the waiting jobs by name."""
    name = new_name("midway")
    ids = {step: step_id(name, step) for step in DAG}
    enqueue_dag(spark, server, name)
    wait_admitted_and_applied(server, name, len(DAG))
    with Client(port=server.port) as client:
        first = client.lease(name, wait_timeout_ms=20_000)
        while first.id != ids[1]:  # step 6, the other root, may come first: leave it
            first = client.lease(name, wait_timeout_ms=20_000)
        client.complete(ids[1], "done 1")
        wait_for(lambda: client.inspect_queue(name).waiting == 2, 30, "2 and 3 released")
        state_log_caught_up(server, client)
        digest = client.digest()

    side = [r.key for r in read_topic(server.bootstrap, jobs_topic(server))
            if r.key is not None and r.key.startswith(b"\x00")]
    assert any(key.startswith(REGISTRATION_KEY_PREFIX) for key in side)
    assert any(key.startswith(INPUT_KEY_PREFIX) for key in side)
    logged, bad = latest_jobs(server.bootstrap, jobs_topic(server))
    assert bad.count == 0

    report = snapshot(spark, bootstrap=server.bootstrap, topic=jobs_topic(server),
                      output=str(tmp_path / "jobs"), edges_output=str(tmp_path / "edges"))
    assert report.undecodable == 0 and report.jobs == len(logged)
    assert report.digest == digest
    assert digest != state_digest(logged.values())  # the inputs count, in both
    jobs = spark.read.parquet(str(tmp_path / "jobs"))
    assert jobs.where("id is null or length(id) != 36").count() == 0
    assert {r["id"] for r in jobs.select("id").collect()} == {str(j) for j in logged}
    mine = {r["id"]: r for r in jobs.where(jobs.name == name).collect()}
    shown = {step: (mine[str(job_id)]["state_name"], mine[str(job_id)]["after"],
                    mine[str(job_id)]["waiting"]) for step, job_id in ids.items()}
    assert shown.pop(6) in {("new", None, None), ("leased", None, None)}  # the other root
    assert shown == {
        1: ("completed", None, None), 2: ("new", [str(ids[1])], 0),
        3: ("new", [str(ids[1])], 0), 4: ("waiting", [str(ids[2]), str(ids[3])], 2),
        5: ("waiting", [str(ids[4])], 1)}
    assert report.jobs_by_state.get("waiting", 0) >= 2
    assert "waiting" in report.summary() and "edges to" in report.summary()

    edges = spark.read.parquet(str(tmp_path / "edges")).where(f"name = '{name}'")
    steps = {str(job_id): step for step, job_id in ids.items()}
    assert sorted((steps[r["upstream"]], steps[r["dependent"]], r["position"], r["outcome"])
                  for r in edges.collect()) == [
        (1, 2, 1, "completed"), (1, 3, 1, "completed"), (2, 4, 1, "unfinished"),
        (3, 4, 2, "unfinished"), (4, 5, 1, "unfinished")]
    assert sorted(dag_edges(jobs).where(f"name = '{name}'").collect()) == sorted(
        edges.collect())  # the same from the snapshot's parquet

    stats = compute_stats(spark, bootstrap=server.bootstrap,
                          commands_topic=commands_topic(server), jobs_topic=jobs_topic(server),
                          queue=name)
    assert {(r["state"], r["count"]) for r in stats.states if r["state"] == "waiting"} == {
        ("waiting", 2)}
    accepted = {r["event"]: r["count"] for r in stats.events if r["outcome"] == "accepted"}
    assert accepted["released"] == 2 and accepted["added"] == len(DAG)
    assert "waiting 2" in format_stats(stats)


def test_upstream_keys_as_structs_may_name_an_upstream_in_another_queue(spark, server):
    """With --name-column, a struct of an upstream's key may carry its queue in a field
    of that name (the id derives from queue and key); without it, the dependent's."""
    extract, load = new_name("extract"), new_name("load")
    rows = [("a", extract, []), ("b", load, [("a", extract)]), ("c", load, [("b", None)])]
    df = spark.createDataFrame(
        rows, "k string, queue string, needs array<struct<k: string, queue: string>>")
    report = enqueue(df, bootstrap=server.bootstrap, topic=commands_topic(server),
                     name_column="queue", key_columns=["k"], after_keys_column="needs",
                     payload_column="k", ttr_ms=60_000, ttl_ms=TTL_MS)
    assert (report.sent, report.rejected) == (3, 0)
    a, b, c = (derive_job_id(DEFAULT_NAMESPACE, queue, [k]) for k, queue, _ in rows)
    with Client(port=server.port) as client:
        wait_for(lambda: _known(client, load) and client.inspect_queue(load).waiting == 2,
                 60, "b and c waiting")
        for queue, job_id in ((extract, a), (load, b), (load, c)):
            job = client.lease(queue, wait_timeout_ms=20_000)
            assert job.id == job_id
            client.complete(job_id, b"from " + job.payload)
        assert [(r.id, r.data) for r in client.inputs(c)] == [(b, b"from b")]
        assert [(r.id, r.data) for r in client.inputs(b)] == [(a, b"from a")]


@pytest.mark.parametrize("ddl, key_columns, problem", [
    ("needs array<map<string, string>>", ["k"], "give each row's upstream keys as an array"),
    ("needs array<struct<x: string>>", ["k"], "its structs lack the key columns 'k'"),
    ("needs string", ["k", "queue"], "as an array of structs with the key columns"),
    ("needs int", ["k"], "give each row's upstream keys as an array of values"),
])
def test_an_after_keys_column_of_no_usable_type_is_refused_before_anything_is_sent(
    spark, ddl, key_columns, problem
):
    df = spark.createDataFrame([], f"k string, queue string, {ddl}")
    with pytest.raises(ValueError, match=problem):
        enqueue(df, bootstrap="127.0.0.1:1", name="q", key_columns=key_columns,
                after_keys_column="needs", ttr_ms=1000, ttl_ms=1000)


def test_an_after_column_must_be_text_or_an_array_of_text_and_keys_need_key_columns(spark):
    df = spark.createDataFrame([], "id string, needs array<int>, k string")
    with pytest.raises(ValueError, match="after column 'needs' is array<int>"):
        enqueue(df, bootstrap="127.0.0.1:1", name="q", id_column="id",
                after_column="needs", ttr_ms=1000, ttl_ms=1000)
    with pytest.raises(ValueError, match="it needs key_columns"):
        enqueue(df, bootstrap="127.0.0.1:1", name="q", id_column="id",
                after_keys_column="needs", ttr_ms=1000, ttl_ms=1000)
    with pytest.raises(ValueError, match="not both"):
        enqueue(df, bootstrap="127.0.0.1:1", name="q", key_columns=["k"],
                after_column="needs", after_keys_column="needs", ttr_ms=1000, ttl_ms=1000)


def doc_dag_commands() -> list[list[str]]:
    """The Spark DAG block of docs/spark.md, "Workflows from Spark", as argument lists
    (continuation lines joined, comments dropped)."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "spark.md").read_text()
    [block] = [b for b in re.findall(r"```sh\n(.*?)```", doc, flags=re.S)
               if "--after-keys-column" in b]
    joined = block.replace("\\\n", " ")
    return [shlex.split(line, comments=True) for line in joined.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def test_the_docs_spark_dag_runs_as_written(spark, server, tmp_path, capsys):
    """The `spark enqueue --after-keys-column` and `snapshot --edges` lines of
    docs/spark.md, "Workflows from Spark", as written but for the server's flags and the
    queue: a steps.parquet whose rows name the steps they need is a DAG, one bad list is a
    reject, and the snapshot writes an edge per link."""
    enqueue_argv, snapshot_argv = doc_dag_commands()
    assert enqueue_argv[:3] == [".venv/bin/eventq", "spark", "enqueue"]
    assert snapshot_argv[:3] == [".venv/bin/eventq", "spark", "snapshot"]
    name = new_name("docs-etl")
    enqueue_argv[enqueue_argv.index("etl")] = name
    # The doc's relative paths, under this test's directory (Spark's JVM keeps the
    # suite's working directory).
    for argv in (enqueue_argv, snapshot_argv):
        for i, word in enumerate(argv):
            if word in ("steps.parquet", "rejects/", "jobs/", "edges/"):
                argv[i] = str(tmp_path / word)
    spark.createDataFrame(
        [(1, "extract", []), (2, "clean", [1]), (3, "enrich", [1]), (4, "publish", [2, 3]),
         (5, "broken", [5])],  # itself: a reject
        "step int, body string, needs array<int>").write.parquet(str(tmp_path / "steps.parquet"))

    code = spark_cli.main([*enqueue_argv[1:], *kafka_flags(server), "--wait"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "read 5 rows, sent 4 commands" in out and "rejected 1 in" in out
    [reject] = spark.read.parquet(str(tmp_path / "rejects")).collect()
    assert reject["reject_field"] == "after"

    with Client(port=server.port) as client:
        assert client.inspect_job(step_id(name, 4)).state == "waiting"
        state_log_caught_up(server, client)
    code = spark_cli.main([*snapshot_argv[1:], *kafka_flags(server)])
    assert code == 0, capsys.readouterr().out
    edges = {(r["upstream"], r["dependent"])
             for r in spark.read.parquet(str(tmp_path / "edges")).collect()
             if r["name"] == name}
    ids = {step: str(step_id(name, step)) for step in range(1, 5)}
    assert edges == {(ids[1], ids[2]), (ids[1], ids[3]), (ids[2], ids[4]), (ids[3], ids[4])}


def test_tags_from_a_column_are_found_by_inspect_tagged_and_read_by_snapshot_and_stats(
    spark, server, tmp_path
):
    """docs/workflows.md, "Tags" through Spark: a tags column (an array here, text in
    a CSV file) gives each job its tags in order, a malformed list is a reject saying
    why and is never sent, ``inspect tagged`` finds the jobs, the snapshot has a
    ``tags`` column and its digest is the server's, and stats count jobs per tag."""
    name = new_name("tagged")
    tag, other = new_name("night"), new_name("etl")
    rows = [(1, [tag]), (2, [other, tag]), (3, None), (4, []), (5, [tag, tag]),
            (6, [tag, "no space"])]
    df = spark.createDataFrame(rows, "k int, labels array<string>")
    report = enqueue(df, bootstrap=server.bootstrap, topic=commands_topic(server), name=name,
                     key_columns=["k"], tags_column="labels", payload_column="k",
                     ttr_ms=60_000, ttl_ms=TTL_MS, rejects=str(tmp_path / "rejects"),
                     rejects_format="json")
    assert (report.sent, report.rejected, report.rejected_by_field) == (4, 2, {"tags": 2})
    reasons = {r["k"]: r["reject_reason"]
               for r in spark.read.json(str(tmp_path / "rejects")).collect()}
    assert reasons[5].startswith("Invalid Tags (tag 2 repeats tag 1), got ")
    assert reasons[6].startswith("Invalid Tags (tag 2 is not 1-64 bytes of [A-Za-z0-9_.-])")
    # text, as a CSV cell holds it; every row's tags as a constant
    csv = tmp_path / "tags.csv"
    csv.write_text(f'k,labels\n7,"{tag},{other}"\n8,\n9,"{tag},,x"\n')
    text = spark.read.option("header", "true").csv(str(csv))
    report = enqueue(text, bootstrap=server.bootstrap, topic=commands_topic(server), name=name,
                     key_columns=["k"], tags_column="labels", payload_column="k",
                     ttr_ms=60_000, ttl_ms=TTL_MS)
    assert (report.sent, report.rejected) == (2, 1)
    report = enqueue(spark.createDataFrame([(10,)], "k int"), bootstrap=server.bootstrap,
                     topic=commands_topic(server), name=name, key_columns=["k"],
                     tags=f"{other}", payload_column="k", ttr_ms=60_000, ttl_ms=TTL_MS)
    assert report.sent == 1
    ids = {k: derive_job_id(DEFAULT_NAMESPACE, name, [str(k)]) for k in range(1, 11)}

    async def listed(tag_: str) -> list[uuid.UUID]:
        async with await RawClient.connect(port=server.port) as c:
            await wait_applied(c, server.partitions)
            blocks = await c._inspect_many(["tagged", tag_, "0", "100"])
        return [uuid.UUID(head.split(" ")[0]) for head, _ in blocks]

    found = asyncio.run(listed(tag))
    assert set(found) == {ids[1], ids[2], ids[7]} and found[-1] == ids[7]  # created order
    assert set(asyncio.run(listed(other))) == {ids[2], ids[7], ids[10]}
    with Client(port=server.port) as client:
        assert client.inspect_job(ids[2]).tags == (other, tag)
        assert client.inspect_job(ids[3]).tags == () and client.inspect_job(ids[4]).tags == ()
        assert client.inspect_job(ids[8]).tags == ()
        state_log_caught_up(server, client)
        digest = client.digest()

    report = snapshot(spark, bootstrap=server.bootstrap, topic=jobs_topic(server),
                      output=str(tmp_path / "jobs"))
    assert report.digest == digest
    jobs = spark.read.parquet(str(tmp_path / "jobs")).where(f"name = '{name}'")
    shown = {r["id"]: r["tags"] for r in jobs.collect()}
    assert shown[str(ids[2])] == [other, tag] and shown[str(ids[7])] == [tag, other]
    assert shown[str(ids[3])] is None and shown[str(ids[10])] == [other]
    stats = compute_stats(spark, bootstrap=server.bootstrap,
                          commands_topic=commands_topic(server), jobs_topic=jobs_topic(server),
                          queue=name)
    assert {(r["tag"], r["state"], r["count"]) for r in stats.tags} == {
        (tag, "new", 3), (other, "new", 3)}
    assert f"tag {tag}  new 3" in format_stats(stats)
