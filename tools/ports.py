"""Runs of consecutive free ports, for what takes consecutive ports (importable because
pytest puts tests/ on sys.path): `eventq up --processes N` listens on N ports from
--listen-port, and a local Kafka cluster takes consecutive port pairs."""

from __future__ import annotations

import random
import socket

# Below the kernel's ephemeral range (32768-60999 by default), where support.free_port
# picks: the two never hand out the same port.
FIRST_PORT = 20_000
PAST_LAST_PORT = 32_000
ATTEMPTS = 200


def consecutive_free_ports(count: int) -> int:
    """The first of ``count`` consecutive loopback ports that are free now."""
    for _ in range(ATTEMPTS):
        first = random.randrange(FIRST_PORT, PAST_LAST_PORT - count)
        if all_free(range(first, first + count)):
            return first
    raise AssertionError(f"no {count} consecutive free ports in {ATTEMPTS} tries")


def all_free(ports: range) -> bool:
    sockets = []
    try:
        for port in ports:
            sock = socket.socket()
            sockets.append(sock)
            sock.bind(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        for sock in sockets:
            sock.close()


_HANDED_OUT: set[int] = set()


def quiet_free_port() -> int:
    """A free loopback port below the kernel's ephemeral range, never handed out before
    by this process: a port another process binds later cannot be one the kernel gives
    to a socket bound to port 0 meanwhile (a proxy's listener took a broker's port once
    between free_port() choosing it and the broker binding it)."""
    for _ in range(ATTEMPTS):
        port = random.randrange(FIRST_PORT, PAST_LAST_PORT)
        if port not in _HANDED_OUT and all_free(range(port, port + 1)):
            _HANDED_OUT.add(port)
            return port
    raise AssertionError(f"no free port below the ephemeral range in {ATTEMPTS} tries")
