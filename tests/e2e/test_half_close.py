"""A client that half-closes after its last request is answered in full
(docs/architecture.md, "Feedback to users").

Piping a script (``eventq client < script``, ``printf ... | nc -N``) ends in
shutdown(SHUT_WR): no more requests, but every reply is still read, as workq answers
them. Only a client that is really gone (fully closed) while its lease waits gives the
job back (docs/architecture.md, "Abandoned commands"; tests/e2e/test_abandoned.py part 3
covers a lone waiting lease).
"""

from __future__ import annotations

import asyncio
import re
import socket
import subprocess
import sys
import time
import uuid

import pytest

from eventq.core import ReleaseAttempt, StartAttempt, decode_command
from eventq.core.batch import split_record
from eventq.gateway.delivery import client_sent_eof, reply_reaches_client
from eventq.gateway.server import READ_CHUNK_BYTES
from eventq.kafka.logreader import read_topic
from tools.servers import raw_exchange

pytestmark = pytest.mark.timeout(180)

CREATED = rb"created \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\r\n"
STATE_NEW, STATE_COMPLETED, STATE_LEASED = 0, 1, 4
SESSION_TIMEOUT_S = 30.0
UNREAD_BEHIND_BYTES = 80_000
STREAM_PAUSE_BYTES = 2 * 2**16  # asyncio's StreamReader stops reading past 2 x its limit


def half_closed_session(port: int, script: bytes, timeout_s: float = SESSION_TIMEOUT_S) -> bytes:
    """Send ``script`` in one write, half-close, and read until the server closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as sock:
        sock.sendall(script)
        sock.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
        return received


def add(port: int, job_id, name: str, payload: bytes = b"work", ttr_ms: int = 60_000) -> None:
    request = f"add {job_id} {name} {ttr_ms} 600000 {len(payload)}\r\n".encode()
    assert raw_exchange(port, request + payload + b"\r\n") == b"+OK\r\n"


def state_and_attempts(port: int, job_id) -> tuple[int, int]:
    reply = raw_exchange(port, f"inspect job {job_id}\r\n".encode(),
                         until=lambda d: re.search(CREATED, d) is not None)
    fields = dict(line.split(b" ", 1) for line in reply.split(b"\r\n")[2:] if b" " in line)
    return int(fields[b"state"]), int(fields[b"attempts"])


def wait_for_state(port: int, job_id, wanted: tuple[int, int], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while (have := state_and_attempts(port, job_id)) != wanted:
        assert time.monotonic() < deadline, f"{job_id} is {have}, never {wanted}"
        time.sleep(0.1)


def attempt_commands(server, job_id) -> list[str]:
    """The job's start-attempt and release-attempt commands in the command log."""
    found = []
    for record in read_topic(server.bootstrap, server.settings["commands-topic"]):
        for data in split_record(record.value):
            command = decode_command(data).command
            if command.job_id == job_id and isinstance(command, (StartAttempt, ReleaseAttempt)):
                found.append(type(command).__name__)
    return found


