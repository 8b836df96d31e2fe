"""Did a lease's reply reach a client that has closed its sending side?
(docs/architecture.md, "Feedback to users": a piped script gets every reply)

A client that pipes a script (``eventq client < script``, ``nc -N``) half-closes its
socket after the last request and still reads every reply, as workq answers it; a client
that fully closed while its lease waited reads nothing, and the job it would have got
must go back (docs/architecture.md, "Abandoned commands"). Both arrive as the same FIN:
TCP cannot tell them apart until data is sent. Then the peer's kernel acknowledges it
(half-closed: still reading) or answers with RST (fully closed: RFC 1122 4.2.2.13, data
after close is reset). So the reply is written and the kernel's view of the connection
is watched until one of the two happened (Linux: the unacknowledged byte count and the
TCP state).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import socket
import struct
import sys
from typing import Protocol

try:
    import fcntl
    import termios

    POSIX = True
except ImportError:  # not a POSIX system: no probes
    POSIX = False

log = logging.getLogger(__name__)

HANDOVER_CONFIRM_TIMEOUT_S = 5.0  # no ACK and no RST by then: the peer lives, just slowly
CONFIRM_POLL_FIRST_S = 0.001  # loopback answers in microseconds
CONFIRM_POLL_MAX_S = 0.05  # a remote peer within a few round trips

# Linux's include/net/tcp_states.h: a connection the peer reset is in TCP_CLOSE.
TCP_STATE_CLOSE = 7
TCP_INFO_STATE_BYTES = 1  # struct tcp_info starts with the u8 tcpi_state
OUTQ_INT = struct.Struct("i")
# SIOCOUTQ (== TIOCOUTQ on Linux): bytes sent but not yet acknowledged by the peer. Other
# systems number TCP states differently or have no such ioctl for sockets.
PROBES_AVAILABLE = (sys.platform.startswith("linux") and POSIX
                    and hasattr(termios, "TIOCOUTQ") and hasattr(socket, "TCP_INFO"))


class Delivery(enum.Enum):
    DELIVERED = "delivered"  # every byte written was acknowledged by the peer's kernel
    RESET = "reset"  # the peer's kernel reset the connection: nobody reads the reply
    IN_FLIGHT = "in flight"  # neither yet


class ProbedSocket(Protocol):
    """What the probes use of a transport's socket."""

    def fileno(self) -> int: ...
    def getsockopt(self, level: int, option: int, buflen: int, /) -> bytes: ...


def kernel_delivery(sock: ProbedSocket) -> Delivery:
    """One look at what the kernel knows of bytes written to ``sock``.

    ``sock`` is ``transport.get_extra_info("socket")``: asyncio's TransportSocket or
    uvloop's PseudoSocket; both have ``fileno()`` and ``getsockopt()`` (not ``ioctl``).
    The unacknowledged count is read before the state: after an RST the count is not
    reset to 0 but the state is TCP_CLOSE, so an RST between the two reads is still
    seen. SO_ERROR would show the reset too, but reading it clears it, hiding it from
    the transport. Where it cannot tell (not Linux, or a probe fails) the reply counts
    as delivered, as a reply to a client that has not sent EOF always does; a transport
    that closed on the reset says so itself (``reply_reaches_client``)."""
    if not PROBES_AVAILABLE:
        return Delivery.DELIVERED
    try:
        raw = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, bytes(OUTQ_INT.size))
        unacknowledged = OUTQ_INT.unpack(raw)[0]
        state = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_STATE_BYTES)[0]
    except (OSError, ValueError):  # ValueError: fd -1, closed by the transport
        return Delivery.DELIVERED
    if state == TCP_STATE_CLOSE:
        return Delivery.RESET
    return Delivery.DELIVERED if unacknowledged == 0 else Delivery.IN_FLIGHT


async def reply_reaches_client(
    transport: asyncio.WriteTransport, timeout_s: float = HANDOVER_CONFIRM_TIMEOUT_S
) -> bool:
    """After writing a reply to a client that sent EOF: False if its kernel reset the
    connection (the client is gone), True once every byte was acknowledged. A peer that
    neither acknowledges nor resets within ``timeout_s`` is alive but slow (a gone
    peer's kernel resets at once): the reply counts as delivered, as giving the job
    back then could hand it to two workers."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    delay_s = CONFIRM_POLL_FIRST_S
    sock = transport.get_extra_info("socket")
    while True:
        if transport.is_closing():  # a write failed on the reset
            return False
        # Bytes still in the transport's buffer (uvloop queues even small writes until
        # the loop turns; a large reply waits for the client to read) are not sent yet.
        if transport.get_write_buffer_size() == 0:
            if sock is None:
                return True
            outcome = kernel_delivery(sock)
            if outcome is not Delivery.IN_FLIGHT:
                return outcome is Delivery.DELIVERED
        if loop.time() >= deadline:
            log.info("a lease reply to a client that closed its side was neither "
                     "acknowledged nor reset in %gs: taken as delivered", timeout_s)
            return True
        await asyncio.sleep(delay_s)
        delay_s = min(delay_s * 2, CONFIRM_POLL_MAX_S)


def client_sent_eof(reader: asyncio.StreamReader) -> bool:
    """Whether the client has closed its sending side (its FIN arrived).

    The transport reads in the background and tells the StreamReader, which keeps it
    in ``_eof``; the public ``at_eof()`` stays False while requests are still buffered
    (a pipelined script that ends in a half-close), so it cannot say this. If a later
    asyncio drops the private flag, ``at_eof()`` is the closest public answer. A reader
    holding more than twice its limit has stopped reading and has not seen the EOF yet:
    a lease of such a client that is gone runs until its TTR, as every lease of a client
    that had sent EOF did before this check."""
    eof = getattr(reader, "_eof", None)
    return reader.at_eof() if eof is None else bool(eof)
