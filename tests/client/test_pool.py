"""A pooled connection the server closed while it sat idle (a process that stops closes
its idle connections: docs/operations.md, "Planned restarts") is never used again: a
complete, which is not safe to send twice, goes on a new connection and is answered,
instead of being lost with the old one."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
import uuid

from eventq.client.aio import AsyncClient
from eventq.client.sync import Client

JOB = uuid.uuid4()
SETTLE_S = 0.2  # for the close to reach the client's side


class OneReplyServer:
    """Answers ``+OK`` to the first request of each connection, then closes it."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            with sock:
                data = b""
                while b"\r\n" not in data:
                    data += sock.recv(4096)
                if data.startswith(b"complete"):  # and its data block
                    while data.count(b"\r\n") < 2:
                        data += sock.recv(4096)
                sock.sendall(b"+OK\r\n")

    def close(self) -> None:
        self.listener.close()


def test_the_sync_client_does_not_send_on_a_connection_the_server_closed():
    server = OneReplyServer()
    try:
        with Client(port=server.port, timeout_s=5) as client:
            client.complete(JOB, b"1")
            time.sleep(SETTLE_S)
            client.complete(JOB, b"2")  # ConnectionLost if sent on the closed one
        assert server.connections == 2
    finally:
        server.close()


def test_the_async_client_does_not_send_on_a_connection_the_server_closed():
    server = OneReplyServer()

    async def scenario() -> None:
        async with AsyncClient(port=server.port, timeout_s=5) as client:
            await client.complete(JOB, b"1")
            await asyncio.sleep(SETTLE_S)
            await client.complete(JOB, b"2")

    try:
        asyncio.run(scenario())
        assert server.connections == 2
    finally:
        server.close()
