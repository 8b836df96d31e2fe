"""After a fault-campaign run: wait until bulk loads are admitted, then read back what
became of every job (``inspect job``, and ``result`` of a finished one)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable

from eventq.client.raw import RawClient
from eventq.errors import ClientError, EventqError, NotFound, ServerError, Timeout

from .history import FOUND, NOT_FOUND, UNKNOWN, Clock, ReadBack
from .load_base import RECONNECT_PAUSE_S, LoadClient, Session, is_out_of_step

# --- after the run --------------------------------------------------------------------


async def wait_bulk_admitted(port: int, timeout_s: float = 120.0, host: str = "127.0.0.1",
                             ) -> bool:
    """Until ``inspect bulk`` shows no backlog on any partition (a bulk's ok is Kafka's
    ack; its jobs exist only once admitted): True, or False at the timeout."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            async with asyncio.timeout(10):
                async with await RawClient.connect(host, port) as client:
                    partitions = await client.inspect_bulk()
            if all(p.get("backlog", 0) == 0 for p in partitions.values()):
                return True
        except (EventqError, OSError, EOFError, TimeoutError):
            pass
        await asyncio.sleep(0.5)
    return False


class _ReadBackProgress:
    """The read-back gives up once no definite answer came for ``give_up_after_s``."""

    def __init__(self, give_up_after_s: float) -> None:
        self.give_up_after_s = give_up_after_s
        self.last_answer = time.monotonic()

    def answered(self) -> None:
        self.last_answer = time.monotonic()

    def gave_up(self) -> bool:
        return time.monotonic() - self.last_answer > self.give_up_after_s


class _AskAgain(Exception):
    """No definite answer this time (a server error, a lost connection)."""


async def _read_one(client: LoadClient, job_id: str, clock: Clock,
                    op_timeout_s: float) -> ReadBack:
    at_s = clock.now()
    try:
        async with asyncio.timeout(op_timeout_s):
            fields = await client.inspect_job(job_id)
    except NotFound:
        return ReadBack(job_id, NOT_FOUND, at_s)
    except (ClientError, Timeout) as error:  # never for a valid id: say so, not guess
        return ReadBack(job_id, UNKNOWN, at_s, fields=(("error", error.reply),))
    pairs = tuple(fields.items())
    if int(fields["state"]) not in (1, 2):
        return ReadBack(job_id, FOUND, at_s, pairs)
    try:
        async with asyncio.timeout(op_timeout_s):
            result = await client.result(job_id, 0)
    except NotFound:  # gone between the two reads (TTL): the fields still stand
        return ReadBack(job_id, FOUND, at_s, pairs)
    return ReadBack(job_id, FOUND, at_s, pairs, result.success, result.result)


async def _read_back_worker(session: Session, ids: list[str], found: dict[str, ReadBack],
                            progress: _ReadBackProgress, clock: Clock,
                            op_timeout_s: float) -> None:
    while ids:
        job_id = ids.pop()
        while job_id not in found:
            if progress.gave_up():
                found[job_id] = ReadBack(job_id, UNKNOWN, clock.now())
                break
            client = await session.connected()
            if client is None:
                await asyncio.sleep(RECONNECT_PAUSE_S)
                continue
            try:
                found[job_id] = await _read_one(client, job_id, clock, op_timeout_s)
                progress.answered()
            except ServerError as error:
                if is_out_of_step(error):
                    session.drop()
                await asyncio.sleep(RECONNECT_PAUSE_S)  # recovering or moving: ask again
            except Exception:  # connection lost, timeout, garbled: reconnect, ask again
                session.drop()
                await asyncio.sleep(RECONNECT_PAUSE_S)


async def read_back(port: int, job_ids: Iterable[str], give_up_after_s: float = 60.0, *,
                    clock: Clock | None = None, host: str = "127.0.0.1",
                    connections: int = 8, op_timeout_s: float = 10.0,
                    ) -> dict[str, ReadBack]:
    """For every job id, ``inspect job`` (and ``result <id> 0`` when it is COMPLETED or
    FAILED) through one port, asking again on -SERVER-ERROR or a lost connection. Gives
    up (``unknown`` for the jobs left) once no definite answer came for
    ``give_up_after_s``, so a dead cluster costs that long once, not per job. Use the
    run's clock so ``at_s`` compares with the ops' times."""
    clock = clock or Clock()
    wanted = list(dict.fromkeys(job_ids))
    ids = wanted[::-1]  # pop() from the end: asked in order
    found: dict[str, ReadBack] = {}
    progress = _ReadBackProgress(give_up_after_s)
    sessions = [Session(host, port, lambda: not progress.gave_up())
                for _ in range(max(1, connections))]
    try:
        await asyncio.gather(*(_read_back_worker(s, ids, found, progress, clock, op_timeout_s)
                               for s in sessions))
    finally:
        for session in sessions:
            session.drop()
    return {job_id: found[job_id] for job_id in wanted}


__all__ = ["wait_bulk_admitted", "read_back"]
