"""Tags through the gateway (docs/workflows.md, "Tags", "Job and queue blocks"), byte
for byte, with no Kafka: ``-tags`` on add and schedule, the job block's ``tags`` key,
``inspect tagged`` from one process and merged across two through a real ``Cluster``
(tests/support/memory_processes.py), by created time then id, in any state, until delete
or TTL."""

from __future__ import annotations

import uuid

from eventq.core import Expire
from support.memory_processes import Process, add, finish, job_id, run, two_processes

A1, A2, A3, A4 = (job_id(0, n) for n in range(1, 5))
B1, B2, B3 = (job_id(1, n) for n in range(1, 4))


def block(id: uuid.UUID, name: str = "q", state: int = 0, tags: str = "", attempts: int = 0,
          created: str = "2024-01-01T00:00:00Z", time: str = "", ttl: int = 86400000) -> bytes:
    keys = 12 + bool(time) + bool(tags)
    return (
        f"{id} {keys}\r\nname {name}\r\nttr 60000\r\nttl {ttl}\r\npayload-size 2\r\n"
        f"payload {{}}\r\nmax-attempts 0\r\nattempts {attempts}\r\nmax-fails 0\r\nfails 0\r\n"
        f"priority 0\r\nstate {state}\r\ncreated {created}\r\n"
        + (f"time {time}\r\n" if time else "")
        + (f"tags {tags}\r\n" if tags else "")
    ).encode()


def tagged(tag: str, offset: int = 0, limit: int = 100) -> bytes:
    return f"inspect tagged {tag} {offset} {limit}\r\n".encode()


def ids_of(reply: bytes) -> list[uuid.UUID]:
    """The ids of a reply's job blocks, in order (payloads here are ``{}``)."""
    return [uuid.UUID(line.split(b" ")[0].decode()) for line in reply.split(b"\r\n")
            if line.count(b"-") == 4 and line.endswith((b" 12", b" 13", b" 14", b" 15"))]


# --- one process ------------------------------------------------------------------


def test_tags_show_in_the_job_block_and_a_job_without_keeps_workqs() -> None:
    async def scenario() -> None:
        p = Process()
        assert await p.handle(add(A1, "q", " -tags=nightly,etl")) == b"+OK\r\n"
        assert await p.handle(add(A2, "q")) == b"+OK\r\n"
        assert await p.handle(f"inspect job {A1}\r\n".encode()) == (
            b"+OK 1\r\n" + block(A1, tags="nightly,etl"))
        assert await p.handle(f"inspect job {A2}\r\n".encode()) == b"+OK 1\r\n" + block(A2)
        assert await p.handle(b"inspect jobs q 0 10\r\n") == (
            b"+OK 2\r\n" + block(A1, tags="nightly,etl") + block(A2))
        line = f"schedule {A3} q 60000 86400000 2024-01-02T00:00:00Z 2 -tags=etl -priority=1"
        assert await p.handle(line.encode() + b"\r\n{}\r\n") == b"+OK\r\n"
        assert (await p.handle(f"inspect job {A3}\r\n".encode())).endswith(
            b"priority 1\r\nstate 0\r\ncreated 2024-01-01T00:00:00Z\r\n"
            b"time 2024-01-02T00:00:00Z\r\ntags etl\r\n")

    run(scenario())


def test_the_spec_example_dependent_with_its_tags_line() -> None:
    """docs/workflows.md, "Dependencies": the WAITING dependent with 2 upstreams, one
    COMPLETED, tagged ``nightly``, byte for byte (15 keys)."""
    async def scenario() -> None:
        p = Process()
        await p.handle(add(A1, "extract"))
        await p.handle(add(A2, "extract"))
        assert await p.handle(add(A3, "etl", f" -after={A1},{A2} -tags=nightly")) == b"+OK\r\n"
        await finish(p, "extract", "complete", b"r1")
        expected = (
            b"+OK 1\r\n" + f"{A3} 15\r\n".encode()
            + b"name etl\r\nttr 60000\r\nttl 86400000\r\npayload-size 2\r\npayload {}\r\n"
            b"max-attempts 0\r\nattempts 0\r\nmax-fails 0\r\nfails 0\r\npriority 0\r\n"
            b"state 5\r\ncreated 2024-01-01T00:00:00Z\r\nafter 2\r\nwaiting 1\r\n"
            b"tags nightly\r\n")
        assert await p.handle(f"inspect job {A3}\r\n".encode()) == expected
        assert await p.handle(tagged("nightly")) == expected

    run(scenario())


