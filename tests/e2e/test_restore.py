"""The server restores its own state from `eventq.jobs` at disk speed
(docs/architecture.md, "Memory and restores").

A discarded data dir comes back with the live server's digest (and `eventq replay`'s);
a restore killed half-way is done again on the next start; after a restore the server
reads only the commands after its restore point, so no acknowledged command is lost
or applied twice in effect."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from eventq.client.raw import RawClient as Client
from eventq.core import Job, State, decode_state, state_digest
from eventq.run.replay import derive_from_commands
from eventq.run.restore import open_table, table_path
from eventq.state.jobs_table import is_job_key
from tools.servers import ServerProcess, produce_state_records

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(600)]

PARTITIONS = 4
LONG_TTR_MS, LONG_TTL_MS = 60_000, 600_000  # no timer fires during a test


async def workload(port: int, jobs: int, seed: int) -> None:
    """Adds, schedules, leases, completes, fails and deletes, all acknowledged."""
    async with await Client.connect(port=port) as c:
        ids = [uuid.UUID(int=seed << 64 | i, version=4) for i in range(jobs)]
        for i, job_id in enumerate(ids):
            if i % 10 == 9:
                await c.schedule(job_id, f"q{i % 3}", LONG_TTR_MS, LONG_TTL_MS,
                                 "2999-01-01T00:00:00Z", b"later")
            else:
                await c.add(job_id, f"q{i % 3}", LONG_TTR_MS, LONG_TTL_MS, b"p%d" % i,
                            priority=i % 4)
        for i in range(jobs // 2):
            leased = await c.lease(["q0", "q1", "q2"], 1000)
            if i % 3 == 0:
                await c.complete(leased.id, b"done")
            elif i % 3 == 1:
                await c.fail(leased.id, b"failed")
        for job_id in ids[::7]:
            await c.delete(job_id)


async def live_digest(port: int) -> str:
    async with await Client.connect(port=port) as c:
        return await c.digest()


def cli(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "eventq.cli", *args],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def tables_digest(state_dir: Path) -> str:
    """The digest of the jobs in a data dir's tables, read directly."""
    jobs = []
    for partition in range(PARTITIONS):
        db = open_table(table_path(state_dir, partition))
        try:
            jobs += [decode_state(raw)[1] for key, raw in db.items() if is_job_key(key)]
        finally:
            db.close()
    return state_digest(jobs)


def this_start(server: ServerProcess) -> str:
    return server.log_path.read_text().rsplit("===== start", 1)[-1]


def applied_records(server: ServerProcess) -> int:
    """Command records the last run applied (its stop's summary line)."""
    return int(re.findall(r"applied (\d+) records", server.log_path.read_text())[-1])


def test_a_discarded_data_dir_is_restored_and_reads_only_what_follows(
    kafka_bootstrap, topic_prefix, tmp_path
):
    server = ServerProcess(kafka_bootstrap, topic_prefix, tmp_path / "server",
                           partitions=PARTITIONS)
    server.create_topics()
    flags = ["--bootstrap", kafka_bootstrap, "--partitions", str(PARTITIONS),
             "--commands-topic", server.settings["commands-topic"],
             "--jobs-topic", server.settings["jobs-topic"]]
    server.start()
    try:
        asyncio.run(workload(server.port, 120, seed=1))
        live = asyncio.run(live_digest(server.port))
        assert server.stop() == 0

        # A new machine: no local state. The server copies the state log itself.
        shutil.rmtree(tmp_path / "server" / "state")
        server.start()
        log = this_start(server)
        assert "restored" in log and f"into {PARTITIONS} partitions" in log, log
        assert asyncio.run(live_digest(server.port)) == live
        async def one_more() -> None:
            async with await Client.connect(port=server.port) as c:
                await c.add(uuid.uuid4(), "q0", LONG_TTR_MS, LONG_TTL_MS, b"after")
        asyncio.run(one_more())
        after = asyncio.run(live_digest(server.port))
        assert server.stop() == 0
        # Everything before the restore point came from the state log: the command
        # log was read from the committed offsets on, i.e. just the one new add.
        assert applied_records(server) == 1

        # `eventq replay` builds the same tables; `eventq digest` reads the same state.
        cli("replay", *flags, "--data-dir", str(tmp_path / "replayed"))
        assert tables_digest(tmp_path / "replayed" / "state") == after
        assert cli("digest", *flags, "--data-dir", str(tmp_path / "d")).split()[0] == after

        # kill -9 right after acknowledged writes: the uncommitted tail is applied again
        # on the restored state, in effect once (the command log's fold agrees).
        server.start()
        asyncio.run(workload(server.port, 60, seed=2))
        server.kill()
        server.start()
        log = this_start(server)
        assert "did not stop cleanly" in log and "restored" in log, log
        restarted = asyncio.run(live_digest(server.port))
    finally:
        server.stop()
    derived = derive_from_commands(kafka_bootstrap, server.settings["commands-topic"])
    assert state_digest(derived.jobs.values()) == restarted
    assert len(derived.jobs) > 150


def state_log_jobs(count: int):
    """``count`` live jobs for a state log (``support.produce_state_records``)."""
    now_ms = int(time.time() * 1000)
    for i in range(count):
        yield Job(id=uuid.UUID(int=i + 1, version=4), name=f"q{i % 50}",
                  ttr_ms=LONG_TTR_MS, ttl_ms=LONG_TTL_MS, payload=b"x" * 40, priority=0,
                  max_attempts=0, max_fails=0, attempts=0, fails=0, state=State.NEW,
                  created_ms=now_ms, scheduled_ms=None, expires_ms=now_ms + LONG_TTL_MS,
                  lease_deadline_ms=None, result=None, result_ok=None, version=0)


def test_a_restore_killed_half_way_is_done_again_on_the_next_start(
    kafka_bootstrap, topic_prefix, tmp_path
):
    jobs = 300_000
    server = ServerProcess(kafka_bootstrap, topic_prefix, tmp_path / "server",
                           partitions=PARTITIONS)
    server.create_topics()
    produce_state_records(kafka_bootstrap, server.settings["jobs-topic"],
                          state_log_jobs(jobs), PARTITIONS)
    server.launch()
    try:
        deadline = time.monotonic() + 60
        while "restoring" not in this_start(server):
            assert time.monotonic() < deadline, server.log_tail()
            time.sleep(0.01)
        server.kill()
        assert "restored" not in this_start(server), "the restore ended before the kill"
        # The restore's child process dies with the server: left running, it went on
        # writing into the tables the next start restores again, corrupting them (and
        # it would log its end here, into the killed server's log).
        time.sleep(3)  # more than the whole restore takes
        assert not restores_running(str(tmp_path / "server" / "state"))
        assert "restored" not in this_start(server), "the restore outlived its server"
        assert (tmp_path / "server" / "state" / "RUNNING").exists()

        server.start()
        log = this_start(server)
        assert "did not stop cleanly" in log and f"restored {jobs:,} state records" in log
        digest = asyncio.run(live_digest(server.port))
    finally:
        server.stop()
    flags = ["--bootstrap", kafka_bootstrap, "--jobs-topic", server.settings["jobs-topic"]]
    expected = cli("digest", *flags, "--data-dir", str(tmp_path / "d")).split()
    assert expected == [digest, str(jobs), "jobs"]


def restores_running(state_dir: str) -> list[int]:
    """Pids of `python -m eventq.run.restore` processes writing into ``state_dir``."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            words = (proc / "cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            continue
        if b"eventq.run.restore" in words and state_dir.encode() in words:
            found.append(int(proc.name))
    return found
