"""Workflow sections 1 and 2 through the gateway (docs/workflows.md, "Dependencies",
"Inputs", "Job and queue blocks"), byte for byte, with no Kafka: each process is a
``Gateway`` over the processor of streams/memory.py, alone or two of them through a real
``Cluster`` (tests/support/memory_processes.py)."""

from __future__ import annotations

import uuid

from support.memory_processes import Process, add, finish, job_id, run, two_processes

U1, U2, D, PLAIN, SCHED = (job_id(0, n) for n in range(1, 6))
UB, DB = job_id(1, 1), job_id(1, 2)


def waiting_block(id: uuid.UUID, waiting: int, state: int = 5, time: str = "") -> bytes:
    """The spec's example dependent (name etl, 2 upstreams), without its tags line."""
    keys = 14 + (1 if time else 0)
    return (
        f"{id} {keys}\r\nname etl\r\nttr 60000\r\nttl 86400000\r\npayload-size 2\r\n"
        f"payload {{}}\r\nmax-attempts 0\r\nattempts 0\r\nmax-fails 0\r\nfails 0\r\n"
        f"priority 0\r\nstate {state}\r\ncreated 2024-01-01T00:00:00Z\r\n"
        + (f"time {time}\r\n" if time else "")
        + f"after 2\r\nwaiting {waiting}\r\n"
    ).encode()


# --- one process ------------------------------------------------------------------


def test_a_dependent_waits_shows_its_upstreams_and_is_released_by_the_last() -> None:
    async def scenario() -> None:
        p = Process()
        assert await p.handle(add(U1, "extract")) == b"+OK\r\n"
        assert await p.handle(add(U2, "extract")) == b"+OK\r\n"
        assert await p.handle(add(D, "etl", f" -after={U1},{U2}")) == b"+OK\r\n"
        inspect_d = f"inspect job {D}\r\n".encode()
        assert await p.handle(inspect_d) == b"+OK 1\r\n" + waiting_block(D, 2)

        await finish(p, "extract", "complete", b"r1")
        # The example of docs/workflows.md, "Job and queue blocks": a WAITING dependent of
        # 2 upstreams, one COMPLETED
        assert await p.handle(inspect_d) == (
            b"+OK 1\r\n" + f"{D} 14\r\n".encode()
            + b"name etl\r\nttr 60000\r\nttl 86400000\r\npayload-size 2\r\npayload {}\r\n"
            b"max-attempts 0\r\nattempts 0\r\nmax-fails 0\r\nfails 0\r\npriority 0\r\n"
            b"state 5\r\ncreated 2024-01-01T00:00:00Z\r\nafter 2\r\nwaiting 1\r\n")
        assert await p.handle(b"inspect queue etl\r\n") == (
            b"+OK 1\r\netl 3\r\nready-len 0\r\nscheduled-len 0\r\nwaiting-len 1\r\n")
        assert await p.handle(b"inspect queues 0 10\r\n") == (
            b"+OK 2\r\netl 3\r\nready-len 0\r\nscheduled-len 0\r\nwaiting-len 1\r\n"
            b"extract 2\r\nready-len 1\r\nscheduled-len 0\r\n")
        assert await p.handle(b"inspect jobs etl 0 10\r\n") == b"+OK 0\r\n"
        assert await p.handle(b"inspect scheduled-jobs etl 0 10\r\n") == b"+OK 0\r\n"
        assert await p.handle(b"inspect waiting-jobs etl 0 10\r\n") == (
            b"+OK 1\r\n" + waiting_block(D, 1))
        assert await p.handle(b"inspect waiting-jobs etl 1 10\r\n") == b"+OK 0\r\n"
        assert await p.handle(b"inspect waiting-jobs extract 0 10\r\n") == b"+OK 0\r\n"
        assert await p.handle(f"inputs {D}\r\n".encode()) == f"+OK 1\r\n{U1} 1 2\r\nr1\r\n".encode()

        p.engine.log.advance(5000)
        await finish(p, "extract", "complete", b"result two")
        released = "2024-01-01T00:00:05Z"  # the last upstream's complete
        assert await p.handle(inspect_d) == (
            b"+OK 1\r\n" + waiting_block(D, 0, state=0, time=released))
        assert await p.handle(b"inspect queue etl\r\n") == (
            b"+OK 1\r\netl 2\r\nready-len 1\r\nscheduled-len 0\r\n")
        assert await p.handle(b"inspect waiting-jobs etl 0 10\r\n") == b"+OK 0\r\n"
        assert await p.handle(b"inspect jobs etl 0 10\r\n") == (
            b"+OK 1\r\n" + waiting_block(D, 0, state=0, time=released))
        assert await p.handle(f"inputs {D}\r\n".encode()) == (
            f"+OK 2\r\n{U1} 1 2\r\nr1\r\n{U2} 1 10\r\nresult two\r\n".encode())

    run(scenario())