def wait_for_attempt_commands(server, job_id, wanted: list[str], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while (have := attempt_commands(server, job_id)) != wanted:
        assert time.monotonic() < deadline, f"{job_id}: {have} in the log, never {wanted}"
        time.sleep(0.2)


@pytest.mark.kafka
def test_a_pipelined_session_that_half_closes_is_answered_in_order(server):
    job_id, name = uuid.uuid4(), f"hc-{uuid.uuid4().hex[:8]}"
    script = (f"add {job_id} {name} 60000 600000 5\r\nhello\r\n"
              f"lease {name} 1000\r\n"
              f"complete {job_id} 2\r\nok\r\n"
              f"inspect job {job_id}\r\n").encode()
    started = time.monotonic()
    received = half_closed_session(server.port, script)
    print(f"session answered and closed in {time.monotonic() - started:.3f}s")
    expected = re.escape(
        f"+OK\r\n"
        f"+OK 1\r\n{job_id} {name} 60000 5\r\nhello\r\n"
        f"+OK\r\n"
        f"+OK 1\r\n{job_id} 12\r\nname {name}\r\nttr 60000\r\nttl 600000\r\n"
        f"payload-size 5\r\npayload hello\r\nmax-attempts 0\r\nattempts 1\r\n"
        f"max-fails 0\r\nfails 0\r\npriority 0\r\nstate 1\r\n".encode()) + CREATED
    assert re.fullmatch(expected, received), received


@pytest.mark.kafka
def test_a_lease_that_waits_after_a_half_close_is_answered(server):
    """`printf 'lease q 1000\\r\\n' | nc -N`: a timeout, or the job that came meanwhile,
    which stays leased to this client (it read it)."""
    name = f"hc-wait-{uuid.uuid4().hex[:8]}"
    assert half_closed_session(server.port, f"lease {name} 1000\r\n".encode()) == b"-TIMEOUT\r\n"

    job_id = uuid.uuid4()
    with socket.create_connection(("127.0.0.1", server.port), timeout=SESSION_TIMEOUT_S) as sock:
        sock.sendall(f"lease {name} 20000\r\n".encode())
        sock.shutdown(socket.SHUT_WR)
        time.sleep(0.3)  # the lease is waiting, its client's EOF seen
        add(server.port, job_id, name)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    assert received == f"+OK 1\r\n{job_id} {name} 60000 4\r\nwork\r\n".encode()
    assert state_and_attempts(server.port, job_id) == (STATE_LEASED, 1)


@pytest.mark.kafka
def test_a_client_gone_with_requests_still_unread_gives_the_job_back(server):
    """A full close while a lease waits with requests behind it that the server has not
    read yet: the reader's at_eof() is False then, but the EOF came, and the job the
    lease would have got goes back, ready with no attempt spent, long before its TTR."""
    name = f"hc-gone-{uuid.uuid4().hex[:8]}"
    # More than one read of the server takes, less than its reader buffers before it
    # stops reading (then it would not see the EOF): the tail waits behind the lease.
    behind = b"inspect server\r\n" * (UNREAD_BEHIND_BYTES // len(b"inspect server\r\n"))
    assert READ_CHUNK_BYTES < len(behind) < STREAM_PAUSE_BYTES
    gone = socket.create_connection(("127.0.0.1", server.port))
    gone.sendall(f"lease {name} 60000\r\n".encode() + behind)
    gone.close()
    time.sleep(0.5)  # the lease is waiting and the server has seen the EOF
    job_id = uuid.uuid4()
    add(server.port, job_id, name, ttr_ms=600_000)
    # Claimed by the waiting lease, then given back (a fresh job is (NEW, 0) too).
    wait_for_attempt_commands(server, job_id, ["StartAttempt", "ReleaseAttempt"])
    wait_for_state(server.port, job_id, (STATE_NEW, 0))


@pytest.mark.kafka
def test_eventq_client_prints_every_reply_of_a_piped_script(server):
    """`eventq client < script` waits for the server to close, however long a lease in
    the script waits (it used to give up on the replies 5 s after its input ended)."""
    name = f"hc-cli-{uuid.uuid4().hex[:8]}"
    job_id = uuid.uuid4()
    script = (f"lease {name} 6000\n"
              f"add {job_id} {name} 60000 600000 5\nhello\n"
              f"lease {name} 1000\n"
              f"complete {job_id} 2\nok\n")
    started = time.monotonic()
    printed = subprocess.run(
        [sys.executable, "-m", "eventq.cli", "client", "--listen-port", str(server.port)],
        input=script, capture_output=True, text=True, timeout=60,
    )
    print(f"eventq client ran {time.monotonic() - started:.3f}s")
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout == (f"-TIMEOUT\n+OK\n+OK 1\n{job_id} {name} 60000 5\nhello\n"
                              f"+OK\n"), printed.stderr
    assert state_and_attempts(server.port, job_id) == (STATE_COMPLETED, 1)


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_reply_after_eof_is_found_delivered_or_reset(loop):
    """The probe itself on loopback, under both event loops the server may run on
    (eventq/run/serve.py installs uvloop when it can): a half-closed peer's kernel
    acknowledges the reply, a fully closed one's resets the connection."""
    if loop == "uvloop":
        uvloop = pytest.importorskip("uvloop")
        runner = asyncio.Runner(loop_factory=uvloop.new_event_loop)
    else:
        runner = asyncio.Runner()
    with runner:
        outcomes = runner.run(reply_outcomes())
    assert outcomes == {"half-closed": True, "closed": False}


async def reply_outcomes() -> dict[str, bool]:
    confirmed: asyncio.Queue[bool] = asyncio.Queue()

    async def answer_after_eof(reader, writer) -> None:
        await reader.readline()
        while not client_sent_eof(reader):
            await asyncio.sleep(0.01)
        writer.write(b"+OK\r\n")
        await confirmed.put(await reply_reaches_client(writer.transport))
        writer.close()

    server = await asyncio.start_server(answer_after_eof, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    outcomes = {}
    async with server:
        for kind in ("half-closed", "closed"):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(b"lease q 1000\r\n")
            if kind == "half-closed":
                writer.write_eof()
            else:
                writer.close()
            outcomes[kind] = await asyncio.wait_for(confirmed.get(), SESSION_TIMEOUT_S)
            if kind == "half-closed":
                assert await reader.read() == b"+OK\r\n"
                writer.close()
    return outcomes
