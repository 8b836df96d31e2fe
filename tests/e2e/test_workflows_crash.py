"""Workflows survive a kill -9 with notices in flight (docs/workflows.md, "Determinism"):
the processor that applies a complete writes the `upstream` notices
into the dependents' partitions before its input is committed, so a crash repeats them
at worst, and each is applied once by the positions it names.

The graph: UPSTREAMS jobs; each dependent waits for two neighbouring upstreams (in
other partitions, mostly); one fan-in job waits for every dependent. The upstreams are
completed and the server killed within milliseconds of the last reply; the dependents
likewise; then the fan-in. What must hold after each restart: every job is leased
exactly once, in an order that respects every edge, with the inputs of its upstreams in
-after order; nothing else is ever leasable; and the live digest equals a clean fold of
the command log. The same on three processes, where most edges cross processes and the
killed process holds both ends of some edges and one end of others.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid

import pytest

from eventq.client import AsyncClient
from eventq.client.errors import TimedOut
from eventq.core.partitioner import job_key, partition_for_key
from eventq.kafka.logreader import latest_state
from eventq.run.replay import derive_from_commands
from tools.servers import EventqCluster, ServerProcess, raw_exchange

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.timeout(600)]

UPSTREAMS = 16
QUEUE = "dag"
TTR_MS = 60_000
TTL_MS = 3_600_000
NOTHING_LEFT_WAIT_MS = 1_500  # a lease that finds nothing (a dependent released twice would be there)
QUIET_POLL_S = 0.5


class Graph:
    """The DAG and what the clients saw of it: leases in order, completes acknowledged."""

    def __init__(self) -> None:
        self.upstreams = [uuid.uuid4() for _ in range(UPSTREAMS)]
        # Dependent i waits for upstreams i and i+1 (ring): fan-in 2, fan-out 2.
        self.dependents = {uuid.uuid4(): [self.upstreams[i], self.upstreams[(i + 1) % UPSTREAMS]]
                           for i in range(UPSTREAMS)}
        self.fan_in = uuid.uuid4()
        self.edges = {**self.dependents, self.fan_in: list(self.dependents)}
        self.leased: list[uuid.UUID] = []
        self.completed_at: dict[uuid.UUID, int] = {}  # job -> index in self.leased when done

    def jobs(self) -> list[uuid.UUID]:
        return [*self.upstreams, *self.dependents, self.fan_in]

    def crossing(self, partitions: int) -> int:
        """Edges whose ends live in different partitions."""
        def part(job: uuid.UUID) -> int:
            return partition_for_key(job_key(job), partitions)
        return sum(part(up) != part(dep) for dep, ups in self.edges.items() for up in ups)


def client(port: int) -> AsyncClient:
    return AsyncClient(port=port, pool_size=1)


async def add_graph(port: int, graph: Graph) -> None:
    """Dependents first (spec: upstreams may be added after their dependents)."""
    async with client(port) as c:
        for dep, ups in graph.dependents.items():
            await c.add(QUEUE, dep.bytes, id=dep, ttr_ms=TTR_MS, ttl_ms=TTL_MS, after=ups)
        await c.add(QUEUE, b"fan-in", id=graph.fan_in, ttr_ms=TTR_MS, ttl_ms=TTL_MS,
                    after=list(graph.dependents))
        for up in graph.upstreams:
            await c.add(QUEUE, up.bytes, id=up, ttr_ms=TTR_MS, ttl_ms=TTL_MS)


async def work(port: int, graph: Graph, count: int) -> None:
    """Lease and complete ``count`` jobs as fast as the server answers; each result
    names its job, so that a dependent's inputs can be checked."""
    async with client(port) as c:
        for _ in range(count):
            job = await c.lease(QUEUE, wait_timeout_ms=30_000)
            graph.leased.append(job.id)
            await c.complete(job.id, b"done " + job.id.bytes)
            graph.completed_at[job.id] = len(graph.leased)


async def nothing_leasable(port: int) -> None:
    async with client(port) as c:
        with pytest.raises(TimedOut):
            job = await c.lease(QUEUE, wait_timeout_ms=NOTHING_LEFT_WAIT_MS)
            pytest.fail(f"{job.id} leased again or out of turn")


async def check_the_graph(port: int, graph: Graph) -> None:
    assert sorted(map(str, graph.leased)) == sorted(map(str, graph.jobs())), "each job once"
    leased_at = {job: index for index, job in enumerate(graph.leased, 1)}
    for dep, ups in graph.edges.items():
        for up in ups:
            assert graph.completed_at[up] < leased_at[dep], f"{dep} leased before {up} completed"
    async with client(port) as c:
        for job in graph.jobs():
            info = await c.inspect_job(job)
            assert (info.state, info.attempts) == ("completed", 1), (job, info)
        for dep, ups in graph.edges.items():
            inputs = await c.inputs(dep)
            assert [(i.id, i.ok, i.data) for i in inputs] == [
                (up, True, b"done " + up.bytes) for up in ups], dep


