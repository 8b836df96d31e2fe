"""Issue 27's feedback rules that need no process: when a failure that keeps happening
is said, the flags a mistyped one may have meant, what a port that cannot be bound
means, which programs a worker refuses, and where a Python worker's lines go."""

from __future__ import annotations

import errno
import io
import logging
import socket

import pytest

from eventq.cli import did_you_mean, unrecognized
from eventq.client.connecting import (
    REMIND_FIRST_S, REMIND_MAX_S, Reminder, cannot_connect, what_to_do,
)
from eventq.listeners import (
    Endpoint, Listeners, PortUnusable, bind_endpoint, endpoints, port_problem,
)
from eventq.settings import Settings
from eventq.worker.output import default_output
from eventq.worker.program import program_problem

# --- Reminder ------------------------------------------------------------------------


def said_at(reminder: Reminder, times: list[float]) -> list[float]:
    return [t for t in times if reminder.failed(t)]


def test_a_failure_is_said_once_it_lasted_then_at_doubling_intervals():
    reminder = Reminder(report_after_s=3.0)
    every_tenth = [100 + n / 10 for n in range(0, 10_000)]  # 1,000 s of failures
    said = said_at(reminder, every_tenth)
    assert said[0] == pytest.approx(103.0)
    gaps = [round(b - a) for a, b in zip(said, said[1:])]
    assert gaps[:5] == [REMIND_FIRST_S, 2 * REMIND_FIRST_S, 4 * REMIND_FIRST_S,
                        8 * REMIND_FIRST_S, 16 * REMIND_FIRST_S]
    assert max(gaps) == REMIND_MAX_S


def test_a_short_failure_is_not_said_and_a_recovery_only_after_one_that_was():
    reminder = Reminder(report_after_s=3.0)
    assert said_at(reminder, [0.0, 1.0, 2.9]) == []
    assert reminder.recovered(3.5) is None  # never said: nothing to take back
    assert said_at(reminder, [10.0, 12.0, 13.0]) == [13.0]  # a new run counts afresh
    assert reminder.recovered(20.0) == pytest.approx(10.0)
    assert said_at(reminder, [30.0, 33.0]) == [33.0]


def test_a_reminder_with_no_delay_says_the_first_failure_at_once():
    assert said_at(Reminder(report_after_s=0.0), [5.0, 5.1, 19.9, 20.0]) == [5.0, 20.0]


def test_connection_messages_say_what_to_do():
    assert "`make run`, or `eventq serve`" in what_to_do("127.0.0.1", 9922)
    assert "`eventq serve --listen-port 9999`" in what_to_do("127.0.0.1", 9999)
    refused = ConnectionRefusedError(errno.ECONNREFUSED, "Connect call failed ('h', 1)")
    assert cannot_connect("h", 1, refused, 30.2) == (
        "cannot connect to the eventq server at h:1 (Connection refused, for 30s): is it "
        "running? Start one with `eventq serve --listen-port 1`, or give the address it "
        "listens on")


# --- flags ---------------------------------------------------------------------------

SERVE_FLAGS = ["--help", "--kafka-port", "--controller-port", "--listen-host",
               "--listen-port", "--http-port", "--partitions", "--bootstrap"]


@pytest.mark.parametrize(("typed", "meant"), [
    ("--port", "--listen-port"),
    ("--port=9999", "--listen-port"),
    ("--host", "--listen-host"),
    ("--bootstrap-servers", "--bootstrap"),
    ("--partition", "--partitions"),
    ("--listen-prot", "--listen-port"),
])
def test_a_mistyped_flag_suggests_the_one_meant_first(typed, meant):
    assert did_you_mean(typed, SERVE_FLAGS)[0] == meant


def test_an_unknown_flag_far_from_any_suggests_only_help():
    assert did_you_mean("--zzz", SERVE_FLAGS) == []
    assert unrecognized(["--zzz"], SERVE_FLAGS, "eventq serve") == (
        "unrecognized arguments: --zzz (`eventq serve --help` lists what it takes)")
    assert unrecognized(["--port", "1"], ["--listen-port"], "eventq client") == (
        "unrecognized arguments: --port 1 (did you mean --listen-port? `eventq client "
        "--help` lists what it takes)")


# --- ports ---------------------------------------------------------------------------

GATEWAY = Endpoint("the workq protocol", "127.0.0.1", 9922, "--listen-port", "--listen-host")
DASHBOARD = Endpoint("the dashboard and metrics", "127.0.0.1", 9980, "--http-port",
                     "--http-port HOST:PORT", ", or --http-port off")


