"""The TCP side of the gateway: one asyncio task per connection around a sans-IO parser.

Requests of one connection are answered in order, one at a time (a blocking lease holds
its connection, docs/protocol.md, "Connections and framing"). Each connection reads only while it
has no parsed
request to answer and drains its replies before reading more, so a client that stops
reading stops being read: it stalls only itself. An idle connection costs one task and
its buffers.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from time import perf_counter
from typing import Callable, Iterable

from eventq.errors import UNKNOWN_COMMAND, ClientError, EventqError, NotWritten, ServerError
from eventq.gateway.delivery import client_sent_eof, reply_reaches_client
from eventq.gateway.dispatch import Gateway
from eventq.gateway.leasing import Handover
from eventq.gateway.listeners import LISTEN_BACKLOG
from eventq.gateway.tls import TLS_HANDSHAKE_TIMEOUT_S
from eventq.protocol import As, Auth, Close, Parser, Peer
from eventq.protocol.access import UNAUTHORIZED, Access, Caller, TokenStore
from eventq.protocol.grammar import VERB_OF
from eventq.state import callers
from eventq.state.buckets import REQUEST_SECONDS, Histogram

log = logging.getLogger(__name__)

READ_CHUNK_BYTES = 64 * 1024
WRITE_HIGH_WATER_BYTES = 256 * 1024
STOP_CANCEL_ROUNDS = 10
STOP_CANCEL_WAIT_S = 0.5
# A stop first lets the requests in progress finish and their replies reach their
# clients, this long at most (docs/operations.md, "Planned restarts"): past a submit's
# own deadline (the write timeout, 5 s by default), so a command in the log is answered.
STOP_DRAIN_S = 6.0
# Requests already on their way when the stop begins are still served for this long;
# one that arrives later is refused as retryable and its connection closed
# (``STOPPING``), and a connection idle then is closed.
STOP_GRACE_S = 0.3
# Then a request already on its way to an idle connection still gets its refusal, for
# this long, before idle connections are closed.
STOP_QUIET_S = 0.1
STOP_POLL_S = 0.02  # how often the drain looks whether it is done
STOPPING = ("this eventq process is stopping: nothing happened; retry (at another "
            "process of the cluster)")


class _Connection:
    __slots__ = ("peer", "access", "reading")

    def __init__(self, tokens: TokenStore | None) -> None:
        # Waiting for the client's next request: nothing of it is in progress here.
        self.reading = False
        # Another eventq process's connection (docs/architecture.md, "Scaling out").
        self.peer = False
        # Its standing with a server that has tokens (docs/security.md, "Tokens and
        # roles"; None: no tokens).
        self.access = None if tokens is None else Access(tokens)

    @property
    def caller(self) -> Caller | None:
        """Whom its requests are served for (eventq/state/callers.py): its token's name and
        prefix, or the client a peer forwards for (``as``); None without tokens."""
        return None if self.access is None else self.access.caller


class GatewayStats:
    def __init__(self, evicted: Callable[[], int], timed: bool = True) -> None:
        self.active_clients = 0
        self.peer_connections = 0
        self.released = 0  # leases given back because no client received them
        self._evicted = evicted
        # Seconds from a parsed request to its reply, by request type (None:
        # metrics off). Fixed histograms: an observation allocates nothing.
        self.timings: dict[type, Histogram] | None = {} if timed else None

    def timing(self, request_type: type) -> Histogram:
        """The histogram of a request type's timings (only with ``timed``)."""
        timings = self.timings
        assert timings is not None, "not timed"
        histogram = timings.get(request_type)
        if histogram is None:
            histogram = timings[request_type] = Histogram(REQUEST_SECONDS)
        return histogram

    @property
    def request_seconds(self) -> dict[str, Histogram] | None:
        """The timings by protocol verb (``add``, ``inspect jobs``)."""
        if self.timings is None:
            return None
        return {VERB_OF[kind]: histogram for kind, histogram in self.timings.items()}

    @property
    def evicted_jobs(self) -> int:
        return self._evicted()


