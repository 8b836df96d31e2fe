"""The TCP side of the gateway: one asyncio task per connection around a sans-IO parser.

Requests of one connection are answered in order, one at a time (a blocking lease holds
its connection, spec: Framing). Each connection reads only while it has no parsed
request to answer and drains its replies before reading more, so a client that stops
reading stops being read: it stalls only itself. An idle connection costs one task and
its buffers.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable

from eventq.errors import EventqError, ServerError
from eventq.protocol import Close, Parser

log = logging.getLogger(__name__)

READ_CHUNK_BYTES = 64 * 1024
WRITE_HIGH_WATER_BYTES = 256 * 1024


class GatewayStats:
    def __init__(self, evicted: Callable[[], int]) -> None:
        self.active_clients = 0
        self._evicted = evicted

    @property
    def evicted_jobs(self) -> int:
        return self._evicted()


class GatewayServer:
    def __init__(self, gateway, stats: GatewayStats, host: str, port: int, clock_ms) -> None:
        self._gateway = gateway
        self._stats = stats
        self._host = host
        self._port = port
        self._clock_ms = clock_ms
        self._server: asyncio.base_events.Server | None = None
        self._connections: set[asyncio.Task] = set()

    @property
    def port(self) -> int:
        assert self._server is not None
        return self._server.sockets[0].getsockname()[1]

    async def start(self) -> None:
        self._server = await asyncio.start_server(
            self._serve, self._host, self._port, backlog=4096, reuse_address=True
        )

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._connections):
            task.cancel()
        if self._connections:
            await asyncio.gather(*self._connections, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._connections.add(task)
        self._stats.active_clients += 1
        writer.transport.set_write_buffer_limits(high=WRITE_HIGH_WATER_BYTES)
        try:
            await self._converse(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("connection failed")
        finally:
            self._stats.active_clients -= 1
            self._connections.discard(task)
            writer.close()

    async def _converse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        parser = Parser(now_ms=self._clock_ms)
        while True:
            event = parser.next_event()
            if event is None:
                if parser.closed:
                    return
                await writer.drain()
                data = await reader.read(READ_CHUNK_BYTES)
                if not data:
                    return
                parser.feed(data)
                continue
            if isinstance(event, Close):
                return  # a bare \n: closed without a reply (spec: Framing)
            if isinstance(event, EventqError):
                writer.write(event.reply)
                if event.closes_connection:
                    await writer.drain()
                    return
                continue
            try:
                reply = await self._gateway.handle(event)
            except Exception as error:  # a bug must not look like success
                log.exception("request %r failed", type(event).__name__)
                reply = ServerError(f"internal error: {type(error).__name__}").reply
            writer.write(reply)