def test_a_failed_upstream_is_an_input_with_0_and_fails_its_dependent() -> None:
    async def scenario() -> None:
        p = Process()
        await p.handle(add(U1, "extract", " -max-fails=1"))
        await p.handle(add(U2, "extract"))
        assert await p.handle(add(D, "etl", f" -after={U2},{U1}")) == b"+OK\r\n"
        await finish(p, "extract", "fail", b"bad")  # U1 first: added first
        assert await p.handle(f"inputs {D}\r\n".encode()) == f"+OK 1\r\n{U1} 0 3\r\nbad\r\n".encode()
        block = await p.handle(f"inspect job {D}\r\n".encode())
        # FAILED in upstream-failed (docs/workflows.md, "Failure groups and retry")
        assert b"state 2\r\n" in block and block.endswith(
            b"after 2\r\nwaiting 2\r\ngroup upstream-failed\r\n")
        assert await p.handle(b"inspect queue etl\r\n") == (
            b"+OK 1\r\netl 2\r\nready-len 0\r\nscheduled-len 0\r\n")

    run(scenario())


def test_a_scheduled_dependent_keeps_its_time_and_upstreams() -> None:
    async def scenario() -> None:
        p = Process()
        line = f"schedule {SCHED} etl 60000 86400000 2024-01-02T00:00:00Z 2 -after={U1},{U2}"
        assert await p.handle(line.encode() + b"\r\n{}\r\n") == b"+OK\r\n"
        assert await p.handle(f"inspect job {SCHED}\r\n".encode()) == (
            b"+OK 1\r\n" + waiting_block(SCHED, 2, time="2024-01-02T00:00:00Z"))
        assert await p.handle(b"inspect scheduled-jobs etl 0 10\r\n") == b"+OK 0\r\n"
        assert await p.handle(b"inspect waiting-jobs etl 0 10\r\n") == (
            b"+OK 1\r\n" + waiting_block(SCHED, 2, time="2024-01-02T00:00:00Z"))
        assert await p.handle(f"inputs {SCHED}\r\n".encode()) == b"+OK 0\r\n"

    run(scenario())


def test_jobs_without_upstreams_keep_workqs_blocks_and_have_no_inputs() -> None:
    async def scenario() -> None:
        p = Process()
        assert await p.handle(add(PLAIN, "q")) == b"+OK\r\n"
        assert await p.handle(f"inspect job {PLAIN}\r\n".encode()) == (
            f"+OK 1\r\n{PLAIN} 12\r\n".encode()
            + b"name q\r\nttr 60000\r\nttl 86400000\r\npayload-size 2\r\npayload {}\r\n"
            b"max-attempts 0\r\nattempts 0\r\nmax-fails 0\r\nfails 0\r\npriority 0\r\n"
            b"state 0\r\ncreated 2024-01-01T00:00:00Z\r\n")
        assert await p.handle(b"inspect queue q\r\n") == (
            b"+OK 1\r\nq 2\r\nready-len 1\r\nscheduled-len 0\r\n")
        assert await p.handle(f"inputs {PLAIN}\r\n".encode()) == b"+OK 0\r\n"
        assert await p.handle(f"inputs {D}\r\n".encode()) == b"-NOT-FOUND\r\n"
        assert await p.handle(b"inspect waiting-jobs nosuch 0 10\r\n") == b"-NOT-FOUND\r\n"

    run(scenario())


def edges(id: uuid.UUID, limit: int = 100) -> bytes:
    return f"edges {id} {limit}\r\n".encode()


def test_edges_are_a_jobs_upstreams_with_outcomes_then_its_registered_dependents() -> None:
    """edges (internal, the dashboard's job page): upstreams from the job's record in
    -after order, dependents from the registrations under its id, in id order; an absent
    job has no upstreams and still the dependents waiting for it."""
    async def scenario() -> None:
        p = Process()
        await p.handle(add(U1, "extract"))
        await p.handle(add(D, "etl", f" -after={U1},{U2}"))  # U2 is never added
        await p.handle(add(SCHED, "etl", f" -after={U1}"))
        assert await p.handle(edges(D)) == (
            f"+OK 2\r\nupstream {U1} unfinished\r\nupstream {U2} unfinished\r\n".encode())
        first, second = sorted([D, SCHED])
        assert await p.handle(edges(U1)) == (
            f"+OK 2\r\ndependent {first}\r\ndependent {second}\r\n".encode())
        assert await p.handle(edges(U1, 1)) == f"+OK 1\r\ndependent {first}\r\n".encode()
        assert await p.handle(edges(U2)) == f"+OK 1\r\ndependent {D}\r\n".encode()
        assert await p.handle(edges(PLAIN)) == b"+OK 0\r\n"

        await finish(p, "extract", "complete", b"r1")
        assert await p.handle(edges(D)) == (
            f"+OK 2\r\nupstream {U1} completed\r\nupstream {U2} unfinished\r\n".encode())
        assert await p.handle(f"delete {U1}\r\n".encode()) == b"+OK\r\n"
        # a removed upstream's registrations go with it; its dependent keeps the outcome
        assert await p.handle(edges(U1)) == b"+OK 0\r\n"
        assert await p.handle(edges(SCHED)) == f"+OK 1\r\nupstream {U1} completed\r\n".encode()

    run(scenario())


