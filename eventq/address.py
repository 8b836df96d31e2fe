"""``host:port`` addresses (``--advertise``, a peer's gateway, ``eventq worker --server``,
faust's URL of a process)."""

from __future__ import annotations

MAX_PORT = 65_535


def host_and_port(text: str, allow_port_zero: bool = False) -> tuple[str, int]:
    """``("host", port)`` of ``host:port`` (``[::1]:9922`` for IPv6); ``ValueError``
    naming the text when it is not one. Port 0 (any free port) only for a listener
    that says where it listens (``allow_port_zero``)."""
    host, _, port = text.rpartition(":")
    lowest = 0 if allow_port_zero else 1
    if not host or not port.isdigit() or not lowest <= int(port) <= MAX_PORT:
        raise ValueError(f"expected HOST:PORT, not {text!r}")
    return host.strip("[]"), int(port)


def address_of(url: str) -> str:
    """faust's canonical URL ("http://host:port") as the gateway's host:port."""
    return url.split("://", 1)[-1].rstrip("/")
