"""``AsyncClient``: the asyncio client, the same pure calls (eventq/client/calls.py)
over a pool of asyncio streams."""

from __future__ import annotations

import asyncio
import functools
import socket
import ssl
import uuid
from typing import Any, Callable, Concatenate, Coroutine, Iterable, ParamSpec, TypeVar

from eventq.client import calls
from eventq.client.calls import Call
from eventq.client.connecting import ConnectReporter, cannot_connect
from eventq.client.errors import ConnectionLost, EventqError, Unavailable
from eventq.client.models import NewJob
from eventq.client.sync import (
    FIRST_RETRY_S,
    MAX_RETRY_S,
    PIPELINE_WINDOW,
    RECV_BYTES,
    Outcome,
    added_or_raise,
    merge,
    prepare,
)
from eventq.protocol.reply_reader import Shape, reply_end

P = ParamSpec("P")  # a call's arguments
T = TypeVar("T")  # what its reply is parsed into


class AsyncConnection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer
        self.buffer = bytearray()

    def send(self, data: bytes) -> None:
        self.writer.write(data)

    @property
    def usable(self) -> bool:
        """Not closed by the server while it sat idle (a process that stops closes idle
        connections: docs/operations.md, "Planned restarts"): a request sent on one
        that was would be lost without a word, one sent on a new one is answered."""
        return not (self.reader.at_eof() or self.writer.is_closing() or self.buffer)

    async def read(self, shape: Shape, timeout_s: float) -> bytes:
        try:
            async with asyncio.timeout(timeout_s):
                while True:
                    end = reply_end(self.buffer, shape)
                    if end is not None:
                        reply = bytes(self.buffer[:end])
                        del self.buffer[:end]
                        return reply
                    chunk = await self.reader.read(RECV_BYTES)
                    if not chunk:
                        raise ConnectionLost("the server closed the connection")
                    self.buffer += chunk
        except TimeoutError:
            raise ConnectionLost(f"no reply within {timeout_s:g}s") from None

    def close(self) -> None:
        self.writer.close()


