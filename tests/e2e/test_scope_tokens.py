"""Tokens with a queue-name prefix on a live server (docs/security.md, "Queue-name
prefixes"): two tenants' tokens each confined to their queues (Forbidden outside, their
jobs -NOT-FOUND to the other, listings filtered, a dependent never told of the other
tenant's upstream), the audit name of each command in the command log and on the
dashboard's job page, and two processes of one cluster that forward a tenant's requests
with its scope and name."""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

import pytest

from eventq.observe import pages
from eventq.observe.joblog import job_history
from support.lines import Line
from tools.servers import started_with_tokens

pytestmark = [pytest.mark.kafka]

ADMIN, ACME, ZED = "adm-Sc7", "acme-Sc7", "zed-Sc7"
# line 2: admin (the peers' token), line 3: acme, line 4: zed
TOKENS = f"""\
# eventq tokens (docs/security.md, "A tokens file")
{ADMIN} admin
{ACME} producer,worker acme.
{ZED} producer,worker,reader zed.
"""
ACME_NAME, ZED_NAME = "line-3", "line-4"


@pytest.fixture(scope="module")
def tokens_file(server) -> Path:
    return Path(server.settings["tokens-file"])


@pytest.fixture(scope="module")
def server(kafka_bootstrap, tmp_path_factory):
    process = started_with_tokens(kafka_bootstrap, f"m{os.getpid()}-scope",
                                  tmp_path_factory.mktemp("scope"), TOKENS, ADMIN)
    yield process
    code = process.stop()
    assert code == 0, process.log_tail()


def add(job_id: uuid.UUID, queue: str, flags: str = "") -> bytes:
    return b"add %s %s 10000 60000 2%s\r\nhi\r\n" % (str(job_id).encode(), queue.encode(),
                                                      flags.encode())


def test_each_tenant_sees_and_acts_on_its_queues_only(server):
    n = time.monotonic_ns()
    acme, zed = Line(server.port, ACME), Line(server.port, ZED)
    ours, theirs = uuid.uuid4(), uuid.uuid4()
    try:
        assert acme.ask(add(ours, f"acme.{n}")) == b"+OK\r\n"
        assert acme.ask(add(uuid.uuid4(), f"zed.{n}")) == b"-CLIENT-ERROR Forbidden\r\n"
        assert zed.ask(add(theirs, f"zed.{n}", " -tags=t%d" % n)) == b"+OK\r\n"
        assert acme.ask(b"lease zed.%d 0\r\n" % n) == b"-CLIENT-ERROR Forbidden\r\n"
        assert acme.ask(b"inspect server\r\n") == b"-CLIENT-ERROR Forbidden\r\n"
        assert acme.ask(b"inspect digest\r\n") == b"-CLIENT-ERROR Forbidden\r\n"
        for request in (b"inspect job %s\r\n", b"result %s 0\r\n", b"delete %s\r\n",
                        b"complete %s 2\r\nok\r\n", b"retry %s\r\n"):
            assert acme.ask(request % str(theirs).encode()) == b"-NOT-FOUND\r\n", request
        assert acme.ask(add(theirs, f"acme.{n}")) == b"-CLIENT-ERROR Duplicate job\r\n"
        # Listings: only the tenant's queues and jobs.
        queues = acme.blocks(b"inspect queues 0 100\r\n")
        assert b"acme.%d " % n in queues and b"zed." not in queues, queues
        assert zed.blocks(b"inspect tagged t%d 0 10\r\n" % n).startswith(b"+OK 1\r\n")
        assert acme.ask(b"inspect tagged t%d 0 10\r\n" % n) == b"+OK 0\r\n"
        # zed's job is still there, untouched, for zed.
        assert zed.blocks(b"inspect job %s\r\n" % str(theirs).encode()).count(b"state 0") == 1
    finally:
        acme.close()
        zed.close()


