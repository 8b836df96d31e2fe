"""The campaign runs its eventq processes as `eventq up` would (tools/faults/campaign.py
``supervise_processes``): one that exits on its own is started again after the
supervisor's backoff; one a fault killed is left to its fault."""

from __future__ import annotations

import asyncio
import time

from eventq.run.supervisor import POLL_INTERVAL_S
from tools.faults.campaign import supervise_processes
from tools.faults.history import Clock

FAR_GUARD_S = 30.0  # a restart never coming fails the test, far past the 1 s backoff


class Process:
    def __init__(self) -> None:
        self.returncode: int | None = None

    def poll(self) -> int | None:
        return self.returncode


class Server:
    def __init__(self) -> None:
        self.process = Process()


class Cluster:
    """Three processes: ``exit(i, code)`` ends one; restarts are counted."""

    processes = 3

    def __init__(self) -> None:
        self.servers = [Server() for _ in range(self.processes + 1)]  # a spare slot
        self.members = set(range(self.processes))
        self.restarted: list[tuple[int, float]] = []

    def process_pid(self, i: int) -> int | None:
        return None if self.servers[i].process.poll() is not None else 1000 + i

    def exit(self, i: int, code: int) -> None:
        self.servers[i].process.returncode = code

    def restart_process(self, i: int, wait: bool = True) -> None:
        self.servers[i].process = Process()
        self.restarted.append((i, time.monotonic()))


def test_an_exit_of_its_own_is_restarted_after_the_backoff_and_a_killed_one_is_not():
    async def scenario():
        cluster, notes, logged = Cluster(), [], []
        killed = {2}
        task = asyncio.ensure_future(
            supervise_processes(cluster, killed, logged.append, Clock(), notes))
        await asyncio.sleep(0.1)
        exited_at = time.monotonic()
        cluster.exit(0, 1)
        cluster.exit(2, -9)  # the fault's kill
        while not cluster.restarted:  # the one it restarts, after its backoff
            await asyncio.sleep(0.05)
        # Both ended at one moment: by the time the one exited on its own is back, the
        # killed one would be too, were it restarted; a look more to be sure.
        await asyncio.sleep(2 * POLL_INTERVAL_S)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return cluster, notes, exited_at

    cluster, notes, exited_at = asyncio.run(asyncio.wait_for(scenario(), FAR_GUARD_S))
    assert [i for i, _ in cluster.restarted] == [0]
    assert cluster.restarted[0][1] - exited_at >= 1.0  # the first backoff: 1 s, not less
    assert notes == ["process 0 exited with status 1 on its own; restarting it in 1s, "
                     "as eventq up would"]


def test_a_process_that_joined_is_watched_and_one_that_left_for_good_is_not():
    async def scenario():
        cluster, notes = Cluster(), []
        task = asyncio.ensure_future(
            supervise_processes(cluster, set(), lambda _: None, Clock(), notes))
        await asyncio.sleep(0.1)
        cluster.members.add(3)  # scale out
        cluster.members.discard(1)  # scale in: it stops, and stays stopped
        await asyncio.sleep(2 * POLL_INTERVAL_S)
        cluster.exit(1, 0)
        cluster.exit(3, 1)
        while not cluster.restarted:
            await asyncio.sleep(0.05)
        await asyncio.sleep(2 * POLL_INTERVAL_S)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return cluster

    cluster = asyncio.run(asyncio.wait_for(scenario(), FAR_GUARD_S))
    assert [i for i, _ in cluster.restarted] == [3]
