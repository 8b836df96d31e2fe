"""`run` held by a lease (eventq/gateway/handlers.py, docs/protocol.md, "run"): past its
wait-timeout it waits for that attempt's result until the TTR, unless the attempt ends
without one: a lease no client received is given back, and the run says -TIMEOUT then."""

from __future__ import annotations

import asyncio
import time

from eventq.gateway.leasing import Handover
from eventq.protocol.parser import Parser
from support.memory_processes import Process, job_id, run

WAIT_TIMEOUT_MS = 200
TTR_MS = 60_000  # far past the test's bound: a run waiting it out fails the test
BOUND_S = 5.0


async def lease_nobody_receives(p: Process) -> Handover:
    """A lease taken as a connection's task takes it, whose client is then gone."""
    parser = Parser(lambda: p.engine.log.now_ms)
    parser.feed(b"lease q 5000\r\n")
    handover = await p.gateway.handle(parser.next_event())
    assert isinstance(handover, Handover)
    return handover


def test_a_run_whose_lease_is_given_back_says_timeout_then_not_at_its_ttr() -> None:
    async def scenario() -> None:
        p = Process()
        job = job_id(0, 1)
        began = time.monotonic()
        running = asyncio.create_task(p.handle(
            f"run {job} q {TTR_MS} {WAIT_TIMEOUT_MS} 2\r\nhi\r\n".encode()))
        handover = await lease_nobody_receives(p)
        assert str(job).encode() in handover.reply
        await asyncio.sleep(2 * WAIT_TIMEOUT_MS / 1000)  # the run now waits on the lease
        assert not running.done()
        p.gateway.give_back(handover.release)
        await asyncio.sleep(0)
        await p.engine.driver.drain()
        assert await asyncio.wait_for(running, BOUND_S) == b"-TIMEOUT\r\n"
        assert time.monotonic() - began < BOUND_S
        assert await p.handle(f"result {job} 0\r\n".encode()) == b"-NOT-FOUND\r\n"

    run(scenario())


def test_a_run_whose_lease_is_completed_gets_the_result_after_its_wait_timeout() -> None:
    async def scenario() -> None:
        p = Process()
        job = job_id(0, 2)
        running = asyncio.create_task(p.handle(
            f"run {job} q {TTR_MS} {WAIT_TIMEOUT_MS} 2\r\nhi\r\n".encode()))
        await lease_nobody_receives(p)  # received after all: the worker completes it
        await asyncio.sleep(2 * WAIT_TIMEOUT_MS / 1000)
        assert await p.handle(f"complete {job} 4\r\ndone\r\n".encode()) == b"+OK\r\n"
        assert await asyncio.wait_for(running, BOUND_S) == (
            f"+OK 1\r\n{job} 1 4\r\ndone\r\n".encode())

    run(scenario())
