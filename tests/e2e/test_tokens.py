"""Tokens and roles on a live server (docs/security.md, "Tokens and roles"): failing
closed, roles, the clients' and the worker's token, SIGHUP, tokens never logged, and two
processes of one cluster that still forward to each other as admin."""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import pytest

from eventq.client import Client, Forbidden, Unauthorized
from eventq.worker import Worker
from support.lines import Line
from tools.servers import started_with_tokens

pytestmark = [pytest.mark.kafka]

ADMIN, READER, WORKER, PRODUCER = "adm-Tk9", "rd-Tk9", "wk-Tk9", "pr-Tk9"
TOKENS = f"""\
# eventq tokens (docs/security.md, "A tokens file")
{ADMIN} admin
{READER} reader
{WORKER} worker
{PRODUCER} producer
"""


@pytest.fixture(scope="module")
def tokens_file(server) -> Path:
    return Path(server.settings["tokens-file"])


@pytest.fixture(scope="module")
def server(kafka_bootstrap, tmp_path_factory):
    process = started_with_tokens(kafka_bootstrap, f"m{os.getpid()}-tokens",
                                  tmp_path_factory.mktemp("tokens"), TOKENS, ADMIN)
    yield process
    code = process.stop()
    log = process.log_path.read_text(errors="replace")
    for token in (ADMIN, READER, WORKER, PRODUCER):
        assert token not in log, f"a token is in the server's log:\n{process.log_tail()}"
    assert code == 0, process.log_tail()


def add_line(job_id: uuid.UUID, queue: str) -> bytes:
    return b"add %s %s 10000 60000 2\r\nhi\r\n" % (str(job_id).encode(), queue.encode())


def test_nothing_before_auth_and_each_role_its_verbs(server):
    q = f"tok-{time.monotonic_ns()}"
    job = uuid.uuid4()
    line = Line(server.port)
    try:
        # Fail closed: framed as usual, answered Unauthorized, no effect, still open.
        assert line.ask(add_line(job, q)) == b"-CLIENT-ERROR Unauthorized\r\n"
        assert line.ask(b"inspect nosuch\r\n") == b"-CLIENT-ERROR Unauthorized\r\n"
        assert line.ask(b"auth nope\r\n") == b"-CLIENT-ERROR Unauthorized\r\n"
        assert line.ask(b"auth %s\r\n" % READER.encode()) == b"+OK\r\n"
        assert line.ask(b"inspect job %s\r\n" % str(job).encode()) == b"-NOT-FOUND\r\n"
        assert line.ask(add_line(job, q)) == b"-CLIENT-ERROR Forbidden\r\n"
        assert line.ask(b"pause %s\r\n" % q.encode()) == b"-CLIENT-ERROR Forbidden\r\n"
        assert line.ask(b"auth %s\r\n" % PRODUCER.encode()) == b"+OK\r\n"
        assert line.ask(add_line(job, q)) == b"+OK\r\n"
        assert line.ask(b"lease %s 0\r\n" % q.encode()) == b"-CLIENT-ERROR Forbidden\r\n"
        assert line.ask(b"auth %s\r\n" % WORKER.encode()) == b"+OK\r\n"
        reply = line.ask(b"lease %s 1000\r\n" % q.encode(), lines=3)
        assert reply.startswith(b"+OK 1\r\n%s " % str(job).encode()), reply
        assert line.ask(b"complete %s 2\r\nok\r\n" % str(job).encode()) == b"+OK\r\n"
        # A failed auth drops the earlier one.
        assert line.ask(b"auth wrong\r\n") == b"-CLIENT-ERROR Unauthorized\r\n"
        assert line.ask(b"result %s 0\r\n" % str(job).encode()) == b"-CLIENT-ERROR Unauthorized\r\n"
    finally:
        line.close()


def test_the_clients_and_the_worker_present_their_token(server):
    q = f"tok-client-{time.monotonic_ns()}"
    with Client("127.0.0.1", server.port, connect_timeout_s=5) as anonymous:
        with pytest.raises(Unauthorized):
            anonymous.add(q, b"x")
    with pytest.raises(Unauthorized):
        with Client("127.0.0.1", server.port, token="not-a-token") as wrong:
            wrong.inspect_queues(0, 10)
    with Client("127.0.0.1", server.port, token=READER) as reader:
        with pytest.raises(Forbidden):
            reader.add(q, b"x")
    with Client("127.0.0.1", server.port, token=PRODUCER) as producer:
        job_id = producer.add(q, b"payload")
        worker = Worker("127.0.0.1", server.port, concurrency=1, status=None, token=WORKER)

        @worker.handler(q)
        def handle(job):
            worker.stop()
            return b"done " + job.payload

        worker.run()
        assert producer.result(job_id, wait_timeout_ms=10_000).data == b"done payload"


def test_sighup_reads_the_file_again_and_a_removed_token_stops_at_once(server, tokens_file):
    line = Line(server.port)
    absent = b"result %s 0\r\n" % str(uuid.uuid4()).encode()  # a one-line answer
    try:
        assert line.ask(b"auth %s\r\n" % READER.encode()) == b"+OK\r\n"
        assert line.ask(absent) == b"-NOT-FOUND\r\n"
        tokens_file.write_text(TOKENS.replace(f"{READER} reader\n", ""))
        server.process.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 20
        while (reply := line.ask(absent)) != b"-CLIENT-ERROR Unauthorized\r\n":
            assert reply == b"-NOT-FOUND\r\n" and time.monotonic() < deadline, reply
            time.sleep(0.2)
        assert line.ask(b"auth %s\r\n" % READER.encode()) == b"-CLIENT-ERROR Unauthorized\r\n"
        # A file that cannot be used leaves the tokens held.
        tokens_file.write_text("broken line with too many words\n")
        server.process.send_signal(signal.SIGHUP)
        time.sleep(1)
        assert line.ask(b"auth %s\r\n" % PRODUCER.encode()) == b"+OK\r\n"
        assert "tokens not reloaded" in server.log_path.read_text(errors="replace")
    finally:
        tokens_file.write_text(TOKENS)
        server.process.send_signal(signal.SIGHUP)
        line.close()


def test_two_processes_with_tokens_still_forward_to_each_other(
        kafka_bootstrap, tmp_path, tokens_file):
    """Peers authenticate as admin: a request for a job the other process owns is
    forwarded and answered (every add below lands in some partition of the other
    process for at least one of the ids)."""
    from tools.servers import ServerProcess, check_forwarding, start_together

    prefix = f"m{os.getpid()}-tokens2"
    processes = [ServerProcess(kafka_bootstrap, prefix, tmp_path / f"p{i}",
                               tokens_file=str(tokens_file)) for i in range(2)]
    for process in processes:
        process.ready_auth = b"auth %s\r\n" % ADMIN.encode()
    processes[0].create_topics()
    start_together(processes)
    tokens = {0: PRODUCER, 1: READER}
    check_forwarding(processes, lambda i: Client("127.0.0.1", processes[i].port,
                                                 token=tokens[i]), "tok-two")
