"""``eventq import-cmdlog`` against a real broker and a running ``eventq serve``."""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
import uuid

import pytest

from eventq.client.raw import RawClient as Client
from eventq.cmdlog import (
    HEADER,
    WqAdd,
    WqComplete,
    WqFail,
    WqSchedule,
    WqStartAttempt,
    WqTimeoutAttempt,
    encode_record,
)
from eventq.core import State
from eventq.errors import NotFound
from eventq.migrate.cli import register
from eventq.protocol.values import format_time
from eventq.settings import add_arguments
from support.migrate_support import (
    SPEC_ADD,
    SPEC_COMPLETE,
    SPEC_DELETE,
    SPEC_ID,
    SPEC_RECORD_A,
    SPEC_RECORD_TIME_NS,
    commands_end,
    run_cli,
    server_flags,
    spec_add,
    state_jobs,
    with_id,
    write_segment,
)

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]

HOUR_MS = 3_600_000
MS = 1_000_000  # ns


def run(coro):
    return asyncio.run(coro)


async def inspect(server, job_id):
    async with await Client.connect(port=server.port) as c:
        return await c.inspect_job(job_id)


async def result_of(server, job_id):
    async with await Client.connect(port=server.port) as c:
        return await c.result(job_id, 0)


def import_(capsys, server, directory, *extra):
    return run_cli(capsys, "import-cmdlog", directory, "--json", *server_flags(server), *extra)


def now_ns() -> int:
    return time.time_ns()


def add(job_id, name, created_ns, *, ttl_ms=HOUR_MS, ttr_ms=5000, payload=b"p",
        priority=0, max_attempts=0, max_fails=0, time_ns=None):  # fmt: skip
    cls = WqAdd if time_ns is None else WqSchedule
    return cls(job_id, name, ttr_ms, ttl_ms, priority, max_attempts, max_fails, payload,
               time_ns, created_ns)  # fmt: skip


# --------------------------------------------------------------------- spec vectors


def test_the_spec_record_vector_is_what_the_test_directories_hold(tmp_path):
    assert encode_record(SPEC_RECORD_TIME_NS, b"a") == SPEC_RECORD_A
    path, offsets = write_segment(tmp_path, 1, [b"a"])
    assert path.read_bytes() == HEADER + SPEC_RECORD_A and offsets == [8]


def test_the_spec_vector_job_has_expired_and_is_skipped(server, tmp_path, capsys):
    write_segment(tmp_path, 1, [SPEC_ADD, SPEC_COMPLETE])
    before = commands_end(server)
    r = import_(capsys, server, tmp_path)
    assert r.code == 0, r.err
    report = r.report
    assert report["records_by_type"] == {"add": 1, "complete": 1}
    assert report["skipped_expired"] == 1 and report["unknown_id"] == 1
    assert report["live_by_state"] == {} and report["published"] == 0
    assert commands_end(server) == before
    with pytest.raises(NotFound):
        run(inspect(server, SPEC_ID))


def test_the_spec_vector_replayed_at_its_time_is_ignored_by_eventq(server, tmp_path, capsys):
    """--now replays as of 2016: the job is live there and is published, but eventq
    applies the TTL by the broker's clock: expired before import, nothing stored."""
    write_segment(tmp_path, 1, [SPEC_ADD, SPEC_COMPLETE])
    r = import_(capsys, server, tmp_path, "--now", "2016-12-01T10:00:30Z")
    assert r.code == 0, r.err
    report = r.report
    assert report["now"] == "2016-12-01T10:00:30Z"
    assert report["live_by_state"] == {"COMPLETED": 1} and report["published"] == 1
    assert report["expired_before_import"] == 1 and report["imported"] == 0
    assert report["not_applied"] == 0
    with pytest.raises(NotFound):
        run(inspect(server, SPEC_ID))


