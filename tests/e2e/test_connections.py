"""Thousands of idle connections cost little; slow or malicious clients stall only
themselves."""

from __future__ import annotations

import socket
import time
import uuid
from pathlib import Path

import pytest

from tools.servers import raw_exchange

pytestmark = [pytest.mark.kafka, pytest.mark.timeout(180)]

IDLE_CONNECTIONS = 3000


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_idle_connections_are_cheap_and_do_not_block_service(server):
    before = rss_kib(server.process.pid)
    idle = []
    try:
        for _ in range(IDLE_CONNECTIONS):
            idle.append(socket.create_connection(("127.0.0.1", server.port), timeout=10))
        deadline = time.monotonic() + 30
        while True:
            reply = raw_exchange(server.port, b"inspect server\r\n",
                                 until=lambda d: b"started" in d and d.endswith(b"\r\n"))
            clients = int(reply.split(b"active-clients ")[1].split(b"\r\n")[0])
            if clients >= IDLE_CONNECTIONS + 1:
                break
            assert time.monotonic() < deadline, clients
            time.sleep(0.2)
        after = rss_kib(server.process.pid)
        per_connection = (after - before) / IDLE_CONNECTIONS
        print(f"{IDLE_CONNECTIONS} idle connections: RSS {before} -> {after} KiB "
              f"({per_connection:.1f} KiB each)")
        assert per_connection < 64  # a task and small buffers, not a thread
        job = uuid.uuid4()
        assert raw_exchange(server.port, f"add {job} idle 1000 60000 1\r\nx\r\n".encode()) == b"+OK\r\n"
    finally:
        for sock in idle:
            sock.close()


def test_slow_and_malicious_clients_do_not_stall_others(server):
    name = "slow-" + uuid.uuid4().hex[:8]
    hostile = []
    try:
        # 1. half a line, never finished
        s = socket.create_connection(("127.0.0.1", server.port))
        s.sendall(b"add 6ba7b810-9dad-41d1-80b4-00c04fd430c4 q 1000 60000 10")
        hostile.append(s)
        # 2. a header promising 1 MiB, then a trickle of the block
        s = socket.create_connection(("127.0.0.1", server.port))
        s.sendall(f"add {uuid.uuid4()} {name} 1000 60000 1048576\r\n".encode() + b"x" * 1000)
        hostile.append(s)
        # 3. a client that pipelines many requests and never reads its replies
        s = socket.create_connection(("127.0.0.1", server.port))
        s.setblocking(False)
        flood = b"inspect server\r\n" * 200_000
        sent = 0
        deadline = time.monotonic() + 5
        while sent < len(flood) and time.monotonic() < deadline:
            try:
                sent += s.send(flood[sent:sent + 65536])
            except BlockingIOError:
                time.sleep(0.01)
        hostile.append(s)
        # 4. a blocking lease holding its connection
        s = socket.create_connection(("127.0.0.1", server.port))
        s.sendall(f"lease {name}-never 60000\r\n".encode())
        hostile.append(s)

        # Meanwhile a well-behaved client is served promptly, many times over.
        began = time.monotonic()
        for _ in range(20):
            job = uuid.uuid4()
            assert raw_exchange(server.port, f"add {job} {name} 1000 60000 1\r\nx\r\n".encode()) == b"+OK\r\n"
            reply = raw_exchange(server.port, f"lease {name} 1000\r\n".encode(),
                                 until=lambda d: d.endswith(b"x\r\n"))
            assert reply.startswith(b"+OK 1\r\n")
        elapsed = time.monotonic() - began
        print(f"20 add+lease round trips beside 4 hostile clients: {elapsed:.2f}s")
        assert elapsed < 20
    finally:
        for s in hostile:
            s.close()