def test_a_port_in_use_names_it_and_the_flag_to_change():
    text = port_problem(GATEWAY, OSError(errno.EADDRINUSE, "Address already in use"))
    assert text.startswith("cannot serve the workq protocol on 127.0.0.1:9922: the port "
                           "is in use")
    assert text.endswith(": give another --listen-port")
    text = port_problem(DASHBOARD, OSError(errno.EADDRINUSE, "Address already in use"))
    assert text.endswith(": give another --http-port, or --http-port off")


def test_an_address_not_of_this_machine_names_the_host_flag():
    text = port_problem(GATEWAY, OSError(errno.EADDRNOTAVAIL, "Cannot assign requested address"))
    assert "Cannot assign requested address" in text and text.endswith("--listen-host")
    assert "below 1024" in port_problem(GATEWAY, OSError(errno.EACCES, "Permission denied"))


def test_the_endpoints_of_settings():
    settings = Settings(listen_port=7000, http_port="7001")
    assert [(e.host, e.port, e.port_flag) for e in endpoints(settings)] == [
        ("127.0.0.1", 7000, "--listen-port"), ("127.0.0.1", 7001, "--http-port")]
    assert len(endpoints(Settings(http_port="off"))) == 1


def test_a_port_someone_listens_on_cannot_be_bound():
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        taken = Endpoint("x", "127.0.0.1", other.getsockname()[1], "--p", "--h")
        with pytest.raises(PortUnusable, match="in use"):
            bind_endpoint(taken, listen=False)


def test_listeners_hold_their_ports_until_handed_over_or_closed():
    settings = Settings(listen_port=0, http_port="127.0.0.1:0")
    listeners = Listeners.bind(settings)
    try:
        port = listeners.gateway.getsockname()[1]
        assert listeners.web is not None
        # Listening: a client's connection waits for the server instead of failing,
        # and nobody else can take the port meanwhile.
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        with pytest.raises(PortUnusable):
            bind_endpoint(Endpoint("x", "127.0.0.1", port, "--p", "--h"), listen=True)
    finally:
        listeners.close()
    assert Listeners.bind(Settings(listen_port=port, http_port="off")).web is None


# --- programs -------------------------------------------------------------------------


def test_programs_a_worker_refuses(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "plain").write_text("echo\n")
    (tmp_path / "run.sh").write_text("#!/bin/sh\n")
    (tmp_path / "run.sh").chmod(0o755)
    assert "no program at ./nope" in program_problem("./nope")
    assert "not executable: chmod +x ./plain" in program_problem("./plain")
    assert "is a directory" in program_problem(str(tmp_path))
    assert "on PATH" in program_problem("no-such-program-27")
    assert program_problem("./run.sh") is None
    assert program_problem("cat") is None


# --- a Python worker's lines ----------------------------------------------------------


def no_logging_configured(monkeypatch) -> None:
    """As in a plain script: no handler anywhere (pytest's own, added as each test's
    call begins, are set aside)."""
    monkeypatch.setattr(logging.getLogger(), "handlers", [])
    for name in ("eventq", "eventq.worker", "eventq.client"):
        monkeypatch.setattr(logging.getLogger(name), "handlers", [])
        monkeypatch.setattr(logging.getLogger(name), "level", logging.NOTSET)


def test_a_worker_in_a_program_without_logging_shows_its_lines(monkeypatch):
    no_logging_configured(monkeypatch)
    stream = io.StringIO()
    with default_output(stream) as ours:
        assert ours
        logging.getLogger("eventq.worker").info("job 1 outcome=completed")
        logging.getLogger("eventq.client").warning("cannot connect")
        logging.getLogger("eventq.other").info("not a worker's news")
    logging.getLogger("eventq.worker").info("after run(): not ours to show")
    lines = stream.getvalue().splitlines()
    assert [line.split(" ", 3)[2:] for line in lines] == [
        ["INFO", "job 1 outcome=completed"], ["WARNING", "cannot connect"]]
    assert "\x1b" not in stream.getvalue()  # not a terminal
    assert logging.getLogger("eventq.worker").level == logging.NOTSET
    assert not logging.getLogger("eventq").handlers


def test_a_worker_leaves_a_programs_own_logging_alone(monkeypatch):
    no_logging_configured(monkeypatch)
    mine = io.StringIO()
    logging.getLogger().addHandler(logging.StreamHandler(mine))
    stream = io.StringIO()
    with default_output(stream) as ours:
        assert not ours
        logging.getLogger("eventq.worker").warning("to the program's handler")
    assert stream.getvalue() == "" and "to the program's handler" in mine.getvalue()
