"""Connections to the other eventq processes of a cluster (docs/architecture.md,
"Scaling out").

A gateway that gets a request for a job another process owns sends it to that
process's gateway over the workq protocol itself, on a connection that began with
``peer`` (so the owner answers from its own partitions and never forwards again), and
relays the reply. Connections are pooled per peer, one request at a time each (a
blocking lease holds its connection, as for any client).

With tokens (docs/architecture.md, "Scaling out") a connection authenticates as admin,
then says for whom it serves: ``as <name> [-prefix=<prefix>]``, the client whose
requests it forwards (eventq/state/callers.py), so the owner applies that client's scope
and writes that client's name with the commands (audit), never the peer's. Connections
are pooled per (peer, client): each says ``as`` once, when it opens, and a request
forwarded is the client's own bytes (a workq request keeps them). Requests eventq makes
on its own (no client) go on connections that say no ``as``: the admin's.

Why forwarding and not routing through Kafka: a forwarded request costs one loopback
or LAN round trip (~0.1-0.3 ms) on top of the owner's own work, and the owner answers
as it answers its own clients; routing through the log would add a second produce and
a consume (several ms at least, measured at ~0.7 ms of CPU per interactive record:
docs/architecture.md, "Batches") and a reply topic every process must read. Reads (``inspect``) and blocking
waits (``result``, ``lease``) need the owner's indexes anyway.
"""

from __future__ import annotations

import asyncio
import logging
import ssl

from eventq.address import host_and_port
from eventq.errors import ServerError, Unserved
from eventq.protocol import As
from eventq.protocol.access import Caller
from eventq.protocol.encode import encode_request
from eventq.protocol.reply_reader import MalformedReply, Shape, reply_end

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 2.0
READ_CHUNK_BYTES = 64 * 1024
IDLE_CONNECTIONS_PER_PEER = 64
PEER_HELLO = b"peer\r\n"


class PeerUnavailable(ServerError):
    """The process that owns a job did not answer: it may have died (its partitions
    move to the others within the session timeout) or be restarting."""


class PeerUnreachable(PeerUnavailable, Unserved):
    """No connection to the owner could be made (it stopped, or is starting): the request
    was never sent, so nothing happened and it may be asked again, of whoever owns the
    job by then (eventq/gateway/dispatch.py)."""


class PeerConnection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, address: str, token: str | None = None,
                   tls: ssl.SSLContext | None = None,
                   caller: Caller | None = None) -> "PeerConnection":
        """A connection to the gateway at ``address`` that said yes to ``peer``, after
        ``auth`` with ``token`` when the cluster has tokens (docs/security.md, "A tokens
        file": processes authenticate to each other as admin), then to ``as`` for
        ``caller`` (the client its requests are forwarded for) when there is one."""
        host, port = host_and_port(address)
        async with asyncio.timeout(CONNECT_TIMEOUT_S):
            reader, writer = await asyncio.open_connection(
                host, port, ssl=tls, server_hostname=host if tls is not None else None)
            connection = cls(reader, writer)
            if token is not None:
                reply = await connection.exchange(b"auth %s\r\n" % token.encode("latin-1"),
                                                  Shape.STATUS)
                if reply != b"+OK\r\n":
                    connection.close()
                    raise MalformedReply(
                        f"{address} refused this process's admin token ({reply[:80]!r}): "
                        "every process of a cluster needs the same tokens file")
            reply = await connection.exchange(PEER_HELLO, Shape.STATUS)
            if reply != b"+OK\r\n":
                connection.close()
                raise MalformedReply(f"{address} is not an eventq gateway ({reply[:80]!r})")
            if caller is not None and token is not None:
                request = encode_request(As(caller.name, caller.prefix))
                reply = await connection.exchange(request, Shape.STATUS)
                if reply != b"+OK\r\n":  # never served for nobody: refused whole
                    connection.close()
                    raise MalformedReply(
                        f"{address} refused to serve this process's forwarded requests for "
                        f"their client ({reply[:80]!r}): every process of a cluster needs "
                        "the same tokens file")
        return connection

    @property
    def usable(self) -> bool:
        """Closed by its peer (a restart, a kill) while it sat in the pool: not usable."""
        return not (self.reader.at_eof() or self.writer.is_closing())

    async def exchange(self, request: bytes, shape: Shape) -> bytes:
        self.writer.write(request)
        # Grown in place: a page of 100 jobs of 1 MiB arrives in ~1,600 reads, and
        # re-copying an immutable buffer each time would copy ~80 GB.
        buffer = bytearray()
        while True:
            end = reply_end(buffer, shape)
            if end is not None:
                if end != len(buffer):
                    raise MalformedReply("a peer sent more than one reply")
                return bytes(buffer)
            chunk = await self.reader.read(READ_CHUNK_BYTES)
            if not chunk:
                raise ConnectionResetError("the peer closed the connection")
            buffer += chunk

    def close(self) -> None:
        self.writer.close()


class Peers:
    """Pooled connections to peers by address (``host:port``)."""

    def __init__(self, token: str | None = None, tls: ssl.SSLContext | None = None) -> None:
        # Idle connections by (peer, the client they serve: None, eventq's own).
        self._idle: dict[tuple[str, Caller | None], list[PeerConnection]] = {}
        self._token = token  # the admin token presented to peers (None: no tokens)
        self._tls = tls  # the links' TLS (eventq/gateway/tls.py peer_context; None: plain)
        self.forwarded = 0  # requests answered by peers (logged at stop)

    async def exchange(
        self, address: str, request: bytes, shape: Shape, timeout_s: float,
        caller: Caller | None = None,
    ) -> bytes:
        """Send one request to ``address``, served there for ``caller`` (the client it
        is forwarded for; None: eventq's own), and return its complete reply. A peer that
        cannot be reached or does not answer in ``timeout_s`` is ``PeerUnavailable``;
        a cancelled exchange closes its connection (the peer then gives back a lease it
        had not sent yet, as for any client that leaves)."""
        connection = None
        reusable = False
        try:
            async with asyncio.timeout(timeout_s):
                try:
                    connection = await self._connection(address, caller)
                except (OSError, EOFError, MalformedReply, TimeoutError, ValueError) as error:
                    raise PeerUnreachable(
                        f"the eventq process at {address} that serves this could not be "
                        f"reached ({type(error).__name__}: {error}); nothing was sent: retry "
                        "(its partitions move to another process if it is gone)") from None
                reply = await connection.exchange(request, shape)
            reusable = True
            self.forwarded += 1
            return reply
        except (OSError, EOFError, MalformedReply, TimeoutError, ValueError) as error:
            raise PeerUnavailable(
                f"the eventq process at {address} that serves this did not answer "
                f"({type(error).__name__}: {error}); retry (its partitions move to another "
                "process if it is gone)"
            ) from None
        finally:
            if connection is not None:
                idle = self._idle.setdefault((address, caller), [])
                if reusable and len(idle) < IDLE_CONNECTIONS_PER_PEER:
                    idle.append(connection)
                else:
                    connection.close()

    async def _connection(self, address: str, caller: Caller | None) -> PeerConnection:
        idle = self._idle.get((address, caller), [])
        while idle:
            connection = idle.pop()
            if connection.usable:
                return connection
            connection.close()
        return await PeerConnection.open(address, self._token, self._tls, caller)

    def close(self) -> None:
        for idle in self._idle.values():
            for connection in idle:
                connection.close()
        self._idle.clear()