def _async(build: Callable[P, Call[T]],
           ) -> Callable[Concatenate[AsyncClient, P], Coroutine[Any, Any, T]]:
    """The asyncio client's method of a call: build it, send it, its parsed reply."""

    @functools.wraps(build)
    async def method(self: AsyncClient, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return await self.execute(build(*args, **kwargs))

    return method


class AsyncClient:
    """The asyncio eventq (and workq) client::

        from eventq.client import AsyncClient

        async with AsyncClient("127.0.0.1", 9922) as client:
            job_id = await client.add("emails", b"hello")
            job = await client.lease(["emails", "sms"], wait_timeout_ms=1_000)
            await client.touch(job.id)                # a long job: keep the lease
            await client.complete(job.id, b"sent")

    Pooling, reconnection, retries of reads and timeouts are as in ``Client``.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 9922, *, pool_size: int = 8,
                 timeout_s: float = 30.0, connect_timeout_s: float = 30.0,
                 token: str | None = None, tls: ssl.SSLContext | None = None) -> None:
        self.host, self.port = host, port
        # A server speaking TLS: eventq.client.tls_context(ca=...) (docs/security.md,
        # "TLS and client certificates").
        self._tls = tls
        # Sent with `auth` first on every connection; None: no auth (docs/security.md,
        # "Tokens and roles").
        self._auth = None if token is None else calls.auth(token)
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self._idle: list[AsyncConnection] = []
        self._slots = asyncio.Semaphore(pool_size)
        self._closed = False
        self._reporter = ConnectReporter(host, port)

    async def _connect(self) -> AsyncConnection:
        """A new connection, retried with backoff for ``connect_timeout_s``; the
        reporter says so soon if it keeps failing (docs/architecture.md, "Feedback to
        users")."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        wait_s = FIRST_RETRY_S
        while True:
            try:
                async with asyncio.timeout(self.timeout_s):
                    reader, writer = await asyncio.open_connection(
                        self.host, self.port, ssl=self._tls,
                        server_hostname=self.host if self._tls is not None else None)
            except ssl.SSLError:
                raise  # a certificate refused: trying again changes nothing
            except (OSError, TimeoutError) as error:
                self._reporter.failed(error)
                waited_s = loop.time() - started
                if waited_s + wait_s > self.connect_timeout_s:
                    raise Unavailable(cannot_connect(self.host, self.port, error,
                                                     waited_s)) from None
                await asyncio.sleep(wait_s)
                wait_s = min(wait_s * 2, MAX_RETRY_S)
                continue
            self._reporter.connected()
            sock = writer.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            connection = AsyncConnection(reader, writer)
            if self._auth is not None:
                try:
                    connection.send(self._auth.data)
                    self._auth.parse(await connection.read(self._auth.shape, self.timeout_s))
                except BaseException:
                    connection.close()
                    raise
            return connection

    async def _acquire(self) -> AsyncConnection:
        if self._closed:
            raise Unavailable("the client is closed")
        await self._slots.acquire()
        while self._idle:
            connection = self._idle.pop()
            if connection.usable:
                return connection
            connection.close()
        try:
            return await self._connect()
        except BaseException:
            self._slots.release()
            raise

    def _release(self, connection: AsyncConnection | None) -> None:
        if connection is not None:
            if self._closed:
                connection.close()
            else:
                self._idle.append(connection)
        self._slots.release()

    async def execute(self, call: Call[T]) -> T:
        """Send one call and return its parsed reply (the methods below use this)."""
        for attempt in (1, 2):
            connection = await self._acquire()
            try:
                connection.send(call.data)
                reply = await connection.read(call.shape, self.timeout_s + call.wait_s)
            except (OSError, ConnectionLost) as error:
                connection.close()
                self._release(None)
                if call.retry_safe and attempt == 1:
                    continue
                if isinstance(error, ConnectionLost):
                    raise
                raise ConnectionLost(f"connection to {self.host}:{self.port} broke: {error}") from None
            except BaseException:  # cancelled mid-reply: the stream is out of step
                connection.close()
                self._release(None)
                raise
            self._release(connection)
            return call.parse(reply)
        raise AssertionError("unreachable")

    async def close(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    add = _async(calls.add)
    schedule = _async(calls.schedule)
    run = _async(calls.run)
    result = _async(calls.result)
    inputs = _async(calls.inputs)
    lease = _async(calls.lease)
    complete = _async(calls.complete)
    fail = _async(calls.fail)
    delete = _async(calls.delete)
    touch = _async(calls.touch)
    pause = _async(calls.pause)
    resume = _async(calls.resume)
    inspect_job = _async(calls.inspect_job)
    inspect_jobs = _async(calls.inspect_jobs)
    inspect_tagged = _async(calls.inspect_tagged)
    inspect_queue = _async(calls.inspect_queue)
    inspect_queues = _async(calls.inspect_queues)
    inspect_server = _async(calls.inspect_server)
    digest = _async(calls.digest)
    recur = _async(calls.recur)
    unrecur = _async(calls.unrecur)
    recurrences = _async(calls.recurrences)
    retry = _async(calls.retry)
    retry_group = _async(calls.retry_group)
    inspect_failed = _async(calls.inspect_failed)
    inspect_failed_jobs = _async(calls.inspect_failed_jobs)

    async def add_many(self, jobs: Iterable[NewJob]) -> list[uuid.UUID]:
        """Add many jobs pipelined on one connection; see ``Client.add_many``."""
        prepared = prepare(jobs)
        built = [item for item in prepared if isinstance(item, Call)]
        if not built:  # every job refused before sending
            return added_or_raise(merge(prepared, []))
        connection = await self._acquire()
        outcomes: list[Outcome] = []
        try:
            sent = 0
            while len(outcomes) < len(built):
                burst = built[sent:len(outcomes) + PIPELINE_WINDOW]
                if burst:
                    connection.send(b"".join(call.data for call in burst))
                    sent += len(burst)
                call = built[len(outcomes)]
                reply = await connection.read(call.shape, self.timeout_s + call.wait_s)
                try:
                    outcomes.append(call.parse(reply))
                except EventqError as error:
                    outcomes.append(error)
        except BaseException as error:
            connection.close()
            self._release(None)
            if isinstance(error, (OSError, ConnectionLost)):
                raise ConnectionLost(
                    f"add_many: the connection broke after {len(outcomes)} of {len(built)} "
                    f"replies ({error}); the rest may or may not be added") from None
            raise
        self._release(connection)
        return added_or_raise(merge(prepared, outcomes))
