"""``host:port`` addresses (``--advertise``, a peer's gateway, ``eventq worker --server``)."""

from __future__ import annotations

MAX_PORT = 65_535


def host_and_port(text: str) -> tuple[str, int]:
    """``("host", port)`` of ``host:port`` (``[::1]:9922`` for IPv6); ``ValueError``
    naming the text when it is not one."""
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) <= MAX_PORT:
        raise ValueError(f"expected HOST:PORT, not {text!r}")
    return host.strip("[]"), int(port)
