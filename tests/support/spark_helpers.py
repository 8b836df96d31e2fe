"""Helpers of the Spark tests (importable as ``spark.spark_helpers``)."""

from __future__ import annotations

import asyncio
import time
import uuid


def partition_sentinels(partitions: int) -> list[uuid.UUID]:
    """One version-4 id per partition of the command topic."""
    from eventq.core.partitioner import partition_for_key

    found: dict[int, uuid.UUID] = {}
    while len(found) < partitions:
        job_id = uuid.uuid4()
        found.setdefault(partition_for_key(str(job_id).encode(), partitions), job_id)
    return [found[p] for p in range(partitions)]


async def wait_applied(client, partitions: int, timeout_s: float = 300.0) -> None:
    """Return once the server has applied every command written to the command log
    before the call (not the bulk lane: its records are admitted later).

    Each partition is applied in log order, so once an add written after them to every
    partition is applied, so are they. The gateway answers an add only once applied, or
    after its write timeout (-SERVER-ERROR) while the processor is still catching up;
    then the add is looked for until it shows."""
    from eventq.errors import NotFound, ServerError

    for job_id in partition_sentinels(partitions):
        try:
            await client.add(job_id, "sentinel", 1000, 600_000, b"")
        except ServerError:  # in the log, not applied yet

            async def applied() -> bool:
                try:
                    await client.inspect_job(job_id)
                    return True
                except NotFound:
                    return False

            await wait_until(applied, timeout_s, f"sentinel {job_id} to be applied", 1.0)
        await client.delete(job_id)


async def wait_until(predicate, timeout_s: float, what: str, every_s: float = 0.5):
    deadline = time.monotonic() + timeout_s
    while True:
        value = await predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout_s}s waiting for {what}"
        await asyncio.sleep(every_s)


async def queue_lengths(client, name: str) -> dict[str, int]:
    """``inspect queue`` of ``name``; zeros while the queue is unknown (nothing applied)."""
    from eventq.errors import NotFound

    try:
        return await client.inspect_queue(name)
    except NotFound:
        return {"ready-len": 0, "scheduled-len": 0}