async def quiet_digest(port: int, timeout_s: float = 60.0) -> str:
    """The digest once two reads a poll apart agree (nothing pending)."""
    deadline = time.monotonic() + timeout_s
    async with client(port) as c:
        previous = None
        while True:
            digest = await c.digest()
            if digest == previous:
                return digest
            assert time.monotonic() < deadline, "the digest never settled"
            previous = digest
            await asyncio.sleep(QUIET_POLL_S)


def until_every_partition_serves(port: int, timeout_s: float = 120.0) -> None:
    """After a restart (and, on several processes, the rebalance it causes)."""
    deadline = time.monotonic() + timeout_s
    while not raw_exchange(port, b"inspect digest\r\n", timeout_s=5.0).startswith(b"+OK"):
        assert time.monotonic() < deadline, "partitions not all served again"
        time.sleep(0.2)


def crash_after(coroutine, server: ServerProcess, port: int) -> None:
    """Run ``coroutine`` (its last reply is the last thing it waits for), then kill -9
    ``server`` at once, start it again and wait until ``port`` serves every partition."""
    asyncio.run(coroutine)
    server.kill()
    server.start()
    until_every_partition_serves(port)


def test_a_kill_with_notices_in_flight_releases_every_dependent_once(kafka_bootstrap,
                                                                    topic_prefix, tmp_path):
    # The session's broker: only the server dies here.
    server = ServerProcess(kafka_bootstrap, topic_prefix, tmp_path / "server", partitions=4)
    commands, jobs = f"{topic_prefix}.commands", f"{topic_prefix}.jobs"
    server.create_topics()
    server.start()
    graph = Graph()
    assert graph.crossing(4) > UPSTREAMS  # most edges cross partitions
    try:
        asyncio.run(add_graph(server.port, graph))
        # The upstreams' completes write notices to the dependents: kill within
        # milliseconds of the last reply, before the commit that covers them.
        crash_after(work(server.port, graph, UPSTREAMS), server, server.port)
        crash_after(work(server.port, graph, UPSTREAMS), server, server.port)
        asyncio.run(work(server.port, graph, 1))  # the fan-in, released by 16 notices
        asyncio.run(nothing_leasable(server.port))
        asyncio.run(check_the_graph(server.port, graph))
        live_digest = asyncio.run(quiet_digest(server.port))
    finally:
        server.stop()
    # Jobs and the inputs beside them (eventq/core/digest.py), folded from the command
    # log and read from the state log, as the live server holds them.
    derived = derive_from_commands(kafka_bootstrap, commands)
    assert len(derived.inputs) == 3 * UPSTREAMS  # 2 per ring dependent, 16 of the fan-in
    assert derived.digest() == live_digest
    assert latest_state(kafka_bootstrap, jobs).digest() == live_digest
    # The CLI says the same, both ways.
    flags = ["--bootstrap", kafka_bootstrap, "--commands-topic", commands, "--jobs-topic", jobs]
    for source in ([], ["--from-commands"]):
        out = subprocess.run([sys.executable, "-m", "eventq.cli", "digest", *source, *flags],
                             capture_output=True, text=True, timeout=120)
        assert out.stdout.split()[:2] == [live_digest, str(len(graph.jobs()))], out.stderr
    out = subprocess.run([sys.executable, "-m", "eventq.cli", "replay", "--from-commands", *flags],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"agree on every job and every input ({3 * UPSTREAMS})" in out.stdout, out.stdout


def test_three_processes_one_killed_with_notices_in_flight_release_every_dependent_once(
        kafka_cluster, tmp_path):
    cluster = EventqCluster(kafka_cluster, f"dag3{os.getpid()}", tmp_path, processes=3,
                            partitions=6, session_timeout_ms=6000).start()
    graph = Graph()
    assert graph.crossing(6) > UPSTREAMS
    first, killed = cluster[0], cluster[1]
    try:
        asyncio.run(add_graph(first.port, graph))
        # Work through process 1; process 2 (owning about a third of the partitions,
        # so both ends of some edges and one end of most) dies right after the replies.
        crash_after(work(first.port, graph, UPSTREAMS), killed, first.port)
        crash_after(work(first.port, graph, UPSTREAMS), killed, first.port)
        asyncio.run(work(first.port, graph, 1))
        asyncio.run(nothing_leasable(first.port))
        asyncio.run(check_the_graph(first.port, graph))
        live_digest = asyncio.run(quiet_digest(first.port))
    finally:
        cluster.stop()
    derived = derive_from_commands(kafka_cluster, f"dag3{os.getpid()}.commands")
    assert derived.digest() == live_digest
    assert latest_state(kafka_cluster, f"dag3{os.getpid()}.jobs").digest() == live_digest