def test_a_fresh_spec_vector_job_is_visible_with_its_fields(server, tmp_path, capsys):
    fresh_id, done_id, gone_id = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    created_ns = now_ns() - 5 * 10**9 + 123_456_789  # 5 s ago, sub-ms digits
    write_segment(tmp_path, 1, [
        spec_add(fresh_id, created_ns),
        spec_add(done_id, created_ns), with_id(SPEC_COMPLETE, done_id),
        spec_add(gone_id, created_ns), with_id(SPEC_DELETE, gone_id),
    ])  # fmt: skip
    r = import_(capsys, server, tmp_path)
    assert r.code == 0, r.err
    report = r.report
    assert report["live_by_state"] == {"NEW": 1, "COMPLETED": 1}
    assert report["imported"] == 2 and report["published"] == 2
    job = run(inspect(server, fresh_id))
    assert job == {
        "name": b"ping", "ttr": b"1000", "ttl": b"60000", "payload-size": b"1",
        "payload": b"a", "max-attempts": b"3", "attempts": b"0", "max-fails": b"1",
        "fails": b"0", "priority": b"10", "state": b"0",
        "created": format_time(created_ns // 10**6).encode(),
    }  # fmt: skip
    done = run(result_of(server, done_id))
    assert (done.success, done.result) == (True, b"a")
    assert run(inspect(server, done_id))["state"] == b"1"
    with pytest.raises(NotFound):
        run(inspect(server, gone_id))
    # The state log holds the exact snapshot: created time to the ms, TTL from it.
    job = state_jobs(server, [fresh_id])[fresh_id]
    assert job.created_ms == created_ns // 10**6
    assert job.expires_ms == job.created_ms + 60_000


def test_jobs_in_every_state_import_faithfully(server, tmp_path, capsys):
    name = "imp-" + uuid.uuid4().hex[:8]
    created = now_ns() - 60 * 10**9
    ids = {s: uuid.uuid4() for s in ("new", "leased", "pending", "done", "failed", "sched")}
    wake_ns = now_ns() + HOUR_MS * 10**6
    write_segment(tmp_path, 1, [
        add(ids["new"], name, created, priority=3),
        add(ids["leased"], name, created + 1 * MS, max_attempts=5), WqStartAttempt(ids["leased"]),
        WqTimeoutAttempt(ids["leased"]),
        WqStartAttempt(ids["leased"]),  # attempt 2, still leased at the end
        add(ids["pending"], name, created + 2 * MS), WqStartAttempt(ids["pending"]),
        WqTimeoutAttempt(ids["pending"]),
        add(ids["done"], name, created + 3 * MS), WqStartAttempt(ids["done"]),
        WqComplete(ids["done"], b"result\r\nbytes"),
        add(ids["failed"], name, created + 4 * MS), WqStartAttempt(ids["failed"]),
        WqFail(ids["failed"], b"boom"),
        add(ids["sched"], name, created + 5 * MS, time_ns=wake_ns),
    ])  # fmt: skip
    r = import_(capsys, server, tmp_path)
    assert r.code == 0, r.err
    report = r.report
    assert report["live_by_state"] == {
        "NEW": 2, "LEASED": 1, "PENDING": 1, "COMPLETED": 1, "FAILED": 1,
    }  # fmt: skip
    assert report["leased_requeued"] == 1 and report["imported"] == 6
    jobs = state_jobs(server, ids.values())
    got = {k: (jobs[i].state, jobs[i].attempts, jobs[i].fails) for k, i in ids.items()}
    assert got == {
        "new": (State.NEW, 0, 0),
        "leased": (State.PENDING, 2, 0),  # its worker is gone: PENDING, attempts kept
        "pending": (State.PENDING, 1, 0),
        "done": (State.COMPLETED, 1, 0),
        "failed": (State.FAILED, 1, 1),
        "sched": (State.NEW, 0, 0),
    }
    assert jobs[ids["done"]].result == b"result\r\nbytes"
    assert jobs[ids["failed"]].result == b"boom"
    assert jobs[ids["sched"]].scheduled_ms == wake_ns // 10**6
    assert jobs[ids["new"]].created_ms == created // 10**6

    async def check():
        async with await Client.connect(port=server.port) as c:
            sched = await c.inspect_job(ids["sched"])
            assert sched["time"] == format_time(wake_ns // 10**6).encode()
            waiting = await c.inspect_jobs(name, scheduled=True)
            assert [j for j, _ in waiting] == [str(ids["sched"])]
            # Lease order: priority first, then creation time.
            ready = [uuid.UUID(j) for j, _ in await c.inspect_jobs(name)]
            assert ready == [ids["new"], ids["leased"], ids["pending"]]
            first = await c.lease(name, 1000)
            assert first.id == ids["new"]
            second = await c.lease(name, 1000)
            assert second.id == ids["leased"]
            assert (await c.inspect_job(ids["leased"]))["attempts"] == b"3"
            failed = await c.result(ids["failed"], 0)
            assert (failed.success, failed.result) == (False, b"boom")

    run(check())


# --------------------------------------------------------------------------- re-runs


def test_rerunning_an_import_changes_nothing(server, tmp_path, capsys):
    name = "rerun-" + uuid.uuid4().hex[:8]
    created = now_ns() - 10**9
    a, b, c = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    # a's TTR outlasts the third import below (which waits until the server applied it)
    write_segment(tmp_path, 1, [add(a, name, created, ttr_ms=60_000), add(b, name, created + MS),
                                add(c, name, created + 2 * MS), WqComplete(c, b"ok")])  # fmt: skip
    first = import_(capsys, server, tmp_path)
    assert first.code == 0 and first.report["imported"] == 3
    before = state_jobs(server, [a, b, c])

    again = import_(capsys, server, tmp_path)
    assert again.code == 0, again.err
    assert again.report["imported"] == 0 and again.report["already_present"] == 3
    assert again.report["already_present_different"] == 0
    assert state_jobs(server, [a, b, c]) == before  # same versions: nothing applied

    # A worker leases one; importing again never overwrites that newer state.
    async def lease():
        async with await Client.connect(port=server.port) as client:
            return await client.lease(name, 1000)

    leased = run(lease())
    assert leased.id == a
    third = import_(capsys, server, tmp_path, "--no-progress")
    assert third.code == 0, third.err
    assert third.report["already_present"] == 3
    assert third.report["already_present_different"] == 1
    assert run(inspect(server, a))["state"] == b"4"  # still LEASED


# -------------------------------------------------------------------------- dry run


def test_a_dry_run_publishes_nothing_and_reports_counts(server, tmp_path, capsys):
    name = "dry-" + uuid.uuid4().hex[:8]
    fresh, old = now_ns() - 10**9, now_ns() - 2 * HOUR_MS * 10**6
    ids = [uuid.uuid4() for _ in range(5)]
    write_segment(tmp_path, 1, [
        add(ids[0], name, fresh), add(ids[1], name, fresh), WqStartAttempt(ids[1]),
        add(ids[2], name, fresh), WqComplete(ids[2], b"r"),
        add(ids[3], name, old),  # TTL (1 h) passed: skipped as expired
        WqComplete(ids[3], b"r"),  # ... so this is a no-op
    ])  # fmt: skip
    write_segment(tmp_path, 2, [add(ids[4], name, fresh), WqFail(ids[4], b"x")])
    before = commands_end(server)
    r = import_(capsys, server, tmp_path, "--dry-run")
    assert r.code == 0, r.err
    report = r.report
    assert report["dry_run"] is True and report["segments"] == 2 and report["records"] == 9
    assert report["records_by_type"] == {
        "add": 5, "start-attempt": 1, "complete": 2, "fail": 1,
    }  # fmt: skip
    assert report["skipped_expired"] == 1 and report["unknown_id"] == 1
    assert report["live_by_state"] == {"NEW": 1, "LEASED": 1, "COMPLETED": 1, "FAILED": 1}
    assert report["to_publish"] == 4 and report["published"] == 0
    assert commands_end(server) == before
    for job_id in ids:
        with pytest.raises(NotFound):
            run(inspect(server, job_id))
    # The human report says the same.
    text = run_cli(capsys, "import-cmdlog", tmp_path, "--dry-run", "--no-progress")
    assert text.code == 0 and text.err == ""
    assert "Dry run" in text.out and "skipped as expired (TTL passed before now): 1" in text.out
    assert "live jobs: 4 (COMPLETED 1, FAILED 1, LEASED 1, NEW 1)" in text.out
    assert "would publish: 4 jobs" in text.out


# ------------------------------------------------------------------------ corruption


def corrupt_log(directory, kind: str):
    """Two segments of 3 and 2 adds; one corruption of ``kind``. Returns (ids, the
    corrupt file, the offset of the bad record, the ids the skip mode must import)."""
    name = "bad-" + uuid.uuid4().hex[:8]
    created = now_ns() - 10**9
    ids = [uuid.uuid4() for _ in range(5)]
    path1, offsets1 = write_segment(directory, 1, [add(i, name, created) for i in ids[:3]])
    path2, offsets2 = write_segment(directory, 2, [add(i, name, created) for i in ids[3:]])
    if kind == "torn-tail":  # a crash mid-append: the last record of file 1 is cut short
        data = path1.read_bytes()
        path1.write_bytes(data[:-7])
        return ids, path1, offsets1[2], ids[:2] + ids[3:]
    if kind == "crc-mismatch":  # one bit flipped in the middle record of file 1
        data = bytearray(path1.read_bytes())
        data[offsets1[1] + 30] ^= 0x10
        path1.write_bytes(bytes(data))
        return ids, path1, offsets1[1], [ids[0], ids[2], *ids[3:]]
    assert kind == "bad-header"
    data = bytearray(path2.read_bytes())
    data[3] ^= 0xFF
    path2.write_bytes(bytes(data))
    return ids, path2, 0, ids[:3]


@pytest.mark.parametrize("kind", ["torn-tail", "crc-mismatch", "bad-header"])
def test_stop_at_a_corrupt_record_reports_it_and_publishes_nothing(
    server, tmp_path, capsys, kind
):
    ids, path, offset, _ = corrupt_log(tmp_path, kind)
    before = commands_end(server)
    r = import_(capsys, server, tmp_path)
    assert r.code == 1
    stopped = r.report["stopped_at"]
    assert (stopped["file"], stopped["offset"], stopped["kind"]) == (str(path), offset, kind)
    assert f"{path}: offset {offset}: {kind}" in r.err
    assert "nothing was published" in r.err and "--on-corrupt skip" in r.err
    assert r.report["published"] == 0 and commands_end(server) == before
    for job_id in ids:
        with pytest.raises(NotFound):
            run(inspect(server, job_id))


@pytest.mark.parametrize("kind", ["torn-tail", "crc-mismatch", "bad-header"])
def test_skip_reports_each_corrupt_record_and_imports_the_rest(
    server, tmp_path, capsys, kind
):
    ids, path, offset, imported = corrupt_log(tmp_path, kind)
    r = import_(capsys, server, tmp_path, "--on-corrupt", "skip")
    assert r.code == 0, r.err
    report = r.report
    assert [(c["file"], c["offset"], c["kind"]) for c in report["corrupt"]] == [
        (str(path), offset, kind)
    ]
    assert f"corrupt record: {path}: offset {offset}: {kind}" in r.err
    assert report["imported"] == len(imported)
    for job_id in ids:
        if job_id in imported:
            assert run(inspect(server, job_id))["state"] == b"0"
        else:
            with pytest.raises(NotFound):
                run(inspect(server, job_id))


# ------------------------------------------------------------------ failed writes


def test_a_failed_write_is_reported_and_the_rest_goes_in(kafka_bootstrap, tmp_path, capsys):
    """A bulk topic that cannot take a 1 MiB payload (max.message.bytes 64 KiB,
    which `eventq serve` would refuse to run on): that job fails to publish and is
    listed, the rest is published. (On eventq's own topics a 1 MiB payload and a 1 MiB
    result fit one import record: tests/migrate/test_export_roundtrip.py.)"""
    from eventq.kafka.topics import TopicNames, ensure_topics, eventq_topics

    prefix = "small-" + uuid.uuid4().hex[:8]
    specs = eventq_topics(TopicNames(f"{prefix}.commands", f"{prefix}.jobs"), 2)
    specs[2].configs["max.message.bytes"] = str(64 * 1024)  # the bulk topic
    ensure_topics(kafka_bootstrap, specs)
    name = "big-" + uuid.uuid4().hex[:8]
    big, small = uuid.uuid4(), uuid.uuid4()
    write_segment(tmp_path, 1, [
        add(big, name, now_ns(), payload=b"p" * (1024 * 1024)), add(small, name, now_ns()),
    ])  # fmt: skip
    r = run_cli(capsys, "import-cmdlog", tmp_path, "--json", "--no-wait",
                "--bootstrap", kafka_bootstrap, "--commands-topic", f"{prefix}.commands",
                "--jobs-topic", f"{prefix}.jobs", "--partitions", "2")
    assert r.code == 1
    report = r.report
    assert (report["published"], report["failed"]) == (1, 1)
    assert report["failures"][0]["key"] == str(big)
    assert "size" in report["failures"][0]["reason"].lower()
    assert "incomplete" in r.err


# ---------------------------------------------------------------- errors and the CLI


def test_clear_errors_for_a_wrong_directory_or_missing_topics(
    server, kafka_bootstrap, tmp_path, capsys
):
    r = run_cli(capsys, "import-cmdlog", tmp_path / "nope", "--dry-run")
    assert r.code == 1 and "does not exist" in r.err
    (tmp_path / "empty").mkdir()
    r = run_cli(capsys, "import-cmdlog", tmp_path / "empty", "--dry-run")
    assert r.code == 1 and "no workq segment files" in r.err
    write_segment(tmp_path / "log", 1, [spec_add(uuid.uuid4(), now_ns())])
    r = run_cli(capsys, "import-cmdlog", tmp_path / "log", "--bootstrap", kafka_bootstrap,
                "--commands-topic", "no-such-topic-" + uuid.uuid4().hex)  # fmt: skip
    assert r.code == 1 and "does not exist" in r.err and "eventq topics create" in r.err


def test_the_cli_runs_as_a_program_with_help_and_usage_errors(tmp_path):
    helped = subprocess.run(
        [sys.executable, "-m", "eventq.migrate", "import-cmdlog", "--help"],
        capture_output=True, text=True, timeout=60,
    )
    assert helped.returncode == 0
    for flag in ("--dry-run", "--on-corrupt", "--now", "--no-wait", "--wait-timeout"):
        assert flag in helped.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "eventq.migrate", "import-cmdlog", str(tmp_path), "--now",
         "yesterday"], capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert bad.returncode == 2 and "2016-12-01T10:00:00Z" in bad.stderr
    helped = subprocess.run(
        [sys.executable, "-m", "eventq.migrate", "export-cmdlog", "--help"],
        capture_output=True, text=True, timeout=60,
    )
    assert helped.returncode == 0 and "new or empty" in helped.stdout


def test_register_adds_both_subcommands_to_an_eventq_style_parser(tmp_path):
    parser = argparse.ArgumentParser(prog="eventq")
    commands = parser.add_subparsers(dest="command", required=True)
    register(commands, add_arguments, lambda args: None)
    args = parser.parse_args(["import-cmdlog", str(tmp_path), "--dry-run", "--on-corrupt",
                              "skip", "--partitions", "4"])  # fmt: skip
    assert args.handler.__name__ == "cmd_import_cmdlog"
    assert (args.dry_run, args.on_corrupt, args.wait, args.partitions) == (True, "skip", True, "4")
    args = parser.parse_args(["export-cmdlog", str(tmp_path)])
    assert args.handler.__name__ == "cmd_export_cmdlog"