class GatewayServer:
    def __init__(self, gateway: Gateway, stats: GatewayStats, host: str, port: int,
                 clock_ms: Callable[[], int], sock: socket.socket | None = None,
                 tokens: TokenStore | None = None, tls: ssl.SSLContext | None = None) -> None:
        self._gateway = gateway
        # TLS (docs/security.md, "TLS"; eventq/gateway/tls.py server_context); None:
        # plain TCP.
        self._tls = tls
        self._tokens = tokens  # None: no tokens, every request allowed (docs/security.md, "Off by default")
        # A socket bound and listening before faust started (eventq/gateway/listeners.py), or
        # None: bind host and port at start.
        self._sock = sock
        self._stats = stats
        self._host = host
        self._port = port
        self._clock_ms = clock_ms
        self._server: asyncio.base_events.Server | None = None
        self._connections: dict[asyncio.Task, _Connection] = {}
        self._refusing = False  # the stop's grace is over: new requests are refused

    @property
    def port(self) -> int:
        assert self._server is not None
        port: int = self._server.sockets[0].getsockname()[1]  # (host, port)
        return port

    async def start(self) -> None:
        # With TLS the loop makes each connection's handshake before ``_serve`` runs; a
        # refusal is logged by the context (eventq/gateway/tls.py). (uvloop's start_tls on an
        # accepted connection stalled 2 handshakes in 3 in a test: not used.)
        handshake_s = None if self._tls is None else TLS_HANDSHAKE_TIMEOUT_S
        if self._sock is not None:
            self._server = await asyncio.start_server(
                self._serve, sock=self._sock, ssl=self._tls, ssl_handshake_timeout=handshake_s)
            return
        self._server = await asyncio.start_server(
            self._serve, self._host, self._port, backlog=LISTEN_BACKLOG, reuse_address=True,
            ssl=self._tls, ssl_handshake_timeout=handshake_s)

    async def stop(self, drain_s: float = STOP_DRAIN_S) -> None:
        """Close the listener, let the requests in progress finish for ``drain_s`` at
        most, then end every connection, whatever it is waiting for.

        A planned stop answers what it took (docs/operations.md, "Planned restarts"):
        a lease waiting for a job ends with ``-TIMEOUT`` (the gateway's ``stopping``);
        requests that arrive within ``STOP_GRACE_S`` are served; then a connection
        waiting for its next request ends, one with a request in progress gets its reply
        and ends, and a request that arrives later is refused as retryable
        (``STOPPING``) before its connection ends. So a client never loses the reply of
        a command this process wrote, nor a job leased to it. Other processes' requests
        are served until the clients' are done (a peer confirms the claims this process
        offered it, and asks for jobs this process still owns); their idle connections
        end last.

        Cancelled again while any is left: Python 3.11's ``asyncio.wait_for`` drops a
        cancellation that arrives as its inner future completes (gh-86296), and a stop
        during 300 `run` submissions then waited for a 1-day `run` until the watchdog
        ended the process uncleanly (docs/architecture.md, "Hostile inputs";
        tests/e2e/test_hostile_inputs.py)."""
        if self._server is not None:
            self._server.close()
        self._gateway.stopping()
        if self._connections:
            await asyncio.sleep(STOP_GRACE_S)
        self._refusing = True
        if self._connections:
            await asyncio.sleep(STOP_QUIET_S)
        for task, connection in list(self._connections.items()):
            if connection.reading and not connection.peer:
                task.cancel()
        await self._drain(drain_s)
        for _ in range(STOP_CANCEL_ROUNDS):
            pending = [task for task in self._connections if not task.done()]
            if not pending:
                return
            for task in pending:
                task.cancel()
            await asyncio.wait(pending, timeout=STOP_CANCEL_WAIT_S)
        log.error("%d connections did not end when cancelled", len(self._connections))

    async def _drain(self, drain_s: float) -> None:
        """Until no client connection is left and every peer's is idle, ``drain_s`` at
        most."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + drain_s
        while loop.time() < deadline and any(
                not (connection.peer and connection.reading)
                for connection in self._connections.values()):
            await asyncio.sleep(STOP_POLL_S)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One connection. A client may leave while its request runs: the reply is then
        dropped (under uvloop a write to the closed transport raises RuntimeError,
        found by the fuzzer: docs/architecture.md, "Hostile inputs")."""
        task = asyncio.current_task()
        assert task is not None  # each connection is served in a task of its own
        connection = _Connection(self._tokens)
        self._connections[task] = connection
        self._stats.active_clients += 1
        writer.transport.set_write_buffer_limits(high=WRITE_HIGH_WATER_BYTES)
        try:
            await self._converse(reader, writer, connection)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("connection failed")
        finally:
            if connection.peer:
                self._stats.peer_connections -= 1
            else:
                self._stats.active_clients -= 1
            del self._connections[task]
            writer.close()

    async def _converse(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
        connection: _Connection,
    ) -> None:
        parser = Parser(now_ms=self._clock_ms, access=connection.access)
        while True:
            event = parser.next_event()
            if event is None:
                if parser.closed:
                    return
                await writer.drain()
                if self._refusing and not connection.peer:
                    return  # every request it sent before the stop is answered
                connection.reading = True
                data = await reader.read(READ_CHUNK_BYTES)
                connection.reading = False
                if not data:
                    return
                parser.feed(data)
                continue
            if isinstance(event, Close):
                return  # a bare \n: closed without a reply (docs/protocol.md, "Connections and framing")
            if writer.transport.is_closing():
                return  # the client left while its request ran (see _serve)
            if self._refusing and not connection.peer:
                writer.write(NotWritten(STOPPING).reply)
                await writer.drain()
                return
            if isinstance(event, EventqError):
                writer.write(event.reply)
                if event.closes_connection:
                    await writer.drain()
                    return
                continue
            if isinstance(event, Auth):
                writer.write(self._authenticate(event, connection))
                continue
            if isinstance(event, As):
                writer.write(self._act_as(event, connection))
                continue
            if isinstance(event, Peer) and not connection.peer:
                # Another eventq process (eventq/gateway/peers.py): not a client.
                connection.peer = True
                self._stats.active_clients -= 1
                self._stats.peer_connections += 1
            timings = self._stats.timings
            started = perf_counter() if timings is not None else 0.0
            # Whom this request is served for, everywhere its answer goes (its scope,
            # a forward's ``as``, the name each command it writes carries).
            callers.serve_as(connection.caller)
            try:
                reply = await self._gateway.handle(event, connection.peer)
            except Exception as error:  # a bug must not look like success
                log.exception("request %r failed", type(event).__name__)
                reply = ServerError(f"internal error: {type(error).__name__}").reply
            if timings is not None:
                self._stats.timing(type(event)).observe(perf_counter() - started)
            if isinstance(reply, Handover):
                if not await self._hand_over(reply, reader, writer):
                    return
            elif writer.transport.is_closing():
                return
            elif isinstance(reply, bytes):
                writer.write(reply)
            else:
                await self._stream(reply, writer)
            # Replies may be far larger than requests (`inspect job` of a 1 MiB job is a
            # 40-byte request): a client that does not read them stalls here, holding
            # at most the high-water mark and one reply, however much it pipelined.
            if writer.transport.get_write_buffer_size() > WRITE_HIGH_WATER_BYTES:
                await writer.drain()

    @staticmethod
    def _authenticate(request: Auth, connection: _Connection) -> bytes:
        """``auth`` (docs/security.md, "Tokens and roles"): ``+OK`` for a configured
        token (any token when the server has none), else Unauthorized, and the
        connection is unauthenticated from then on. Writes nothing to the log."""
        access = connection.access
        if access is None or access.authenticate(request.token):
            return b"+OK\r\n"
        return ClientError(UNAUTHORIZED).reply

    @staticmethod
    def _act_as(request: As, connection: _Connection) -> bytes:
        """``as`` (internal, docs/architecture.md, "Scaling out"): on a peer connection
        of an admin token without a prefix, the next requests are served for the client
        named. To a client the verb does not exist (as ``confirm``). A server without
        tokens serves every request alike: ``+OK``, and nothing changes. Writes nothing
        to the log."""
        if not connection.peer:
            return ClientError(UNKNOWN_COMMAND).reply
        access = connection.access
        if access is None or access.act_as(request.name, request.prefix):
            return b"+OK\r\n"
        return ClientError(UNAUTHORIZED).reply

    async def _hand_over(
        self, handover: Handover, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Write a lease's reply, or give its job back if no client will read it, so it
        is not leased to nobody until its TTR (docs/architecture.md, "Abandoned
        commands"). False: given back.

        A client that sent EOF may have half-closed (a piped script: it reads every
        reply, as workq answers it) or be gone; only writing tells
        (eventq/gateway/delivery.py). A client that has not sent EOF is taken to read it
        (one that dies later leaves the job to its TTR)."""
        if writer.transport.is_closing():  # reset, or closed by a failed write
            self._gateway.give_back(handover.release)
            return False
        writer.write(handover.reply)
        if client_sent_eof(reader) and not await reply_reaches_client(writer.transport):
            self._gateway.give_back(handover.release)
            return False
        return True

    @staticmethod
    async def _stream(pieces: Iterable[bytes], writer: asyncio.StreamWriter) -> None:
        """Write a long reply piece by piece, each only once the client took the last.
        A failure after the first piece cannot be answered (the reply's count is sent):
        it ends the connection."""
        for piece in pieces:
            if writer.transport.is_closing():
                return
            writer.write(piece)
            await writer.drain()
