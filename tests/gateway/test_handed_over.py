"""A command whose partition moved to another process before its writer applied it is
answered anyway (docs/architecture.md, "Abandoned commands"): the new owner applies it
and keeps the reply it would have sent, and the writer asks for it (``outcome``, peers
only) instead of telling its client "it may take effect"."""

from __future__ import annotations

import asyncio
import uuid

from eventq.core import encode_command
from eventq.core.commands import Add, command_key
from eventq.errors import PartitionMoved
from eventq.state.waiters import HANDED_OVER_REPLIES, Waiters
from support.memory_processes import Process, add, job_id, run, two_processes

MOVED = PartitionMoved("this eventq process lost the job's partition", 7, 1)


def test_a_kept_reply_is_given_at_once_or_when_applied_and_none_after_the_wait():
    async def scenario():
        waiters = Waiters()
        waiters.on_handed_over("a", 1, b"+OK\r\n")
        assert await waiters.handed_over_reply("a", 1, 0) == b"+OK\r\n"
        later = asyncio.create_task(waiters.handed_over_reply("a", 2, 5))
        await asyncio.sleep(0)
        waiters.on_handed_over("a", 2, b"-CLIENT-ERROR Duplicate job\r\n")
        assert await later == b"-CLIENT-ERROR Duplicate job\r\n"
        assert await waiters.handed_over_reply("b", 1, 0.01) is None  # another writer's
        assert not waiters._handed_waiting

    run(scenario())


def test_only_the_newest_replies_are_kept():
    waiters = Waiters()
    for n in range(HANDED_OVER_REPLIES + 5):
        waiters.on_handed_over("a", n, b"+OK\r\n")
    assert len(waiters.handed) == HANDED_OVER_REPLIES
    assert ("a", 4) not in waiters.handed and ("a", 5) in waiters.handed


def foreign_add(process: Process, job: uuid.UUID, request_id: int) -> None:
    """An add that process ``writer-1`` wrote as its request ``request_id``, in the log
    ``process`` applies (its partition moved here before the writer applied it)."""
    command = Add(job, "q", 60_000, 86_400_000, b"{}")
    record = encode_command(command, node="writer-1", request_id=request_id)
    log = process.engine.log
    log.append_commands(log.partition_of_key(command_key(command)), [record])


def test_the_new_owner_keeps_the_reply_of_a_command_another_process_wrote():
    async def scenario():
        process = Process()
        first, second = uuid.uuid4(), uuid.uuid4()
        foreign_add(process, first, 1)
        foreign_add(process, first, 2)  # the same id again: refused
        assert await process.handle(add(second, "q")) == b"+OK\r\n"  # its own: not kept
        await process.engine.driver.drain()
        assert dict(process.engine.waiters.handed) == {
            ("writer-1", 1): b"+OK\r\n",
            ("writer-1", 2): b"-CLIENT-ERROR Duplicate job\r\n",
        }
        asked = b"outcome writer-1 2 0\r\n"
        assert await process.handle(asked, peer=True) == b"+OK -CLIENT-ERROR Duplicate job\r\n"
        assert await process.handle(asked) == b"-CLIENT-ERROR Unknown command\r\n"
        assert await process.handle(b"outcome writer-1 3 0\r\n", peer=True) == b"-TIMEOUT\r\n"

    run(scenario())


def moved_on_submit(process: Process) -> None:
    async def submit(command, on_abandoned=None):
        raise MOVED

    process.engine.submit = submit  # type: ignore[method-assign]


def test_the_writer_answers_its_client_with_the_new_owners_reply():
    async def scenario():
        a, b = two_processes()
        moved_on_submit(a)
        b.engine.waiters.on_handed_over(a.engine.node, MOVED.request_id,
                                        b"-CLIENT-ERROR Duplicate job\r\n")
        mine = job_id(0, 1)  # partition 0: a's own, written and then moved
        assert await a.handle(add(mine, "q")) == b"-CLIENT-ERROR Duplicate job\r\n"

    run(scenario())


def test_without_the_new_owners_reply_the_client_hears_it_may_take_effect(monkeypatch):
    monkeypatch.setattr("eventq.gateway.cluster_answers.HANDED_OVER_WAIT_S", 0.3)

    async def scenario():
        a, _ = two_processes()
        moved_on_submit(a)
        assert await a.handle(add(job_id(0, 1), "q")) == MOVED.reply
        assert await a.handle(b"inspect queues 0 10\r\n") != MOVED.reply  # others as before

    run(scenario())


def test_a_run_whose_partition_moved_is_never_answered_by_another_process():
    async def scenario():
        a, b = two_processes()
        moved_on_submit(a)
        b.engine.waiters.on_handed_over(a.engine.node, MOVED.request_id, b"+OK\r\n")
        request = f"run {job_id(0, 1)} q 1000 0 2\r\n{{}}\r\n".encode()
        assert await a.handle(request) == MOVED.reply

    run(scenario())
