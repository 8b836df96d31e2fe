"""What a user sees when something expected goes wrong (docs/architecture.md, "Feedback
to users"), run as a user runs it (a subprocess): said in a line or two saying what to
do, never a traceback, plain text when the output is not a terminal. No Kafka needed:
the Kafka and the server here are ports nobody listens on, or that only count who calls.

What is refused "at once" is refused before anything starts: the command exits before it
called Kafka (or the eventq server) at all, which a listener that only counts its callers
shows however slowly the machine starts Python. What is said "within 5 s" when Kafka or
the server does not answer is timed, from the command's start as a user sees it: those
tests are marked ``alone``, as the only ones whose assertion is a wall-clock deadline
that the start of the process is part of, and `make test` runs them after the rest,
with nothing beside them."""

from __future__ import annotations

import re
import socket
import stat
import subprocess
import sys
import time

import pytest

from support.cli_run import EVENTQ, Watched
from tools.servers import free_port

FEEDBACK_S = 5.0  # what does not answer is said within this long
# make test runs these after the rest, with nothing beside them: under two workers and
# the works beside the suite a start that takes 1 s here took 8-26 s (CI 2026-11-27).
alone = pytest.mark.alone


def nobody_listens() -> int:
    return free_port()  # free now, and never handed out again by this process


class CountingListener:
    """A port that takes connections and never answers, counting them: a Kafka or an
    eventq server that a command must not have called yet when it exits."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.sock.setblocking(False)
        self.port = self.sock.getsockname()[1]
        self.address = f"127.0.0.1:{self.port}"

    def callers(self) -> int:
        """Connections made so far (the kernel queued them: accepted here)."""
        count = 0
        while True:
            try:
                conn, _ = self.sock.accept()
            except BlockingIOError:
                return count
            conn.close()
            count += 1


@pytest.fixture
def kafka():
    """Where the commands' Kafka is, which must not be called."""
    listener = CountingListener()
    yield listener
    listener.sock.close()


