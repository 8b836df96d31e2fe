"""Where the processor meets the requests waiting on it (same process, same loop).

- ``pending``: a request's command, by request id, until the processor has applied it;
- ``finals``: ``result``/``run`` waiters of a job, until it is COMPLETED, FAILED or gone;
- ``ready``: ``lease`` waiters of a queue name, until a job there may be ready. One job
  becoming ready wakes one waiter, the longest waiting (waking all of them made every
  add cost O(waiters): 300 adds took 19 s of CPU with 2,000 blocked leases;
  docs/architecture.md, "Hostile inputs");
- ``handed``: the replies of commands another process wrote and lost the partition of
  before it applied them, applied here as the partition's new owner, for that process
  to ask for (``handed_over_reply``; docs/architecture.md, "Abandoned commands").

The processor calls the ``on_*`` methods after each applied command; the gateway awaits
futures. asyncio only: no Kafka, no faust.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Container, Iterable
from dataclasses import dataclass

from eventq.core import Job
from eventq.core.machine import Outcome

# The newest handed-over replies kept: the tail a process that lost its partitions had
# in flight is thousands of commands at most, asked for within seconds.
HANDED_OVER_REPLIES = 10_000


@dataclass(frozen=True, slots=True)
class Applied:
    """What became of a command: the outcome, the job after it (None if gone), and the
    command's log position (None when it was refused before it had one). A lease's
    give-back names its claim by that position (core.ReleaseAttempt)."""

    outcome: Outcome
    job: Job | None
    at: int | None = None


class Waiters:
    def __init__(self) -> None:
        self.pending: dict[int, asyncio.Future[Applied]] = {}
        self._partition_of: dict[int, int] = {}  # request id -> its command's partition
        self.finals: dict[uuid.UUID, set[asyncio.Future[Job | None]]] = defaultdict(set)
        # name -> waiting futures in arrival order (a dict as an ordered set)
        self.ready: dict[str, dict[asyncio.Future[None], None]] = defaultdict(dict)
        # (writer's node, its request id) -> the reply, oldest first
        self.handed: OrderedDict[tuple[str, int], bytes] = OrderedDict()
        self._handed_waiting: dict[tuple[str, int], set[asyncio.Future[bytes]]] = {}

    # --- processor side ---------------------------------------------------------------

    def on_applied(self, request_id: int, applied: Applied) -> None:
        self._partition_of.pop(request_id, None)
        future = self.pending.pop(request_id, None)
        if future is not None and not future.done():
            future.set_result(applied)

    def on_handed_over(self, node: str, request_id: int, reply: bytes) -> None:
        """Another process's command, applied here: its ``reply`` is kept for it."""
        key = (node, request_id)
        self.handed[key] = reply
        if len(self.handed) > HANDED_OVER_REPLIES:
            self.handed.popitem(last=False)
        for future in self._handed_waiting.pop(key, ()):
            if not future.done():
                future.set_result(reply)

    def on_final(self, job_id: uuid.UUID, job: Job | None) -> None:
        """A job became final (job) or left the table (None): every waiter hears it."""
        for future in self.finals.pop(job_id, ()):
            if not future.done():
                future.set_result(job)

    def on_ready(self, names: Iterable[str]) -> None:
        """A job may be ready in each of ``names`` (a name once per job): wake, for
        each, the longest-waiting lease of that name that is still waiting."""
        for name in names:
            waiting = self.ready.get(name)
            while waiting:
                future = next(iter(waiting))
                del waiting[future]
                if not future.done():
                    future.set_result(None)
                    break
            if waiting is not None and not waiting:
                del self.ready[name]

    # --- gateway side -----------------------------------------------------------------

    def wake_all(self, name: str) -> None:
        """Wake every lease waiting on ``name`` (a queue resumed: each looks again)."""
        for future in self.ready.pop(name, {}):
            if not future.done():
                future.set_result(None)

    def expect(self, request_id: int, partition: int | None = None) -> asyncio.Future[Applied]:
        future = asyncio.get_running_loop().create_future()
        self.pending[request_id] = future
        if partition is not None:
            self._partition_of[request_id] = partition
        return future

    def forget(self, request_id: int) -> None:
        self.pending.pop(request_id, None)
        self._partition_of.pop(request_id, None)

    def let_go(self, partitions: Container[int],
               error: Callable[[int, int], BaseException]) -> int:
        """``partitions`` left this process: the commands awaited there are applied by
        their new owner, never here, so each waiter gets ``error(request id,
        partition)`` now rather than at its deadline. How many there were."""
        lost = [(r, p) for r, p in self._partition_of.items() if p in partitions]
        for request_id, partition in lost:
            del self._partition_of[request_id]
            future = self.pending.pop(request_id, None)
            if future is not None and not future.done():
                future.set_exception(error(request_id, partition))
        return len(lost)

    async def handed_over_reply(self, node: str, request_id: int,
                                timeout_s: float) -> bytes | None:
        """The reply of process ``node``'s request ``request_id`` once applied here,
        waiting up to ``timeout_s`` for it; None if it was not applied here by then."""
        key = (node, request_id)
        reply = self.handed.get(key)
        if reply is not None:
            return reply
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        waiting = self._handed_waiting.setdefault(key, set())
        waiting.add(future)
        try:
            return await asyncio.wait_for(future, timeout_s)
        except TimeoutError:
            return None
        finally:
            waiting.discard(future)
            if not waiting and self._handed_waiting.get(key) is waiting:
                del self._handed_waiting[key]

    async def wait_final(
        self,
        job_id: uuid.UUID,
        timeout_s: float,
        current: Callable[[], tuple[bool, Job | None]],
    ) -> tuple[bool, Job | None]:
        """(True, job or None) once the job is final or gone; (False, None) on timeout.

        ``current`` tells whether it already is; it is asked after the waiter is
        registered, so a change applied in between cannot be missed.
        """
        future = asyncio.get_running_loop().create_future()
        self.finals[job_id].add(future)
        try:
            done, job = current()
            if done:
                return True, job
            async with asyncio.timeout(max(timeout_s, 0)):
                return True, await future
        except TimeoutError:
            return False, None
        finally:
            waiting = self.finals.get(job_id)
            if waiting is not None:
                waiting.discard(future)
                if not waiting:
                    del self.finals[job_id]

    async def wait_ready(
        self, names: Iterable[str], timeout_s: float, current: Callable[[], bool]
    ) -> bool:
        """True once a job may be ready in one of the names; False on timeout.

        ``current`` tells whether one already is (asked after registering)."""
        future = asyncio.get_running_loop().create_future()
        names = list(names)
        for name in names:
            self.ready[name][future] = None
        try:
            if current():
                return True
            async with asyncio.timeout(max(timeout_s, 0)):
                await future
            return True
        except TimeoutError:
            return False
        finally:
            for name in names:
                waiting = self.ready.get(name)
                if waiting is not None:
                    waiting.pop(future, None)
                    if not waiting:
                        del self.ready[name]
