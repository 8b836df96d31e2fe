"""The ports an eventq server listens on, checked and bound before anything starts.

A port in use was a 30-line traceback from faust (the gateway's) or a message inside
one, printed after "eventq serving" (the dashboard's). Now each port is tried before
anything starts, Kafka included: one line and exit status 2 if it cannot be bound
(docs/architecture.md, "Feedback to users"). Just before faust starts, the ports are
bound and listened on, and each socket is handed to its server
(``GatewayServer(sock=)``, ``WebServer(sock=)``), so no other process can take a port
between the check and the start.
"""

from __future__ import annotations

import errno
import socket
from dataclasses import dataclass

from eventq.settings import Settings

LISTEN_BACKLOG = 4096  # connections the kernel queues for the gateway before accept
EXIT_CANNOT_START = 2  # this configuration cannot serve (eventq serve, eventq up)


class PortUnusable(Exception):
    """A port this server is to listen on cannot be bound; the message says which and
    what to give instead."""


@dataclass(frozen=True)
class Endpoint:
    """An address this server listens on, and the flags that change it."""

    serves: str  # "the workq protocol"
    host: str
    port: int
    port_flag: str  # "--listen-port"
    host_flag: str  # "--listen-host"
    other_choice: str = ""  # ", or --http-port off"


def endpoints(settings: Settings) -> list[Endpoint]:
    """The gateway's address, then the dashboard's (unless it is off)."""
    found = [Endpoint("the workq protocol", settings.listen_host, settings.listen_port,
                      "--listen-port", "--listen-host")]
    if settings.http_address is not None:
        host, port = settings.http_address
        found.append(Endpoint("the dashboard and metrics", host, port, "--http-port",
                              "--http-port HOST:PORT", ", or --http-port off"))
    return found


def port_problem(endpoint: Endpoint, error: OSError) -> str:
    """What a failed bind means and what to do, in one line (pure)."""
    where = f"{endpoint.host}:{endpoint.port}"
    cannot = f"cannot serve {endpoint.serves} on {where}"
    other_port = f"give another {endpoint.port_flag}{endpoint.other_choice}"
    if error.errno == errno.EADDRINUSE:
        return (f"{cannot}: the port is in use (another eventq serve or `make run`? "
                f"`ss -ltnp 'sport = :{endpoint.port}'` shows which process): {other_port}")
    if error.errno == errno.EACCES:
        return f"{cannot}: not allowed (ports below 1024 need root): {other_port}"
    reason = error.strerror or str(error)
    return (f"{cannot}: {reason} (is {endpoint.host} an address of this machine?): give "
            f"another {endpoint.host_flag}{endpoint.other_choice}")


def bind_endpoint(endpoint: Endpoint, listen: bool) -> list[socket.socket]:
    """A socket bound to each address of the endpoint's host, as asyncio binds them
    (SO_REUSEADDR; IPv6 sockets IPv6 only), listening if ``listen``. ``PortUnusable``
    if one cannot be bound."""
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in socket.getaddrinfo(
                endpoint.host, endpoint.port, type=socket.SOCK_STREAM,
                flags=socket.AI_PASSIVE):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            if listen:
                sock.listen(LISTEN_BACKLOG)
    except OSError as error:
        for sock in sockets:
            sock.close()
        raise PortUnusable(port_problem(endpoint, error)) from None
    return sockets


def check_ports(settings: Settings) -> None:
    """``PortUnusable`` if a port of ``settings`` cannot be bound now (nothing held)."""
    for endpoint in endpoints(settings):
        for sock in bind_endpoint(endpoint, listen=False):
            sock.close()


@dataclass
class Listeners:
    """The gateway's and the dashboard's sockets, bound and listening before faust
    starts and handed to their servers. None: the server binds by address itself (off,
    or a host with several addresses, which asyncio binds one socket each: checked only)."""

    gateway: socket.socket | None = None
    web: socket.socket | None = None

    @classmethod
    def bind(cls, settings: Settings) -> "Listeners":
        held: list[socket.socket | None] = []
        try:
            for endpoint in endpoints(settings):
                sockets = bind_endpoint(endpoint, listen=True)
                if len(sockets) > 1:
                    for sock in sockets:
                        sock.close()
                held.append(sockets[0] if len(sockets) == 1 else None)
        except PortUnusable:
            cls(*held).close()
            raise
        return cls(*held)

    def close(self) -> None:
        for sock in (self.gateway, self.web):
            if sock is not None:
                sock.close()
