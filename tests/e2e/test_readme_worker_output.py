"""The README's Python worker block, run as a program of its own (as a user runs it),
shows what the README says: a line per job, and a status line on a terminal; plain
lines, no escape codes, when stderr is not a terminal."""

from __future__ import annotations

import os
import pty
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.cli_run import Watched

pytestmark = pytest.mark.kafka

README = Path(__file__).resolve().parents[2] / "README.md"
JOBS = 3  # the block adds three


def readme_worker_block(port: int, queue: str) -> str:
    """The README's Python block with the worker, against the test server."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    [code] = [block for block in blocks if "from eventq.worker import Worker" in block]
    assert code.count('"127.0.0.1", 9922') == 2 and code.count('"thumbnails"') == 2
    return (code.replace('"127.0.0.1", 9922', f'"127.0.0.1", {port}')
            .replace('"thumbnails"', repr(queue)))


def test_the_readme_worker_logs_a_line_per_job_in_plain_text(server):
    queue = f"thumbnails-{time.monotonic_ns()}"
    watched = Watched.start([sys.executable, "-c", readme_worker_block(server.port, queue)])
    try:
        deadline = time.monotonic() + 60
        while watched.output.count("outcome=completed") < JOBS:
            assert time.monotonic() < deadline, f"no line per job:\n{watched.output}"
            assert watched.process.poll() is None, watched.output
            time.sleep(0.1)
        code = watched.interrupt()
    finally:
        watched.kill()
    assert code == 0, watched.output
    jobs = [line for line in watched.output.splitlines() if "outcome=completed" in line]
    assert len(jobs) == JOBS and all(f"queue={queue}" in line for line in jobs), jobs
    assert f"stopped: {JOBS} done, 0 failed" in watched.output
    assert "\x1b" not in watched.output and "\r" not in watched.output  # not a terminal


def test_the_readme_worker_shows_a_status_line_on_a_terminal(server):
    queue = f"thumbnails-{time.monotonic_ns()}"
    leader, follower = pty.openpty()
    process = subprocess.Popen([sys.executable, "-c", readme_worker_block(server.port, queue)],
                               stdin=subprocess.DEVNULL, stdout=follower, stderr=follower)
    os.close(follower)
    screen = b""
    try:
        deadline = time.monotonic() + 60
        while b"\r\x1b[K%d done, 0 failed" % JOBS not in screen:
            assert time.monotonic() < deadline, f"no status line: {screen!r}"
            screen += read_some(leader)
        process.send_signal(signal.SIGINT)
        assert process.wait(30) == 0
        screen += read_rest(leader)
    finally:
        if process.poll() is None:
            process.kill()
        os.close(leader)
    text = screen.decode(errors="replace")
    assert text.count("outcome=completed") == JOBS, text
    # Each log line first clears the status line it would run into.
    assert all(line.startswith("\x1b[K") or not line.strip()
               for line in text.split("\r")[1:]), text
    assert f"stopped: {JOBS} done" in text


def read_some(fd: int) -> bytes:
    import select

    ready, _, _ = select.select([fd], [], [], 0.2)
    if not ready:
        return b""
    try:
        return os.read(fd, 65536)
    except OSError:  # the other side closed
        return b""


def read_rest(fd: int) -> bytes:
    data = b""
    while chunk := read_some(fd):
        data += chunk
    return data
