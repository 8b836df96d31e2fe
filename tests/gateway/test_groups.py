"""Failure groups and retry through the gateway (docs/workflows.md, "Failure groups and retry"),
byte for byte, with no Kafka: each process is a ``Gateway`` over the
processor of streams/memory.py, alone or two of them through a real ``Cluster``
(tests/support/memory_processes.py)."""

from __future__ import annotations

import uuid

from support.memory_processes import Process, add, job_id, run, two_processes

A, B, C, D = (job_id(0, n) for n in range(1, 5))
E, F = job_id(1, 1), job_id(1, 2)


async def fail(p: Process, id: uuid.UUID, flags: str = "", result: bytes = b"no") -> bytes:
    return await p.handle(f"fail {id} {len(result)}{flags}\r\n".encode() + result + b"\r\n")


def failed_block(id: uuid.UUID, group: str = "", result_fails: int = 1) -> bytes:
    keys = 12 + (1 if group else 0)
    return (
        f"{id} {keys}\r\nname q\r\nttr 60000\r\nttl 86400000\r\npayload-size 2\r\n"
        f"payload {{}}\r\nmax-attempts 0\r\nattempts 0\r\nmax-fails 0\r\nfails {result_fails}\r\n"
        f"priority 0\r\nstate 2\r\ncreated 2024-01-01T00:00:00Z\r\n"
        + (f"group {group}\r\n" if group else "")
    ).encode()


def test_groups_are_listed_counted_and_their_jobs_oldest_failure_first() -> None:
    async def scenario() -> None:
        p = Process()
        for id in (A, B, C, D):
            assert await p.handle(add(id, "q")) == b"+OK\r\n"
        assert await p.handle(b"inspect failed 0 10\r\n") == b"+OK 0\r\n"
        assert await fail(p, B, " -group=deploy-7") == b"+OK\r\n"
        p.engine.log.advance(1000)
        assert await fail(p, A, " -group=deploy-7") == b"+OK\r\n"
        assert await fail(p, C) == b"+OK\r\n"
        assert await fail(p, A) == b"-CLIENT-ERROR Duplicate result\r\n"
        assert await fail(p, uuid.UUID(int=A.int ^ 1 << 70)) == b"-NOT-FOUND\r\n"
        assert await p.handle(b"inspect failed 0 10\r\n") == (
            b"+OK 2\r\ndeploy-7 1\r\nfailed-len 2\r\nfailed 1\r\nfailed-len 1\r\n")
        assert await p.handle(b"inspect failed 1 1\r\n") == b"+OK 1\r\nfailed 1\r\nfailed-len 1\r\n"
        assert await p.handle(b"inspect failed 2 10\r\n") == b"+OK 0\r\n"
        # oldest failure first: B failed a second before A
        assert await p.handle(b"inspect failed-jobs deploy-7 0 10\r\n") == (
            b"+OK 2\r\n" + failed_block(B, "deploy-7") + failed_block(A, "deploy-7"))
        assert await p.handle(b"inspect failed-jobs deploy-7 1 1\r\n") == (
            b"+OK 1\r\n" + failed_block(A, "deploy-7"))
        assert await p.handle(b"inspect failed-jobs failed 0 10\r\n") == (
            b"+OK 1\r\n" + failed_block(C))  # workq's block: no group key
        assert await p.handle(b"inspect failed-jobs nope 0 10\r\n") == b"+OK 0\r\n"
        assert await p.handle(f"inspect job {C}\r\n".encode()) == b"+OK 1\r\n" + failed_block(C)

    run(scenario())


def test_retry_revives_a_failed_job_under_its_id_and_nothing_else() -> None:
    async def scenario() -> None:
        p = Process()
        await p.handle(add(A, "q"))
        await p.handle(add(B, "q"))
        assert await p.handle(f"retry {A}\r\n".encode()) == b"-NOT-FOUND\r\n"  # NEW
        assert await p.handle(f"retry {C}\r\n".encode()) == b"-NOT-FOUND\r\n"  # absent
        await fail(p, A, " -group=g")
        assert await p.handle(f"retry {A}\r\n".encode()) == b"+OK\r\n"
        assert await p.handle(f"retry {A}\r\n".encode()) == b"-NOT-FOUND\r\n"  # NEW again
        assert await p.handle(b"inspect failed 0 10\r\n") == b"+OK 0\r\n"
        block = (await p.handle(f"inspect job {A}\r\n".encode())).decode()
        assert "state 0\r\n" in block and "fails 0\r\n" in block and "group" not in block
        assert await p.handle(b"inspect jobs q 0 10\r\n") == (
            await p.handle(b"inspect jobs q 0 10\r\n"))
        leased = await p.handle(b"lease q 0\r\n")
        assert str(A).encode() in leased  # first in lease order again, under its id
        # with a delay: scheduled until then
        await fail(p, B)
        assert await p.handle(f"retry {B} -delay=5000\r\n".encode()) == b"+OK\r\n"
        assert str(B).encode() in await p.handle(b"inspect scheduled-jobs q 0 10\r\n")

    run(scenario())


