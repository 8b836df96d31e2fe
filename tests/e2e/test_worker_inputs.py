"""A worker hands a job its inputs (docs/workflows.md, "Inputs") through a live server
and broker: a Python handler declared with inputs=True reads ``job.inputs`` in -after
order (one that did not declare them is told so), a program reads them as files in
``$EVENTQ_INPUTS``, whose directory is gone once it ends, and the examples of
docs/workflows.md, "From Python" (the DAG, the handler, and `eventq worker --inputs` with
a shell one-liner) do what it says."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from e2e.test_worker import Running, queue

from eventq.client import Client
from eventq.worker import Worker

pytestmark = pytest.mark.kafka

WORKFLOWS_DOC = Path(__file__).resolve().parents[2] / "docs" / "workflows.md"
WAIT_MS = 30_000


def upstreams_then_dependent(client: Client, upstream_queue: str, dependent_queue: str,
                             ) -> tuple[uuid.UUID, uuid.UUID, uuid.UUID]:
    """Upstreams a and b, and a dependent added after=[b, a]: -after order is not the
    order they were added in (nor, b being slower, the order they complete in)."""
    a = client.add(upstream_queue, b"a")
    b = client.add(upstream_queue, b"b")
    dependent = client.add(dependent_queue, b"d", after=[b, a])
    return a, b, dependent


def upstream_handler(job):
    if job.payload == b"b":
        time.sleep(0.3)
    return b"result of " + job.payload


def test_a_handler_that_asked_reads_its_inputs_in_after_order(server):
    up, dep, alone, undeclared = (queue(label) for label in ("up", "dep", "alone", "undeclared"))
    seen: dict[str, tuple] = {}
    worker = Worker(port=server.port, concurrency=4)
    worker.add_handler(up, upstream_handler)

    @worker.handler(dep, inputs=True)
    def dependent(job):
        seen[job.text] = tuple((entry.id, entry.ok, entry.data) for entry in job.inputs)
        return b"|".join(entry.data for entry in job.inputs)

    @worker.handler(undeclared)
    def forgot(job):
        return job.inputs

    with Client(port=server.port) as client, Running(worker):
        a, b, d = upstreams_then_dependent(client, up, dep)
        no_upstreams = client.add(dep, b"alone")
        told = client.add(undeclared, b"x", after=[a])
        result = client.result(d, wait_timeout_ms=WAIT_MS)
        assert (result.ok, result.data) == (True, b"result of b|result of a")
        assert seen["d"] == ((b, True, b"result of b"), (a, True, b"result of a"))
        assert client.result(no_upstreams, wait_timeout_ms=WAIT_MS).data == b""
        assert seen["alone"] == ()
        failed = client.result(told, wait_timeout_ms=WAIT_MS)
    assert not failed.ok
    assert failed.text.startswith(f"InputsNotDeclared: job.inputs: the worker did not fetch "
                                  f"the inputs of this job of queue {undeclared!r}")
    assert "inputs=True" in failed.text


# Prints where its inputs were, their names, and their content concatenated.
SEES_INPUTS = [sys.executable, "-c", """
import json, os
where = os.environ['EVENTQ_INPUTS']
names = sorted(os.listdir(where))
content = ''.join(open(os.path.join(where, name)).read() for name in names)
print(json.dumps({'where': where, 'names': names, 'content': content}))
"""]


@pytest.fixture
def inputs_tmpdir(tmp_path, monkeypatch) -> Path:
    """A TMPDIR of the test's own, where this process's inputs directories are made,
    so that what is left behind can be seen."""
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    return tmp_path


def test_a_program_reads_its_inputs_as_files_that_are_gone_afterwards(server, inputs_tmpdir):
    up, dep = queue("up"), queue("program")
    worker = Worker(port=server.port, concurrency=4)
    worker.add_handler(up, upstream_handler)
    worker.add_program(dep, SEES_INPUTS, inputs=True)
    with Client(port=server.port) as client, Running(worker):
        a, b, d = upstreams_then_dependent(client, up, dep)
        result = client.result(d, wait_timeout_ms=WAIT_MS)
    assert result.ok, result.text
    seen = json.loads(result.data)
    assert seen["names"] == [f"001-{b}", f"002-{a}"]
    assert seen["content"] == "result of bresult of a"
    assert Path(seen["where"]).parent == inputs_tmpdir
    assert not os.path.exists(seen["where"]) and list(inputs_tmpdir.iterdir()) == []


def doc_block(language: str, marker: str) -> str:
    """The one ```language block of docs/workflows.md, "From Python", that holds
    ``marker``."""
    blocks = re.findall(rf"```{language}\n(.*?)```", WORKFLOWS_DOC.read_text(), flags=re.S)
    [block] = [block for block in blocks if marker in block]
    return block


def test_the_docs_inputs_examples_do_what_they_say(server, tmp_path):
    """The docs' handler (inputs=True) and its `eventq worker --inputs` line, as
    written but for the server and queue: each returns a dependent's inputs
    concatenated in -after order, and the program leaves no directory behind."""
    handler_code = doc_block("python", "inputs=True")
    [command] = [line for line in doc_block("sh", "--inputs").splitlines()
                 if "--inputs" in line]
    argv = shlex.split(command)
    assert argv[:2] == [".venv/bin/eventq", "worker"] and "report" in argv
    python_queue, program_queue, up = queue("report"), queue("report-program"), queue("up")

    worker = Worker(port=server.port, concurrency=4)
    worker.add_handler(up, upstream_handler)
    namespace = {"worker": worker}
    exec(compile(handler_code.replace('"report"', repr(python_queue)), "docs/workflows.md",
                 "exec"), namespace)

    program_argv = [sys.executable, "-m", "eventq.cli", *argv[1:]]
    program_argv[program_argv.index("report")] = program_queue
    program_argv[4:4] = ["--server", f"127.0.0.1:{server.port}"]
    process = subprocess.Popen(program_argv, stderr=subprocess.PIPE, text=True,
                               env=dict(os.environ, TMPDIR=str(tmp_path)))
    try:
        with Client(port=server.port) as client, Running(worker):
            _, _, by_handler = upstreams_then_dependent(client, up, python_queue)
            _, _, by_program = upstreams_then_dependent(client, up, program_queue)
            handled = client.result(by_handler, wait_timeout_ms=WAIT_MS)
            run = client.result(by_program, wait_timeout_ms=WAIT_MS)
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    assert (handled.ok, handled.data) == (True, b"result of bresult of a")
    assert (run.ok, run.data) == (True, b"result of bresult of a"), stderr
    assert process.returncode == 0, stderr
    assert list(tmp_path.iterdir()) == []


def test_the_docs_dag_runs_in_edge_order_and_hands_results_down(server):
    """The DAG of docs/workflows.md, "From Python", as written but for the server and
    queues, worked by a worker with the docs' inputs handler: d runs last with b's and c's
    results."""
    dag_code = doc_block("python", 'after=[b, c]')
    handler_code = doc_block("python", "inputs=True")
    etl, report = queue("etl"), queue("report")
    ran: list[str] = []

    def etl_handler(job):
        ran.append(job.text)
        return job.text

    worker = Worker(port=server.port, concurrency=1)
    worker.add_handler(etl, etl_handler)
    namespace = {"worker": worker, "Client": Client}
    exec(compile(handler_code.replace('"report"', repr(report)), "docs/workflows.md", "exec"),
         namespace)
    dag = (dag_code.replace('"127.0.0.1", 9922', f'"127.0.0.1", {server.port}')
           .replace('"etl"', repr(etl)).replace('"report"', repr(report)))
    exec(compile(dag, "docs/workflows.md", "exec"), namespace)
    with Client(port=server.port) as client:
        assert client.inspect_job(namespace["d"]).state == "waiting"
        with Running(worker):
            published = client.result(namespace["d"], wait_timeout_ms=WAIT_MS)
    assert ran[0] == "extract" and sorted(ran[1:]) == ["clean", "enrich"]
    assert (published.ok, published.data) == (True, b"cleanenrich")


def test_a_three_level_fan_in_worked_by_workers_hands_every_result_down(server):
    """Nine leaves, three middles of three leaves each, one root over the middles, added
    root first; a worker whose handler (inputs=True) returns its payload followed by its
    inputs in brackets: the root's result holds every leaf, each under its middle, in
    -after order, and every job ran once, after all its upstreams."""
    q = queue("fan-in")
    ran: list[bytes] = []

    def node(job):
        ran.append(job.payload)
        inner = b"".join(b"[" + given.data + b"]" for given in job.inputs)
        return job.payload + inner

    worker = Worker(port=server.port, concurrency=4)
    worker.add_handler(q, node, inputs=True)
    leaves = [[uuid.uuid4() for _ in range(3)] for _ in range(3)]
    middles = [uuid.uuid4() for _ in range(3)]
    with Client(port=server.port) as client:
        root = client.add(q, b"r", after=middles)
        for m, (middle, its_leaves) in enumerate(zip(middles, leaves)):
            client.add(q, b"m%d" % m, id=middle, after=its_leaves)
        for m, its_leaves in enumerate(leaves):
            for n, leaf in enumerate(its_leaves):
                client.add(q, b"l%d%d" % (m, n), id=leaf)
        with Running(worker):
            result = client.result(root, wait_timeout_ms=WAIT_MS)
    expected = b"r" + b"".join(
        b"[m%d" % m + b"".join(b"[l%d%d]" % (m, n) for n in range(3)) + b"]" for m in range(3))
    assert (result.ok, result.data) == (True, expected)
    assert sorted(ran) == sorted([b"r", b"m0", b"m1", b"m2",
                                  *(b"l%d%d" % (m, n) for m in range(3) for n in range(3))])
    at = {payload: index for index, payload in enumerate(ran)}
    assert at[b"r"] == len(ran) - 1
    for m in range(3):  # a middle after its own leaves (another's may still be running)
        assert all(at[b"l%d%d" % (m, n)] < at[b"m%d" % m] for n in range(3))
