"""eventq -> export-cmdlog -> import-cmdlog -> a second eventq: the same jobs."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import re
import time
import uuid
from datetime import datetime, timedelta, timezone

import pytest

from eventq.client.raw import RawClient as Client
from eventq.cmdlog import iter_commands, list_segments, replay
from eventq.core import Import, State
from eventq.migrate.mapping import import_command
from support.migrate_support import run_cli, server_flags, state_jobs, wait_state_jobs

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(240)]

HOUR_MS = 3_600_000


@pytest.fixture(scope="module")
def second_server(kafka_bootstrap, tmp_path_factory, request):
    """Another `eventq serve` on its own topics, app id and port."""
    from tools.servers import ServerProcess

    prefix = re.sub(r"[^A-Za-z0-9]+", "-", request.module.__name__)[-30:].strip("-")
    process = ServerProcess(
        kafka_bootstrap, f"m{os.getpid()}-{prefix}-b", tmp_path_factory.mktemp("server-b")
    )
    process.create_topics()
    process.start()
    yield process
    code = process.stop()
    assert code == 0, f"eventq serve did not stop cleanly ({code}):\n{process.log_tail()}"


def utc(seconds_from_now: float) -> str:
    moment = datetime.now(timezone.utc) + timedelta(seconds=seconds_from_now)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


async def make_jobs(server, name: str) -> dict[str, uuid.UUID]:
    """One job per state, each in its own queue (``name-key``) so leases pick it."""
    ids = {k: uuid.uuid4() for k in (
        "new", "leased", "completed", "failed", "scheduled", "timed-out", "retried")}  # fmt: skip

    def q(key: str) -> str:
        return f"{name}-{key}"

    async with await Client.connect(port=server.port) as c:
        await c.add(ids["new"], q("new"), 5000, HOUR_MS, b"new\r\npayload", priority=7,
                    max_attempts=4, max_fails=2)  # fmt: skip
        await c.schedule(ids["scheduled"], q("scheduled"), 5000, HOUR_MS, utc(3600), b"s",
                         priority=-3)  # fmt: skip
        for key, ttr_ms, max_fails in (("leased", 60_000, 0), ("completed", 60_000, 0),
                                       ("failed", 60_000, 0), ("timed-out", 50, 0),
                                       ("retried", 60_000, 3)):  # fmt: skip
            await c.add(ids[key], q(key), ttr_ms, HOUR_MS, key.encode(), max_fails=max_fails)
            assert (await c.lease(q(key), 1000)).id == ids[key]
        await c.complete(ids["completed"], b"the result")
        await c.fail(ids["failed"], b"it broke")
        # A fail with retries left: PENDING with fails 1 (workq's log cannot carry it).
        await c.fail(ids["retried"], b"try again")
        # TTR passes: back to PENDING with one attempt.
        deadline = time.monotonic() + 15
        while (await c.inspect_job(ids["timed-out"]))["state"] != b"3":
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
    return ids


EXPECTED = {
    "new": (State.NEW, 0, 0),
    "leased": (State.LEASED, 1, 0),
    "completed": (State.COMPLETED, 1, 0),
    "failed": (State.FAILED, 1, 1),
    "scheduled": (State.NEW, 0, 0),
    "timed-out": (State.PENDING, 1, 0),
    "retried": (State.PENDING, 1, 1),
}


def test_jobs_round_trip_through_a_workq_command_log(server, second_server, tmp_path, capsys):
    name = "rt-" + uuid.uuid4().hex[:8]
    ids = asyncio.run(make_jobs(server, name))
    # The state log is what export reads: wait until it shows every change.
    original = wait_state_jobs(server, lambda jobs: all(
        ids[k] in jobs and (jobs[ids[k]].state, jobs[ids[k]].attempts, jobs[ids[k]].fails)
        == want for k, want in EXPECTED.items()))  # fmt: skip

    target = tmp_path / "exported"
    r = run_cli(capsys, "export-cmdlog", target, "--json", *server_flags(server))
    assert r.code == 0, r.err
    report = r.report
    assert report["exported"] == report["live_jobs"] == len(state_jobs(server))
    assert report["files"] and all(os.path.exists(f) for f in report["files"])
    assert [uuid.UUID(i) for i in report["leased"]] == [ids["leased"]]
    inexact = {uuid.UUID(d["id"]): d["difference"] for d in report["inexact"]}
    assert set(inexact) == {ids["retried"]} and "fails: 1 -> 0" in inexact[ids["retried"]]
    text = run_cli(capsys, "export-cmdlog", tmp_path / "again", *server_flags(server))
    assert "LEASED jobs (lease deadline not kept" in text.out
    assert "do not replay exactly" in text.out

    # The directory is a valid workq command log: it replays to the same jobs.
    assert list_segments(target)
    replayed = replay(iter_commands(target), time.time_ns())
    assert {ids[k] for k in EXPECTED} <= set(replayed)

    # Refused: a non-empty target.
    again = run_cli(capsys, "export-cmdlog", target, *server_flags(server))
    assert again.code == 1 and "not empty" in again.err and "new or empty" in again.err

    r = run_cli(capsys, "import-cmdlog", target, "--json", *server_flags(second_server))
    assert r.code == 0, r.err
    assert r.report["imported"] >= len(EXPECTED) and r.report["leased_requeued"] == 1

    copied = state_jobs(second_server, [ids[k] for k in EXPECTED])
    for key in EXPECTED:
        a, b = original[ids[key]], copied[ids[key]]
        want = a
        if key == "leased":  # comes back PENDING, attempts kept, no lease deadline
            want = dataclasses.replace(a, state=State.PENDING, lease_deadline_ms=None)
        if key == "retried":  # fails: workq's log cannot carry them on a live job
            want = dataclasses.replace(a, fails=0)
        assert Import.from_job(b) == Import.from_job(want), key
        assert import_command(replayed[ids[key]]) == Import.from_job(want), key

    async def check():
        async with await Client.connect(port=second_server.port) as c:
            job = await c.inspect_job(ids["new"])
            assert (job["payload"], job["priority"], job["max-attempts"], job["max-fails"]) == (
                b"new\r\npayload", b"7", b"4", b"2",
            )  # fmt: skip
            assert "time" in await c.inspect_job(ids["scheduled"])
            done = await c.result(ids["completed"], 0)
            assert (done.success, done.result) == (True, b"the result")
            failed = await c.result(ids["failed"], 0)
            assert (failed.success, failed.result) == (False, b"it broke")
            # The formerly leased job is ready again, as attempt 2.
            for key in ("new", "leased", "timed-out", "retried"):
                listed = [uuid.UUID(j) for j, _ in await c.inspect_jobs(f"{name}-{key}")]
                assert listed == [ids[key]], key
            leased = await c.lease(f"{name}-leased", 1000)
            assert leased.id == ids["leased"]
            assert (await c.inspect_job(ids["leased"]))["attempts"] == b"2"

    asyncio.run(check())


def test_max_size_payload_and_result_round_trip(server, second_server, tmp_path, capsys):
    """An import command carrying a 1 MiB payload and a 1 MiB result (over 2 MiB) is
    written and applied; the job comes back byte for byte (docs/architecture.md,
    "Limits")."""
    from eventq.limits import MAX_PAYLOAD_BYTES, MAX_RESULT_BYTES

    name = "big-" + uuid.uuid4().hex[:8]
    payload, result = b"\r\n" * (MAX_PAYLOAD_BYTES // 2), b"\xfe" * MAX_RESULT_BYTES
    done, waiting = uuid.uuid4(), uuid.uuid4()

    async def make() -> None:
        async with await Client.connect(port=server.port) as c:
            await c.add(done, name, 60_000, HOUR_MS, payload)
            await c.complete(done, result)
            await c.add(waiting, name, 60_000, HOUR_MS, payload)

    asyncio.run(make())
    wait_state_jobs(server, lambda jobs: done in jobs and jobs[done].state is State.COMPLETED
                    and waiting in jobs)
    target = tmp_path / "big"
    r = run_cli(capsys, "export-cmdlog", target, "--json", *server_flags(server))
    assert r.code == 0, r.err
    r = run_cli(capsys, "import-cmdlog", target, "--json", *server_flags(second_server))
    assert r.code == 0, r.err

    async def check() -> None:
        async with await Client.connect(port=second_server.port) as c:
            copied = await c.result(done, 0)
            assert (copied.success, copied.result) == (True, result)
            assert (await c.inspect_job(done))["payload"] == payload
            assert (await c.lease(name, 1000)).payload == payload

    asyncio.run(check())