def test_inspect_tagged_lists_live_jobs_in_any_state_by_created_time_then_id() -> None:
    async def scenario() -> None:
        p = Process()
        # A2 and A1 in the same millisecond: by id; A3 a second later, then A4
        first, second = sorted((A1, A2), key=lambda u: u.bytes)
        assert await p.handle(add(second, "q", " -tags=t")) == b"+OK\r\n"
        assert await p.handle(add(first, "q", " -tags=u,t")) == b"+OK\r\n"
        p.engine.log.advance(1000)
        assert await p.handle(add(A3, "work", " -tags=t")) == b"+OK\r\n"
        p.engine.log.advance(1000)
        assert await p.handle(add(A4, "q")) == b"+OK\r\n"  # no tags: listed nowhere
        assert ids_of(await p.handle(tagged("t"))) == [first, second, A3]
        assert ids_of(await p.handle(tagged("u"))) == [first]
        # leased, then completed: still listed, with its state
        await finish(p, "work", "complete", b"done")
        page = await p.handle(tagged("t", 2, 1))
        assert page == b"+OK 1\r\n" + block(A3, "work", state=1, tags="t", attempts=1,
                                            created="2024-01-01T00:00:01Z")
        assert ids_of(await p.handle(tagged("t", 1, 1))) == [second]
        assert await p.handle(tagged("t", 3, 10)) == b"+OK 0\r\n"
        assert await p.handle(tagged("nosuch")) == b"+OK 0\r\n"
        # gone with delete
        assert await p.handle(f"delete {first}\r\n".encode()) == b"+OK\r\n"
        assert ids_of(await p.handle(tagged("t"))) == [second, A3]
        assert await p.handle(tagged("u")) == b"+OK 0\r\n"

    run(scenario())


def test_a_tagged_job_is_gone_from_its_tags_when_its_ttl_evicts_it() -> None:
    async def scenario() -> None:
        p = Process()
        assert await p.handle(
            f"add {A1} q 60000 1000 2 -tags=short\r\n{{}}\r\n".encode()) == b"+OK\r\n"
        assert ids_of(await p.handle(tagged("short"))) == [A1]
        p.engine.log.advance(1000)
        p.engine.log.append_command(Expire(A1))  # what the timer writes at the TTL
        await p.engine.driver.drain()
        assert await p.handle(f"inspect job {A1}\r\n".encode()) == b"-NOT-FOUND\r\n"
        assert await p.handle(tagged("short")) == b"+OK 0\r\n"

    run(scenario())


def test_a_rejected_add_changes_no_tag() -> None:
    async def scenario() -> None:
        p = Process()
        assert await p.handle(add(A1, "q", " -tags=a")) == b"+OK\r\n"
        assert await p.handle(add(A1, "q", " -tags=b")) == b"-CLIENT-ERROR Duplicate job\r\n"
        assert await p.handle(tagged("b")) == b"+OK 0\r\n"
        assert ids_of(await p.handle(tagged("a"))) == [A1]

    run(scenario())


# --- two processes ----------------------------------------------------------------


def test_inspect_tagged_merges_every_processs_jobs_by_created_time_then_id() -> None:
    async def scenario() -> None:
        a, b = two_processes()
        order = []
        # one job each millisecond, alternating the processes that own them; B1 and
        # A3 in the same millisecond (ordered by id)
        for job in (A1, B1, A2, B2):
            assert await a.handle(add(job, "q", " -tags=t")) == b"+OK\r\n"
            order.append(job)
            a.engine.log.advance(1)
            b.engine.log.advance(1)
        assert await b.handle(add(A3, "q", " -tags=t")) == b"+OK\r\n"
        assert await b.handle(add(B3, "q", " -tags=t")) == b"+OK\r\n"
        order += sorted((A3, B3), key=lambda u: u.bytes)
        for p in (a, b):
            assert ids_of(await p.handle(tagged("t"))) == order
            for offset in range(len(order) + 1):
                for limit in (1, 2, 4):
                    assert ids_of(await p.handle(tagged("t", offset, limit))) == (
                        order[offset:offset + limit])
            assert await p.handle(tagged("none")) == b"+OK 0\r\n"
        # each process alone holds its own part: the peer form merges them
        assert ids_of(await a.handle(tagged("t"), peer=True)) == [
            job for job in order if job in (A1, A2, A3)]
        # the merged blocks are the blocks: no order key left
        whole = await a.handle(tagged("t", 1, 1))
        assert whole == b"+OK 1\r\n" + block(B1, tags="t")  # created 1 ms in: shown in seconds
        # a deleted job leaves the merged list
        assert await b.handle(f"delete {B2}\r\n".encode()) == b"+OK\r\n"
        assert ids_of(await a.handle(tagged("t"))) == [job for job in order if job != B2]

    run(scenario())
