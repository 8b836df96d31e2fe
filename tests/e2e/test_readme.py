"""The README's quickstart session, replayed byte for byte against a real server."""

from __future__ import annotations

import re
import socket
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.kafka

README = Path(__file__).resolve().parents[2] / "README.md"
VARYING = {"created": rb"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"}  # the clock's part of a reply


def session_blocks() -> list[list[str]]:
    return re.findall(r"```workq\n(.*?)```", README.read_text(), flags=re.S)


def exchanges(block: str):
    """[(bytes sent, expected reply lines)] in order."""
    steps, sent, expected = [], [], []
    for line in block.splitlines():
        if line.startswith("> "):
            if expected:
                steps.append((sent, expected))
                sent, expected = [], []
            sent.append(line[2:])
        elif line.startswith("< "):
            expected.append(line[2:])
    steps.append((sent, expected))
    return steps


def expected_pattern(lines: list[str]) -> re.Pattern:
    parts = []
    for line in lines:
        key = line.split(" ", 1)[0]
        if key in VARYING:
            parts.append(re.escape(key.encode() + b" ") + VARYING[key])
        else:
            parts.append(re.escape(line.encode()))
    return re.compile(b"\r\n".join(parts) + b"\r\n", re.S)


def read_until(sock: socket.socket, pattern: re.Pattern, timeout_s: float = 10.0) -> bytes:
    data = b""
    deadline = time.monotonic() + timeout_s
    while not pattern.fullmatch(data):
        assert time.monotonic() < deadline, f"got {data!r}, wanted {pattern.pattern!r}"
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = sock.recv(65536)
        except socket.timeout:
            continue
        assert chunk, f"connection closed after {data!r}"
        data += chunk
    return data


def test_readme_has_a_quickstart_session():
    [block] = session_blocks()
    assert len(exchanges(block)) >= 6


def test_readme_session_runs_byte_for_byte(server):
    [block] = session_blocks()
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        for sent, expected in exchanges(block):
            sock.sendall(b"".join(line.encode() + b"\r\n" for line in sent))
            read_until(sock, expected_pattern(expected))
