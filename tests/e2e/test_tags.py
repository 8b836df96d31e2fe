"""Tags (docs/workflows.md, "Tags") through live servers and brokers: jobs added and
scheduled with ``-tags`` on every partition are found by ``inspect tagged`` in created
order, in any state, until deleted, and a fold of the command log has them with their
tags and the server's digest; across three processes, any one of them lists every
process's tagged jobs merged in that order, page by page."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from eventq.client.raw import RawClient
from eventq.run.replay import derive_from_commands

pytestmark = pytest.mark.kafka

TTR, TTL = 60_000, 600_000
GAP_S = 0.004  # between adds: their broker times (created) differ, so their order is known


def run(coro):
    return asyncio.run(coro)


async def add(client: RawClient, job_id: uuid.UUID, name: str, tags: str = "",
              payload: bytes = b"p") -> None:
    flags = [f"-tags={tags}"] if tags else []
    client.send(["add", str(job_id), name, str(TTR), str(TTL), str(len(payload)), *flags],
                payload)
    await client._status()


async def tagged(client: RawClient, tag: str, offset: int = 0,
                 limit: int = 100) -> list[tuple[uuid.UUID, dict[str, bytes]]]:
    blocks = await client._inspect_many(["tagged", tag, str(offset), str(limit)])
    return [(uuid.UUID(head.split(" ")[0]), values) for head, values in blocks]


async def all_tagged(client: RawClient, tag: str, page: int) -> list[uuid.UUID]:
    """Every job with ``tag``, read ``page`` at a time."""
    found: list[uuid.UUID] = []
    while True:
        got = await tagged(client, tag, len(found), page)
        found += [job_id for job_id, _ in got]
        if len(got) < page:
            return found


def test_tagged_jobs_on_every_partition_are_listed_in_created_order_until_deleted(server):
    tag, other = f"nightly-{uuid.uuid4().hex[:8]}", f"etl-{uuid.uuid4().hex[:8]}"
    queue = f"tags-{time.monotonic_ns()}"

    async def scenario() -> None:
        async with await RawClient.connect(port=server.port) as client:
            ids = [uuid.uuid4() for _ in range(12)]  # over the server's 4 partitions
            for n, job_id in enumerate(ids):
                await add(client, job_id, queue, f"{tag},{other}" if n % 3 == 0 else tag)
                await asyncio.sleep(GAP_S)
            scheduled = uuid.uuid4()
            client.send(["schedule", str(scheduled), queue, str(TTR), str(TTL),
                         "2099-01-01T00:00:00Z", "1", f"-tags={other},{tag}"], b"s")
            await client._status()
            await add(client, uuid.uuid4(), queue)  # no tags: listed under none
            order = [*ids, scheduled]

            listed = await tagged(client, tag)
            assert [job_id for job_id, _ in listed] == order
            assert listed[0][1]["tags"] == f"{tag},{other}".encode()
            assert listed[1][1]["tags"] == tag.encode()
            assert listed[-1][1]["tags"] == f"{other},{tag}".encode()
            assert listed[-1][1]["time"] == b"2099-01-01T00:00:00Z"
            assert await all_tagged(client, tag, 5) == order
            assert [j for j, _ in await tagged(client, other)] == [*ids[::3], scheduled]
            assert await tagged(client, f"none-{uuid.uuid4().hex[:8]}") == []
            assert (await client.inspect_job(ids[1]))["tags"] == tag.encode()

            # leased and completed: still listed, now COMPLETED
            leased = await client.lease(queue, 5_000)
            assert leased.id == ids[0]
            await client.complete(leased.id, b"done")
            first = (await tagged(client, tag, 0, 1))[0]
            assert first[0] == ids[0] and first[1]["state"] == b"1"

            # deleted: gone from every tag it had
            await client.delete(ids[0])
            await client.delete(ids[3])
            assert await all_tagged(client, tag, 100) == [j for j in order if j not in ids[:4:3]]
            assert [j for j, _ in await tagged(client, other)] == [ids[6], ids[9], scheduled]

            # checks before state: a bad tag is refused, an add with one changes nothing
            client.send(["inspect", "tagged", "a,b", "0", "1"])
            with pytest.raises(Exception, match="Invalid Tags"):
                await client._status()
            client.send(["add", str(uuid.uuid4()), queue, "1", "1", "1", "-tags=a,a"], b"x")
            with pytest.raises(Exception, match="Invalid Tags"):
                await client._status()

            # a fold of the command log has the same jobs, tags and all, and digest
            derived = derive_from_commands(server.bootstrap, server.settings["commands-topic"])
            assert derived.jobs[ids[1]].tags == (tag,)
            assert derived.jobs[scheduled].tags == (other, tag)
            assert derived.digest() == await client.digest()

    run(scenario())


@pytest.mark.timeout(180)
def test_any_process_lists_every_processs_tagged_jobs_in_order(eventq_cluster):
    """Jobs on all six partitions of three processes, added through one: ``inspect
    tagged`` at each process merges the others' pages by (created time, id)."""
    tag = f"c-{uuid.uuid4().hex[:12]}"
    queue = f"tags-cluster-{time.monotonic_ns()}"

    async def scenario() -> None:
        clients = [await RawClient.connect(port=p.port) for p in eventq_cluster.processes]
        try:
            ids = [uuid.uuid4() for _ in range(18)]
            for job_id in ids:
                await add(clients[1], job_id, queue, tag)
                await asyncio.sleep(GAP_S)
            for client in clients:
                assert [j for j, _ in await tagged(client, tag)] == ids
                assert await all_tagged(client, tag, 4) == ids
                assert [j for j, _ in await tagged(client, tag, 7, 5)] == ids[7:12]
            await clients[2].delete(ids[5])
            for client in clients:
                assert await all_tagged(client, tag, 7) == ids[:5] + ids[6:]
        finally:
            for client in clients:
                await client.close()

    run(scenario())


def test_the_python_clients_add_schedule_and_inspect_tagged(server):
    """eventq.client: ``tags=`` on add and schedule, ``JobInfo.tags``, and
    ``inspect_tagged`` (sync and async), against the live server."""
    from eventq.client import AsyncClient, Client

    tag = f"py-{uuid.uuid4().hex[:8]}"
    queue = f"tags-client-{time.monotonic_ns()}"
    with Client(port=server.port) as client:
        first = client.add(queue, b"a", tags=[tag, "etl"])
        time.sleep(GAP_S)
        second = client.schedule(queue, b"b", "2099-01-01T00:00:00Z", tags=tag)
        plain = client.add(queue, b"c")
        listed = client.inspect_tagged(tag)
        assert [job.id for job in listed] == [first, second]
        assert listed[0].tags == (tag, "etl") and listed[1].tags == (tag,)
        assert listed[1].time == "2099-01-01T00:00:00Z"
        assert client.inspect_job(plain).tags == ()
        assert [job.id for job in client.inspect_tagged(tag, 1, 1)] == [second]

    async def from_async() -> list[uuid.UUID]:
        async with AsyncClient(port=server.port) as client:
            return [job.id for job in await client.inspect_tagged(tag)]

    assert run(from_async()) == [first, second]
