"""The README's quickstart session, replayed byte for byte against a real server, and
piped into `eventq client` as a reader would; the README's Python quickstart, and the
plain-producer pipeline of docs/spark.md, "Bulk loads beside workers", run as written."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.kafka

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SPARK_DOC = ROOT / "docs" / "spark.md"  # its "Bulk loads beside workers"
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


def expected_pattern(lines: list[str], line_end: bytes = b"\r\n") -> re.Pattern:
    parts = []
    for line in lines:
        key = line.split(" ", 1)[0]
        if key in VARYING:
            parts.append(re.escape(key.encode() + b" ") + VARYING[key])
        else:
            parts.append(re.escape(line.encode()))
    return re.compile(line_end.join(parts) + line_end, re.S)


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


def test_readme_sessions_piped_into_eventq_client(server):
    """Every ``>`` line of a session piped into `eventq client` at once: it sends them,
    closes its side, and prints every ``<`` line (with ``\\n`` line ends) before it
    exits; the server answers all requests that came before the half-close."""
    for block in session_blocks():
        steps = exchanges(block)
        script = "".join(line + "\n" for sent, _ in steps for line in sent)
        started = time.monotonic()
        printed = subprocess.run(
            [sys.executable, "-m", "eventq.cli", "client", "--listen-port", str(server.port)],
            input=script.encode(), capture_output=True, timeout=60,
        )
        print(f"eventq client ran a README session in {time.monotonic() - started:.2f}s")
        assert printed.returncode == 0, printed.stderr
        expected = expected_pattern([line for _, lines in steps for line in lines], b"\n")
        assert expected.fullmatch(printed.stdout), (printed.stdout, printed.stderr)


def python_snippet(marker: str, doc: Path = README) -> str:
    """The one ```python block of ``doc`` (the README) that holds ``marker``."""
    blocks = re.findall(r"```python\n(.*?)```", doc.read_text(), flags=re.S)
    [snippet] = [block for block in blocks if marker in block]
    return snippet


def pipeline_snippet() -> str:
    return python_snippet("confluent_kafka", SPARK_DOC)


def test_readme_python_quickstart_adds_jobs_and_runs_a_worker(server):
    """The README's Python quickstart as written (at most 15 lines), against the test
    server: its jobs are added, and its worker does them until it is stopped."""
    import threading

    from eventq.client import Client

    code = python_snippet("from eventq.worker import Worker")
    assert len(code.strip().splitlines()) <= 15
    assert code.count('"127.0.0.1", 9922') == 2 and code.rstrip().endswith(
        "worker.run()                         # until Ctrl-C; SIGTERM lets running jobs finish")
    code = code.replace('"127.0.0.1", 9922', f'"127.0.0.1", {server.port}')
    code = code.replace("thumbnails", f"thumbnails-{time.monotonic_ns()}")
    head, _, _ = code.rpartition("worker.run()")
    namespace: dict = {}
    exec(compile(head, "README.md", "exec"), namespace)
    worker = namespace["worker"]
    thread = threading.Thread(target=worker.run, daemon=True)  # what worker.run() does
    thread.start()
    try:
        with Client(port=server.port) as client:
            results = [client.result(job_id, wait_timeout_ms=30_000).text
                       for job_id in namespace["ids"]]
    finally:
        worker.stop()
        thread.join(30)
    assert results == ["thumb-photo-0.jpg", "thumb-photo-1.jpg", "thumb-photo-2.jpg"]


def test_docs_pipeline_snippet_enqueues_through_the_bulk_lane(server):
    """The plain-producer pipeline of docs/spark.md, "Bulk loads beside workers", run
    against the test server's topics: every job it writes to the bulk topic becomes
    ready, and nothing goes to the command log but what the server admits."""
    import asyncio

    from eventq.client.raw import RawClient as Client
    from eventq.errors import NotFound
    from eventq.kafka.topics import bulk_name_for

    name = f"emails-{time.monotonic_ns()}"
    code = pipeline_snippet()
    settings = (
        'BOOTSTRAP, TOPIC, PARTITIONS = "127.0.0.1:9092", "eventq.bulk", 4',
        '"emails"',
    )
    for expected in settings:
        assert expected in code, f"docs/spark.md's snippet no longer has {expected}"
    code = code.replace(settings[0], f"BOOTSTRAP, TOPIC, PARTITIONS = {server.bootstrap!r}, "
                        f"{bulk_name_for(server.settings['commands-topic'])!r}, "
                        f"{server.partitions}").replace(settings[1], repr(name))
    exec(compile(code, "docs/spark.md", "exec"), {})

    async def ready() -> int:
        async with await Client.connect(port=server.port) as c:
            try:
                return (await c.inspect_queue(name))["ready-len"]
            except NotFound:
                return 0

    deadline = time.monotonic() + 60
    while (have := asyncio.run(ready())) != 10_000:
        assert time.monotonic() < deadline, f"{have} of the snippet's 10,000 jobs are ready"
        time.sleep(0.2)
