"""A raw protocol connection for tests that need the bytes themselves (the tokens tests:
tests/e2e/test_tokens.py, test_scope_tokens.py): send lines, read reply lines."""

from __future__ import annotations

import socket


class Line:
    """One connection to 127.0.0.1:``port``; with ``token``, authenticated first."""

    def __init__(self, port: int, token: str | None = None, timeout_s: float = 20) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
        self.buffer = b""
        if token is not None:
            assert self.ask(b"auth %s\r\n" % token.encode()) == b"+OK\r\n"

    def ask(self, data: bytes, lines: int = 1) -> bytes:
        """Send ``data``, then the next ``lines`` reply lines."""
        self.sock.sendall(data)
        while self.buffer.count(b"\r\n") < lines:
            chunk = self.sock.recv(65536)
            assert chunk, f"closed after {self.buffer!r}"
            self.buffer += chunk
        parts = self.buffer.split(b"\r\n")
        reply, self.buffer = b"\r\n".join(parts[:lines]) + b"\r\n", b"\r\n".join(parts[lines:])
        return reply

    def blocks(self, data: bytes) -> bytes:
        """A reply of ``+OK <n>`` blocks, each ``<head> <k>`` and k lines."""
        head = self.ask(data)
        if not head.startswith(b"+OK "):
            return head
        count, lines = int(head.split()[1]), []
        for _ in range(count):
            block = self.ask(b"", 1)
            keys = int(block.split()[-1])
            lines.append(block + (self.ask(b"", keys) if keys else b""))
        return head + b"".join(lines)

    def close(self) -> None:
        self.sock.close()