def test_retry_group_retries_the_oldest_and_counts_them() -> None:
    async def scenario() -> None:
        p = Process()
        for id in (A, B, C, D):
            await p.handle(add(id, "q"))
        for id in (D, C, B):
            await fail(p, id, " -group=g")
            p.engine.log.advance(10)
        assert await p.handle(b"retry-group g 2\r\n") == b"+OK 1\r\nretried 2\r\n"
        assert await p.handle(b"inspect failed-jobs g 0 10\r\n") == (
            b"+OK 1\r\n" + failed_block(B, "g"))
        assert await p.handle(b"retry-group g 10000\r\n") == b"+OK 1\r\nretried 1\r\n"
        assert await p.handle(b"retry-group g 1\r\n") == b"+OK 1\r\nretried 0\r\n"
        assert await p.handle(b"retry-group nope 1\r\n") == b"+OK 1\r\nretried 0\r\n"
        assert await p.handle(b"inspect queue q\r\n") == (
            b"+OK 1\r\nq 2\r\nready-len 4\r\nscheduled-len 0\r\n")

    run(scenario())


def test_a_dependent_failed_because_of_a_retried_upstream_comes_back_and_runs() -> None:
    async def scenario() -> None:
        p = Process()
        await p.handle(add(A, "up"))
        await p.handle(add(B, "down", f" -after={A}"))
        await fail(p, A)
        block = (await p.handle(f"inspect job {B}\r\n".encode())).decode()
        assert "state 2\r\n" in block and block.endswith("group upstream-failed\r\n")
        assert await p.handle(b"inspect failed 0 10\r\n") == (
            b"+OK 2\r\nfailed 1\r\nfailed-len 1\r\nupstream-failed 1\r\nfailed-len 1\r\n")
        assert await p.handle(b"retry-group failed 10\r\n") == b"+OK 1\r\nretried 1\r\n"
        block = (await p.handle(f"inspect job {B}\r\n".encode())).decode()
        assert "state 5\r\n" in block and "group" not in block
        assert await p.handle(b"inspect failed 0 10\r\n") == b"+OK 0\r\n"
        leased = await p.handle(b"lease up 0\r\n")
        assert str(A).encode() in leased
        assert await p.handle(f"complete {A} 2\r\nok\r\n".encode()) == b"+OK\r\n"
        assert str(B).encode() in await p.handle(b"lease down 0\r\n")

    run(scenario())


def test_across_processes_groups_are_summed_merged_and_retried_where_they_are() -> None:
    async def scenario() -> None:
        a, b = two_processes()
        for id in (A, B, E, F):
            assert await a.handle(add(id, "q")) == b"+OK\r\n"
        for p in (a, b):  # both clocks move: failure times interleave across processes
            p.engine.log.advance(100)
        assert await fail(b, E, " -group=g") == b"+OK\r\n"
        for p in (a, b):
            p.engine.log.advance(100)
        assert await fail(a, A, " -group=g") == b"+OK\r\n"
        for p in (a, b):
            p.engine.log.advance(100)
        assert await fail(a, F, " -group=g") == b"+OK\r\n"
        assert await fail(a, B) == b"+OK\r\n"
        for p in (a, b):
            assert await p.handle(b"inspect failed 0 10\r\n") == (
                b"+OK 2\r\nfailed 1\r\nfailed-len 1\r\ng 1\r\nfailed-len 3\r\n")
            page = await p.handle(b"inspect failed-jobs g 0 10\r\n")
            assert page.startswith(b"+OK 3\r\n")
            order = [page.index(str(id).encode()) for id in (E, A, F)]
            assert order == sorted(order)  # oldest failure first, across processes
        assert await b.handle(b"retry-group g 2\r\n") == b"+OK 1\r\nretried 2\r\n"
        remaining = await a.handle(b"inspect failed-jobs g 0 10\r\n")
        assert remaining.startswith(b"+OK 1\r\n") and str(F).encode() in remaining
        assert await a.handle(f"retry {F}\r\n".encode()) == b"+OK\r\n"  # forwarded to b
        assert await a.handle(b"inspect failed 0 10\r\n") == b"+OK 1\r\nfailed 1\r\nfailed-len 1\r\n"

    run(scenario())