@pytest.fixture
def taken_port():
    """A port another process listens on."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield sock.getsockname()[1]


def run(*args: str, timeout_s: float = 120.0, **kwargs) -> tuple[float, subprocess.CompletedProcess]:
    started = time.monotonic()
    done = subprocess.run([*EVENTQ, *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=timeout_s, **kwargs)
    return time.monotonic() - started, done


def assert_plain(text: str) -> None:
    assert "Traceback" not in text, text
    assert "\x1b" not in text, text  # not a terminal: no escape codes


def serve_flags(tmp_path, **flags) -> list[str]:
    settings = {"bootstrap": f"127.0.0.1:{nobody_listens()}", "data-dir": str(tmp_path),
                "listen-port": str(nobody_listens()), "http-port": "off", **flags}
    return [part for key, value in settings.items() for part in (f"--{key}", value)]


# --- eventq serve ------------------------------------------------------------------


@alone
def test_serve_without_kafka_says_so_within_5s_keeps_trying_and_stops_on_ctrl_c(tmp_path):
    watched = Watched.start([*EVENTQ, "serve", *serve_flags(tmp_path)])
    try:
        at = watched.wait_for(r"does not answer", timeout_s=15)
        assert at < FEEDBACK_S, f"said after {at:.1f}s"
        assert watched.process.poll() is None  # still trying
        code = watched.interrupt()
    finally:
        watched.kill()
    assert code == 0, watched.output
    line = watched.output.strip().splitlines()[0]
    assert "--bootstrap" in line and "Still trying" in line, line
    assert_plain(watched.output)


@pytest.mark.parametrize("command, flag, said", [
    ("serve", "listen-port", ("in use", "--listen-port")),
    ("serve", "http-port", ("--http-port off",)),
    ("up", "listen-port", ("--listen-port",)),  # before Kafka, topics or any process
])
def test_a_port_in_use_is_said_in_one_line_before_anything_starts(
        tmp_path, taken_port, kafka, command, flag, said):
    _, done = run(command, *serve_flags(tmp_path, **{flag: str(taken_port),
                                                     "bootstrap": kafka.address}))
    assert done.returncode == 2, done
    assert kafka.callers() == 0  # before Kafka was asked anything
    [line] = done.stderr.splitlines()
    assert f"127.0.0.1:{taken_port}" in line and all(part in line for part in said), line
    assert "serving" not in done.stdout + done.stderr
    if command == "up":
        assert done.stdout == ""  # no Kafka, no topics, no process started
    assert_plain(done.stdout + done.stderr)


@alone
def test_topics_create_without_kafka_fails_within_5s(tmp_path):
    took_s, done = run("topics", "create", "--bootstrap", f"127.0.0.1:{nobody_listens()}")
    assert done.returncode == 1, done
    assert took_s < FEEDBACK_S
    [line] = done.stderr.splitlines()
    assert "does not answer" in line and "--bootstrap" in line, line
    assert_plain(done.stderr)


# --- flags -------------------------------------------------------------------------


def test_an_unknown_flag_of_serve_shows_serves_usage_and_the_flag_meant():
    _, done = run("serve", "--port", "9999")
    assert done.returncode == 2
    assert done.stderr.startswith("usage: eventq serve ")
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("eventq serve: error: unrecognized arguments: --port 9999")
    assert "did you mean --listen-port" in last, last


def test_client_help_lists_only_the_servers_address_a_token_and_tls():
    _, done = run("client", "--help")
    assert done.returncode == 0
    flags = set(re.findall(r"^\s+-h, (--\w+)|^\s+(--[\w-]+) ", done.stdout, flags=re.M))
    flags = {flag for pair in flags for flag in pair if flag}
    assert flags == {"--help", "--listen-host", "--listen-port", "--token", "--tls-ca",
                     "--tls-cert", "--tls-key"}, flags


@pytest.mark.parametrize("command", ["serve", "up"])
def test_tls_files_that_cannot_be_used_are_said_at_once(tmp_path, kafka, command):
    key = tmp_path / "server.key"
    key.write_text("not a key\n")
    _, done = run(command, *serve_flags(tmp_path, **{
        "tls-cert": str(tmp_path / "missing.pem"), "tls-key": str(key),
        "bootstrap": kafka.address}))
    assert done.returncode == 2, done
    assert kafka.callers() == 0  # at once: before Kafka was asked anything
    assert f"{tmp_path / 'missing.pem'} is not a file" in done.stderr, done.stderr
    assert_plain(done.stdout + done.stderr)


@pytest.mark.parametrize("command", ["serve", "up"])
@pytest.mark.parametrize(("text", "said"), [
    ("s3cret-Zq admin\ns3cret-Zq reader\n", "line 2: this token is on an earlier line too"),
    ("# only a comment\n", "holds no token"),
    (None, "cannot read the tokens file"),
])
def test_a_tokens_file_that_cannot_be_used_is_said_at_once_without_its_tokens(
        tmp_path, kafka, command, text, said):
    path = tmp_path / "tokens"
    if text is not None:
        path.write_text(text)
    _, done = run(command, *serve_flags(tmp_path, **{"tokens-file": str(path),
                                                     "bootstrap": kafka.address}))
    assert done.returncode == 2, done
    assert kafka.callers() == 0  # at once: before Kafka was asked anything
    assert said in done.stderr and str(path) in done.stderr, done.stderr
    assert "s3cret" not in done.stdout + done.stderr
    assert_plain(done.stdout + done.stderr)


# --- clients and workers pointed at the wrong port ------------------------------------


@alone
def test_the_python_client_says_within_5s_that_it_cannot_connect():
    port = nobody_listens()
    code = ("from eventq.client import Client\n"
            f"with Client('127.0.0.1', {port}) as client:\n"
            "    client.add('q', b'x')\n")
    watched = Watched.start([sys.executable, "-c", code])
    try:
        at = watched.wait_for(rf"cannot connect to the eventq server at 127.0.0.1:{port}",
                              timeout_s=15)
    finally:
        watched.kill()
    assert at < FEEDBACK_S, f"said after {at:.1f}s"
    assert "Connection refused" in watched.output and "eventq serve" in watched.output


def start_worker_of_nobody() -> Watched:
    return Watched.start([*EVENTQ, "worker", "--server", f"127.0.0.1:{nobody_listens()}",
                          "--queue", "q", "--", "cat"])


@alone
def test_a_worker_says_within_5s_that_it_cannot_connect():
    watched = start_worker_of_nobody()
    try:
        at = watched.wait_for(r"cannot connect to the eventq server", timeout_s=15)
    finally:
        watched.kill()
    assert at < FEEDBACK_S, f"said after {at:.1f}s"


# The client reports after failing this long (eventq/client/connecting.py), and gives up
# a connection after its 30 s connect timeout, which a worker's slots then retry.
REPORT_AFTER_S = 3.0
PAST_THE_CONNECT_TIMEOUT_S = 33.0


@pytest.mark.slow  # watches the worker for 36 s: past the connect timeout, to a reminder
def test_a_worker_that_cannot_connect_says_it_once_and_then_only_reminds():
    """Past the client's 30 s connect timeout too: no line per slot and retry. Counted
    from the first line (its connecting began about REPORT_AFTER_S before it), so a
    slow start of the process moves the watch, not what it sees."""
    watched = start_worker_of_nobody()
    try:
        at = watched.wait_for(r"cannot connect to the eventq server", timeout_s=120)
        time.sleep(PAST_THE_CONNECT_TIMEOUT_S - REPORT_AFTER_S)
        code = watched.interrupt()
    finally:
        watched.kill()
    assert code == 0
    lines = [line for _, line in watched.lines if "stop" not in line]
    assert len(lines) == 2, watched.output  # said, and reminded once (after 15 s)
    assert "eventq serve --listen-port" in lines[0] and "still cannot" in lines[1]
    assert "lease failed" not in watched.output
    assert_plain(watched.output)
    print(f"said after {at:.1f}s")


# --- eventq worker with a program that cannot run ---------------------------------------


@pytest.mark.parametrize("kind", ["missing", "not executable", "not on PATH"])
def test_a_worker_refuses_a_program_it_cannot_run_at_start(tmp_path, kind):
    program = {"missing": "./missing-program", "not executable": "./plain-file",
               "not on PATH": "no-such-program-27"}[kind]
    (tmp_path / "plain-file").write_text("echo hi\n")
    server = CountingListener()
    try:
        _, done = run("worker", "--server", server.address, "--queue", "q", "--", program,
                      cwd=tmp_path)
        assert done.returncode == 2, done
        assert server.callers() == 0  # at start: before it called the server
    finally:
        server.sock.close()
    [line] = done.stderr.splitlines()
    assert line.startswith("eventq worker: ") and program in line, line
    if kind == "not executable":
        assert "chmod +x" in line


def test_a_worker_runs_a_program_it_can_run(tmp_path):
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\ncat\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    watched = Watched.start([*EVENTQ, "worker", "--server", f"127.0.0.1:{nobody_listens()}",
                             "--queue", "q", "--", "./job.sh"], cwd=tmp_path)
    try:
        time.sleep(1.0)
        assert watched.process.poll() is None, watched.output  # accepted: it runs
    finally:
        watched.kill()
