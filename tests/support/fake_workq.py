"""A workq-compatible server in memory, for the client's compatibility test (no Go
toolchain in CI to build workq itself).

It is workq as docs/protocol.md, "Commands", describes it, with eventq's extensions
(docs/protocol.md, "eventq extensions") taken away: ``touch``, ``pause`` and ``resume``
are ``Unknown command``, and ``-backoff`` is ignored as workq ignores every flag it does
not know. Its state is a dict folded by eventq's pure core (decide/evolve) at the wall
clock; blocking requests poll. One thread, one event loop; for tests only.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
import uuid

from eventq.core import Add, Complete, Delete, Fail, Schedule, StartAttempt, apply
from eventq.core.job import is_final, is_ready, is_scheduled_waiting, lease_order_key
from eventq.core.machine import Accepted, Rejected, due_commands
from eventq.errors import UNKNOWN_COMMAND, ClientError, EventqError, NotFound, Timeout
from eventq.gateway.handlers import result_of, view_of
from eventq.protocol import Parser, replies
from eventq.protocol import requests as rq

POLL_S = 0.01
EXTENSIONS = (rq.Touch, rq.Pause, rq.Resume, rq.InspectDigest, rq.InspectBulk, rq.Peer,
              rq.Peek, rq.Confirm)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class FakeWorkq:
    def __init__(self) -> None:
        self.jobs: dict[uuid.UUID, object] = {}
        self.names: set[str] = set()
        self.offsets = itertools.count(1)
        self.clients = 0
        self.started_ms = now_ms()
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready = threading.Event()

    # --- state ------------------------------------------------------------------------

    def _apply(self, command):
        self._timers()
        outcome, after = apply(self.jobs.get(command.job_id), command, now_ms(),
                               next(self.offsets))
        if after is None:
            self.jobs.pop(command.job_id, None)
        else:
            self.jobs[command.job_id] = after
        if isinstance(outcome, Rejected):
            raise outcome.error
        return outcome, after

    def _timers(self) -> None:
        for job in list(self.jobs.values()):
            for command in due_commands(job, now_ms()):
                current = self.jobs.get(job.id)
                outcome, after = apply(current, command, now_ms(), next(self.offsets))
                if isinstance(outcome, Accepted):
                    if after is None:
                        self.jobs.pop(job.id, None)
                    else:
                        self.jobs[job.id] = after

    def _ready_jobs(self, name: str):
        return sorted((j for j in self.jobs.values() if j.name == name and is_ready(j, now_ms())),
                      key=lease_order_key)

    async def _until(self, wait_ms: int, attempt):
        deadline = time.monotonic() + wait_ms / 1000
        while True:
            self._timers()
            found = attempt()
            if found is not None:
                return found
            if time.monotonic() >= deadline:
                raise Timeout()
            await asyncio.sleep(POLL_S)

    # --- requests ---------------------------------------------------------------------

    async def answer(self, r) -> bytes:
        if isinstance(r, EXTENSIONS):
            raise ClientError(UNKNOWN_COMMAND)
        if isinstance(r, rq.Add):
            self.names.add(r.name)
            self._apply(Add(r.id, r.name, r.ttr_ms, r.ttl_ms, r.payload, r.priority,
                            r.max_attempts, r.max_fails))
            return replies.ok()
        if isinstance(r, rq.Schedule):
            self.names.add(r.name)
            self._apply(Schedule(r.id, r.name, r.ttr_ms, r.ttl_ms, r.time_ms, r.payload,
                                 r.priority, r.max_attempts, r.max_fails))
            return replies.ok()
        if isinstance(r, (rq.Complete, rq.Fail)):
            self._apply((Complete if isinstance(r, rq.Complete) else Fail)(r.id, r.result))
            return replies.ok()
        if isinstance(r, rq.Delete):
            self._apply(Delete(r.id))
            return replies.ok()
        if isinstance(r, rq.Lease):
            self.names.update(r.names)
            return await self._until(r.wait_timeout_ms, lambda: self._lease(r.names))
        if isinstance(r, rq.Result):
            if r.id not in self.jobs:
                raise NotFound()
            job = await self._until(r.wait_timeout_ms, lambda: self._final(r.id))
            return result_of(job)
        if isinstance(r, rq.Run):
            self.names.add(r.name)
            self._apply(Add(r.id, r.name, r.ttr_ms, 0, r.payload, r.priority))
            try:
                return result_of(await self._until(r.wait_timeout_ms, lambda: self._final(r.id)))
            finally:
                self.jobs.pop(r.id, None)
        return self._inspect(r)

    def _lease(self, names):
        for name in names:
            for job in self._ready_jobs(name):
                outcome, after = self._apply(StartAttempt(job.id, job.attempts + 1))
                if after.state.name == "LEASED":
                    return replies.lease_reply(after.id, after.name, after.ttr_ms, after.payload)
        return None

    def _final(self, job_id):
        job = self.jobs.get(job_id)
        if job is None:
            raise NotFound()
        return job if is_final(job) else None

    def _inspect(self, r) -> bytes:
        self._timers()
        if isinstance(r, rq.InspectServer):
            return replies.server_reply(self.clients, 0, self.started_ms)
        if isinstance(r, rq.InspectJob):
            if r.id not in self.jobs:
                raise NotFound()
            return replies.job_blocks([view_of(self.jobs[r.id])])
        if isinstance(r, rq.InspectQueues):
            names = sorted(self.names, key=str.encode)[r.offset:r.offset + r.limit]
            return replies.queue_blocks([self._queue(name) for name in names])
        if r.name not in self.names:
            raise NotFound()
        if isinstance(r, rq.InspectQueue):
            return replies.queue_blocks([self._queue(r.name)])
        if isinstance(r, rq.InspectJobs):
            jobs = self._ready_jobs(r.name)
        else:
            jobs = sorted((j for j in self.jobs.values()
                           if j.name == r.name and is_scheduled_waiting(j, now_ms())),
                          key=lease_order_key)
        return replies.job_blocks([view_of(j) for j in jobs[r.offset:r.offset + r.limit]])

    def _queue(self, name: str) -> replies.QueueView:
        scheduled = sum(1 for j in self.jobs.values()
                        if j.name == name and is_scheduled_waiting(j, now_ms()))
        return replies.QueueView(name, len(self._ready_jobs(name)), scheduled)

    # --- the network ------------------------------------------------------------------

    async def _connection(self, reader, writer) -> None:
        self.clients += 1
        parser = Parser(now_ms)
        try:
            while not parser.closed:
                data = await reader.read(65536)
                if not data:
                    return
                parser.feed(data)
                while (request := parser.next_event()) is not None:
                    if isinstance(request, rq.Close):
                        return
                    if isinstance(request, EventqError):
                        writer.write(request.reply)
                        continue
                    try:
                        writer.write(await self.answer(request))
                    except EventqError as error:
                        writer.write(error.reply)
                await writer.drain()
        finally:
            self.clients -= 1
            writer.close()

    def start(self) -> "FakeWorkq":
        threading.Thread(target=asyncio.run, args=(self._serve(),), daemon=True).start()
        assert self._ready.wait(10)
        return self

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._stop = asyncio.Event()
        self._ready.set()
        async with server:
            await self._stop.wait()

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
