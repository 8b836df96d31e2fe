"""At most one expensive computation at a time, however many clients ask for it.

`inspect digest` hashes every job (O(jobs): 0.2 s at 10,000 jobs, about 30 s at a
million). Each request used to start its own computation, so clients asking often
(the fuzzer asks once per ~60 inputs) piled them up: at 10,000 jobs two thirds of the
server's CPU went to digests and input throughput fell from 2,200/s to 860/s
(docs/architecture.md, "Hostile inputs").
Now one runs at a time, and every caller gets a result computed after it asked (so a
client's own writes are included), shared with whoever asked meanwhile.
"""

from __future__ import annotations

import asyncio
from typing import Awaitable, Callable, Generic, TypeVar

T = TypeVar("T")


class Coalesced(Generic[T]):
    def __init__(self, compute: Callable[[], Awaitable[T]]) -> None:
        self._compute = compute
        self._next: asyncio.Future[T] | None = None  # the run that starts next
        self._running = False
        self.runs = 0

    async def __call__(self) -> T:
        if self._next is None:
            self._next = asyncio.get_running_loop().create_future()
            if not self._running:
                self._running = True
                asyncio.get_running_loop().create_task(self._run())
        return await asyncio.shield(self._next)

    async def _run(self) -> None:
        try:
            while self._next is not None:
                future, self._next = self._next, None  # later callers wait for the next
                self.runs += 1
                try:
                    future.set_result(await self._compute())
                except Exception as error:
                    future.set_exception(error)
                    future.exception()  # retrieved: no warning if every caller left
        finally:
            self._running = False