def test_a_dependent_never_hears_of_another_tenants_upstream(server):
    n = time.monotonic_ns()
    acme, zed = Line(server.port, ACME), Line(server.port, ZED)
    upstream, dependent, control = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    try:
        assert zed.ask(add(upstream, f"zed.{n}")) == b"+OK\r\n"
        assert acme.ask(add(dependent, f"acme.{n}", f" -after={upstream}")) == b"+OK\r\n"
        mine = uuid.uuid4()
        assert acme.ask(add(mine, f"acme.{n}u")) == b"+OK\r\n"
        assert acme.ask(add(control, f"acme.{n}", f" -after={mine}")) == b"+OK\r\n"
        for line, queue, job in ((zed, f"zed.{n}", upstream), (acme, f"acme.{n}u", mine)):
            leased = line.ask(b"lease %s 5000\r\n" % queue.encode(), lines=3)
            assert leased.startswith(b"+OK 1\r\n%s " % str(job).encode()), leased
            assert line.ask(b"complete %s 6\r\nsecret\r\n" % str(job).encode()) == b"+OK\r\n"
        # The control, inside its scope, is released; the other waits, holding nothing.
        deadline = time.monotonic() + 20
        while b"state 0" not in acme.blocks(b"inspect job %s\r\n" % str(control).encode()):
            assert time.monotonic() < deadline, "the in-scope dependent was not released"
            time.sleep(0.1)
        time.sleep(1)
        block = acme.blocks(b"inspect job %s\r\n" % str(dependent).encode())
        assert b"state 5" in block and b"waiting 1" in block, block
        assert acme.ask(b"inputs %s\r\n" % str(dependent).encode()) == b"+OK 0\r\n"
    finally:
        acme.close()
        zed.close()


def test_the_command_log_and_the_job_page_name_who_issued_each_command(server):
    n = time.monotonic_ns()
    acme = Line(server.port, ACME)
    job = uuid.uuid4()
    try:
        assert acme.ask(add(job, f"acme.{n}")) == b"+OK\r\n"
        assert acme.ask(b"lease acme.%d 5000\r\n" % n, lines=3).startswith(b"+OK 1\r\n")
        assert acme.ask(b"complete %s 2\r\nok\r\n" % str(job).encode()) == b"+OK\r\n"
    finally:
        acme.close()
    history = job_history(server.bootstrap, server.settings["commands-topic"],
                          server.partitions, job)
    issued = [(row.command, row.issuer) for row in history.rows]
    assert [c for c, _ in issued][:3] == ["add", "start-attempt", "complete"], issued
    assert all(by == ACME_NAME for _, by in issued[:3]), issued
    html = pages.job_page([("name", f"acme.{n}")], b"hi", "ok", history.rows, history.note,
                          str(job), "completed", pages.Frame(process="p", actions=False))
    assert html.count(f"by {ACME_NAME}") >= 3
    for token in (ADMIN, ACME, ZED):
        assert token not in html


def test_two_processes_forward_a_tenants_requests_with_its_scope_and_name(
        kafka_bootstrap, tmp_path, tokens_file):
    """Adds through the first process, reads through the second: some of the 16 jobs
    live in the other's partitions, so they are forwarded; the owner applies the
    client's scope (-NOT-FOUND to the other tenant) and writes the client's name."""
    from tools.servers import ServerProcess, start_together

    prefix = f"m{os.getpid()}-scope2"
    processes = [ServerProcess(kafka_bootstrap, prefix, tmp_path / f"p{i}",
                               tokens_file=str(tokens_file)) for i in range(2)]
    for process in processes:
        process.ready_auth = b"auth %s\r\n" % ADMIN.encode()
    processes[0].create_topics()
    start_together(processes)
    try:
        n = time.monotonic_ns()
        first, acme2, zed2 = (Line(processes[0].port, ACME), Line(processes[1].port, ACME),
                              Line(processes[1].port, ZED))
        ids = [uuid.uuid4() for _ in range(16)]
        for job in ids:
            assert first.ask(add(job, f"acme.{n}")) == b"+OK\r\n"
        for job in ids:
            assert zed2.ask(b"inspect job %s\r\n" % str(job).encode()) == b"-NOT-FOUND\r\n"
            assert zed2.ask(b"delete %s\r\n" % str(job).encode()) == b"-NOT-FOUND\r\n"
            assert acme2.blocks(b"inspect job %s\r\n" % str(job).encode()).startswith(b"+OK 1")
        queues = zed2.blocks(b"inspect queues 0 100\r\n")
        assert b"acme." not in queues, queues
        assert acme2.blocks(b"inspect queues 0 100\r\n").count(b"ready-len 16") == 1
        for line in (first, acme2, zed2):
            line.close()
        for job in ids:
            history = job_history(kafka_bootstrap, processes[0].settings["commands-topic"],
                                  processes[0].partitions, job)
            rows = [(r.command, r.issuer) for r in history.rows]
            assert rows[0] == ("add", ACME_NAME), rows
            # zed's deletes, refused, forwarded or not: written under zed's name.
            assert rows[1:] == [("delete", ZED_NAME)], rows
    finally:
        codes = [process.stop() for process in processes]
    assert codes == [0, 0], [p.log_tail() for p in processes]
    logs = "".join(p.log_path.read_text(errors="replace") for p in processes)
    import re

    assert sum(int(k) for k in re.findall(r"(\d+) requests forwarded", logs)) > 0, logs[-3000:]