# --- two processes ----------------------------------------------------------------


def test_across_processes_waiting_is_summed_merged_and_inputs_forwarded() -> None:
    async def scenario() -> None:
        a, b = two_processes()
        # Each process's log holds only what it was sent, so a depend between them
        # never arrives (DB waits for U1 as for an absent upstream); every request
        # goes to a, which forwards b's jobs' to b.
        assert await a.handle(add(U1, "extract")) == b"+OK\r\n"
        assert await a.handle(add(D, "etl", f" -after={U1},{U2}")) == b"+OK\r\n"
        b.engine.log.advance(1000)
        assert await a.handle(add(UB, "other")) == b"+OK\r\n"
        assert await a.handle(add(DB, "etl", f" -after={UB},{U1}")) == b"+OK\r\n"
        assert b.engine.job(DB) is not None and a.engine.job(DB) is None

        assert await a.handle(b"inspect queue etl\r\n") == (
            b"+OK 1\r\netl 3\r\nready-len 0\r\nscheduled-len 0\r\nwaiting-len 2\r\n")
        assert await a.handle(b"inspect queue other\r\n") == (
            b"+OK 1\r\nother 2\r\nready-len 1\r\nscheduled-len 0\r\n")
        assert await a.handle(b"inspect queues 0 10\r\n") == (
            b"+OK 3\r\netl 3\r\nready-len 0\r\nscheduled-len 0\r\nwaiting-len 2\r\n"
            b"extract 2\r\nready-len 1\r\nscheduled-len 0\r\n"
            b"other 2\r\nready-len 1\r\nscheduled-len 0\r\n")

        # lease order: the same keys in every process (DB was added a second later)
        keys = sorted(a.engine.index.waiting_page_keys("etl", 0, 10)
                      + b.engine.index.waiting_page_keys("etl", 0, 10))
        assert [job for _, job in keys] == [D, DB]
        db_block = (await a.handle(f"inspect job {DB}\r\n".encode()))[len(b"+OK 1\r\n"):]
        assert db_block.endswith(b"created 2024-01-01T00:00:01Z\r\nafter 2\r\nwaiting 2\r\n")
        assert await a.handle(b"inspect waiting-jobs etl 0 10\r\n") == (
            b"+OK 2\r\n" + waiting_block(D, 2) + db_block)
        assert await a.handle(b"inspect waiting-jobs etl 1 1\r\n") == b"+OK 1\r\n" + db_block
        assert await a.handle(b"inspect waiting-jobs other 0 10\r\n") == b"+OK 0\r\n"
        assert await a.handle(b"inspect waiting-jobs nosuch 0 10\r\n") == b"-NOT-FOUND\r\n"

        await finish(b, "other", "complete", b"from b")
        assert await a.handle(f"inputs {DB}\r\n".encode()) == (
            f"+OK 1\r\n{UB} 1 6\r\nfrom b\r\n".encode())
        assert await a.handle(f"inputs {D}\r\n".encode()) == b"+OK 0\r\n"
        assert await a.handle(f"inputs {job_id(1, 9)}\r\n".encode()) == b"-NOT-FOUND\r\n"
        assert await a.handle(b"inspect queue etl\r\n") == (
            b"+OK 1\r\netl 3\r\nready-len 0\r\nscheduled-len 0\r\nwaiting-len 2\r\n")

        # edges are the owner's: a forwards them for b's jobs
        assert await a.handle(edges(DB)) == (
            f"+OK 2\r\nupstream {UB} completed\r\nupstream {U1} unfinished\r\n".encode())
        assert await a.handle(edges(UB)) == f"+OK 1\r\ndependent {DB}\r\n".encode()
        assert await a.handle(edges(U1)) == f"+OK 1\r\ndependent {D}\r\n".encode()

    run(scenario())
