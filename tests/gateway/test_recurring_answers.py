"""Recurring jobs through the gateway (docs/workflows.md, "Recurring jobs";
eventq/gateway/handlers.py, cluster_answers.py), over the memory processes of
tests/support/memory_processes.py: recur and unrecur answered once applied by the
owner of ``recur:<name>``'s partition (forwarded there from another process),
``inspect recurring`` merged across processes by name, and the dashboard's page of
recurrences with their next due time."""

from __future__ import annotations

from observe.test_dashboard_workflows import Tables, browse, dashboard_of

from eventq.core import recurrence_key
from eventq.core.commands import Fire
from eventq.core.partitioner import partition_for_key
from eventq.core.recurrence import slot_job_id
from eventq.protocol.reply_reader import parse_blocks
from support.memory_processes import PARTITIONS, START_MS, Process, run, two_processes

DAY = 86_400_000


def name_in(partition: int, n: int = 1) -> str:
    found = 0
    for i in range(1000):
        name = f"r{i}"
        if partition_for_key(recurrence_key(name), PARTITIONS) == partition:
            found += 1
            if found == n:
                return name
    raise AssertionError


def recur(name: str, every: int = DAY, flags: str = "") -> bytes:
    return f"recur {name} etl 60000 86400000 {every} 2{flags}\r\n{{}}\r\n".encode()


def test_recur_inspect_and_unrecur_on_one_process():
    process = Process()

    async def scenario():
        assert await process.handle(recur("nightly", flags=" -backoff=5")) == b"+OK\r\n"
        reply = await process.handle(b"inspect recurring 0 10\r\n")
        assert reply == (
            b"+OK 1\r\nnightly 12\r\nname etl\r\nttr 60000\r\nttl 86400000\r\n"
            b"every 86400000\r\npayload-size 2\r\npayload {}\r\nmax-attempts 0\r\n"
            b"max-fails 0\r\npriority 0\r\ncreated 2024-01-01T00:00:00Z\r\n"
            b"next 2024-01-01T00:00:00Z\r\nbackoff 5\r\n")
        assert await process.handle(b"inspect recurring 1 10\r\n") == b"+OK 0\r\n"
        # Due: a fire applied now adds the slot's job (the spec's example id).
        engine = process.engine
        engine.log.append_command(Fire("nightly", START_MS // DAY))
        await engine.driver.drain()
        job = slot_job_id("nightly", DAY, 19723)
        assert str(job) == "d2c902db-9ba1-4266-92d6-ba506aadfd75"
        reply = await process.handle(f"inspect job {job}\r\n".encode())
        assert reply.startswith(f"+OK 1\r\n{job} 12\r\nname etl\r\n".encode()), reply
        [block] = parse_blocks(await process.handle(b"inspect recurring 0 10\r\n"))
        assert block.value(b"next") == b"2024-01-02T00:00:00Z"
        assert await process.handle(b"unrecur nightly\r\n") == b"+OK\r\n"
        assert await process.handle(b"unrecur nightly\r\n") == b"-NOT-FOUND\r\n"
        assert await process.handle(b"inspect recurring 0 10\r\n") == b"+OK 0\r\n"
        # The slot's job stays.
        assert (await process.handle(f"inspect job {job}\r\n".encode())).startswith(b"+OK 1")

    run(scenario())


def test_a_recurrence_is_answered_by_its_partitions_owner_and_listed_by_every_process():
    a, b = two_processes()  # a owns partition 0, b partition 1
    in_a, in_b, also_b = name_in(0), name_in(1), name_in(1, 2)

    async def scenario():
        for name in (in_b, in_a, also_b):  # all through a
            assert await a.handle(recur(name)) == b"+OK\r\n"
        assert a.engine.index.recurrence_names() == [in_a]
        assert b.engine.index.recurrence_names() == sorted([in_b, also_b])
        expected = sorted([in_a, in_b, also_b])
        for process in (a, b):
            heads = [blk.head.decode() for blk in parse_blocks(
                await process.handle(b"inspect recurring 0 10\r\n"))]
            assert heads == expected
            page = parse_blocks(await process.handle(b"inspect recurring 1 1\r\n"))
            assert [blk.head.decode() for blk in page] == expected[1:2]
        # A peer's request is its own answer only.
        own = parse_blocks(await b.handle(b"inspect recurring 0 10\r\n", peer=True))
        assert [blk.head.decode() for blk in own] == sorted([in_b, also_b])
        assert await a.handle(f"unrecur {in_b}\r\n".encode()) == b"+OK\r\n"
        assert await a.handle(f"unrecur {in_b}\r\n".encode()) == b"-NOT-FOUND\r\n"
        assert b.engine.index.recurrence_names() == [also_b]

    run(scenario())


def test_the_dashboard_lists_recurrences_with_their_next_due_time():
    process = Process()

    async def scenario(get):
        status, page = await get("/recurring")
        assert status == 200 and "No recurring jobs" in page
        await process.handle(recur("nightly", flags=" -tags=a,b"))
        await process.handle(recur("often", every=90_000))
        status, page = await get("/recurring")
        rows = Tables(page).tables["recurring"]
        assert rows == [
            ["recurrence", "queue", "every", "next due", "defined", "tags", "payload"],
            ["nightly", "etl", "1 d", "2024-01-01T00:00:00Z", "2024-01-01T00:00:00Z", "a,b",
             "2 B"],
            ["often", "etl", "90 s", "2024-01-01T00:00:00Z", "2024-01-01T00:00:00Z", "", "2 B"],
        ]
        assert 'href="/recurring"' in page

    run(browse(dashboard_of(process), scenario))
