"""Which answer a request gets (eventq/gateway/dispatch.py): this process's, the owner's
for a job another process owns (its reply relayed as is), the cluster's for one over
all jobs; from a peer, always this process's own. And pause/resume everywhere: this
process's own answer first (eventq/gateway/cluster_answers.py), then every other's."""

from __future__ import annotations

import asyncio
import uuid

from eventq.core import Pause
from eventq.errors import NotWritten
from eventq.gateway.cluster_answers import ClusterAnswers
from eventq.gateway.dispatch import Gateway
from eventq.gateway.handlers import LocalAnswers
from eventq.gateway.leasing import Leasing
from eventq.protocol import replies
from eventq.protocol import requests as rq
from eventq.state.indexes import JobIndex
from eventq.state.waiters import Waiters

OWNED_ELSEWHERE = uuid.UUID("6ba7b810-9dad-41d1-80b4-00c04fd430c8")


class Engine:
    """The engine's surface pause uses: every queue command written, or ``error``."""

    def __init__(self, error: Exception | None = None) -> None:
        self.index = JobIndex()
        self.waiters = Waiters()
        self.error = error
        self.written: list[object] = []

    async def submit_everywhere(self, command) -> None:
        self.written.append(command)
        if self.error is not None:
            raise self.error


class Stats:
    active_clients = evicted_jobs = released = 0


class Others:
    """One other process, at b:1: it owns OWNED_ELSEWHERE and answers ``reply``."""

    partitions = 1

    def __init__(self, reply: bytes) -> None:
        self.reply = reply
        self.asked: list[object] = []

    def others(self) -> list[str]:
        return ["b:1"]

    def remote_owner(self, job_id: uuid.UUID) -> str | None:
        return "b:1" if job_id == OWNED_ELSEWHERE else None

    async def ask(self, address: str, request: object) -> bytes:
        self.asked.append((address, request))
        return self.reply

    async def ask_others(self, request: object) -> list[bytes]:
        return [await self.ask("b:1", request)]


def gateway(engine: Engine, others: Others) -> Gateway:
    clock_ms = lambda: 0  # noqa: E731
    leasing = Leasing(engine, Stats(), clock_ms)
    local = LocalAnswers(engine, Stats(), leasing, clock_ms)
    answers = ClusterAnswers(cluster=others, engine=engine, stats=Stats(), leasing=leasing,
                             local=local, clock_ms=clock_ms)
    return Gateway(local, leasing, answers)


def test_a_job_another_process_owns_gets_its_reply_as_is() -> None:
    others = Others(b"-NOT-FOUND\r\n")
    reply = asyncio.run(gateway(Engine(), others).handle(rq.Result(OWNED_ELSEWHERE, 0)))
    assert reply == b"-NOT-FOUND\r\n"
    assert others.asked == [("b:1", rq.Result(OWNED_ELSEWHERE, 0))]


def test_a_peer_gets_this_processs_own_answer_and_nothing_is_forwarded() -> None:
    engine, others = Engine(), Others(b"+OK\r\n")
    reply = asyncio.run(gateway(engine, others).handle(rq.Pause("q"), peer=True))
    assert reply == replies.ok()
    assert engine.written == [Pause("q")] and others.asked == []


def test_a_pause_holds_here_first_then_at_every_other_process() -> None:
    engine, others = Engine(), Others(b"+OK\r\n")
    assert asyncio.run(gateway(engine, others).handle(rq.Pause("q"))) == replies.ok()
    assert engine.written == [Pause("q")] and others.asked == [("b:1", rq.Pause("q"))]


def test_a_pause_that_fails_here_is_that_error_and_asks_nobody_else() -> None:
    error = NotWritten("eventq is starting: the Kafka producer is not ready yet; retry")
    engine, others = Engine(error), Others(b"+OK\r\n")
    assert asyncio.run(gateway(engine, others).handle(rq.Pause("q"))) == error.reply
    assert others.asked == []


def test_a_pause_another_process_fails_is_its_error_as_is() -> None:
    refused = b"-SERVER-ERROR the pause of q did not reach every partition\r\n"
    engine, others = Engine(), Others(refused)
    assert asyncio.run(gateway(engine, others).handle(rq.Resume("q"))) == refused
